// An SDK-style API client in Node (its global fetch) whose base URL points at
// `abide proxy`: the SDK keeps no retry logic of its own; the proxy paces the
// calls, waits as long as the server asked, and says on each answer what it
// did (Abide-* fields).
//
//   abide proxy --upstream https://api.example.com --port 8080 &
//   API_BASE_URL=http://127.0.0.1:8080 node sdk_client.mjs /items/1 /items/2
//
// Prints one line per call; exit 1 when any call failed.

class ApiClient {
  constructor({ baseUrl = process.env.API_BASE_URL ?? "http://127.0.0.1:8080", token = process.env.API_TOKEN,
                maxWaitS = process.env.API_MAX_WAIT } = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = token;
    this.maxWaitS = maxWaitS;
  }

  async get(path) {
    const headers = {};
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    // How long this call lets the proxy hold it for pacing and retries.
    if (this.maxWaitS !== undefined) headers["abide-max-wait"] = String(this.maxWaitS);
    const answer = await fetch(this.baseUrl + path, { headers });
    const body = await answer.arrayBuffer();
    return { status: answer.status, headers: answer.headers, bytes: body.byteLength };
  }
}

const paths = process.argv.length > 2 ? process.argv.slice(2) : ["/items/1"];
const client = new ApiClient();
const answers = await Promise.all(paths.map((p) => client.get(p)));
let failed = 0;
answers.forEach(({ status, headers, bytes }, i) => {
  console.log(JSON.stringify({
    path: paths[i],
    status,
    outcome: headers.get("abide-outcome"),
    attempts: headers.get("abide-attempts"),
    waited_s: headers.get("abide-waited"),
    not_before: headers.get("abide-not-before"),
    bytes,
  }));
  if (status >= 400) failed += 1;
});
process.exit(failed ? 1 : 0);
