// A caller of `abide proxy` for its tests: Node's global fetch (undici), which
// never retries. Same options and output as client.py:
//   node client.mjs --url URL [--method M] [-H "Name: value"]... [--data BODY]
//        [--count K] [--parallel P] [--print-body] [--chunks] [--timeout S]
// One JSON line per answer: {"i", "status", "outcome", "attempts", "waited",
// "not_before", "retry_after", "body_len", "start_s", "start_unix", "head_s",
// "end_s"}
// (+ "body", + "chunks": [[t_s, text], ...]; "error" when the exchange failed).
// fetch keeps connections alive by itself; --keep-alive is accepted and ignored.

const t0 = performance.now();
const now = () => Math.round(performance.now() - t0) / 1000;

function parse(argv) {
  const a = { method: "GET", headers: {}, data: undefined, count: 1, parallel: 1, printBody: false, chunks: false, timeout: 60 };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    const v = () => argv[++i];
    if (k === "--url") a.url = v();
    else if (k === "--method") a.method = v();
    else if (k === "-H" || k === "--header") {
      const h = v();
      const c = h.indexOf(":");
      a.headers[h.slice(0, c).trim()] = h.slice(c + 1).trim();
    } else if (k === "--data") a.data = v();
    else if (k === "--count") a.count = Number(v());
    else if (k === "--parallel") a.parallel = Number(v());
    else if (k === "--timeout") a.timeout = Number(v());
    else if (k === "--print-body") a.printBody = true;
    else if (k === "--chunks") a.chunks = true;
    else if (k === "--keep-alive") {}
    else throw new Error("unknown option " + k);
  }
  if (!a.url) throw new Error("--url is required");
  return a;
}

const a = parse(process.argv.slice(2));
let next = 0;
const decoder = () => new TextDecoder("utf-8");

async function one(i) {
  const line = { i, start_s: now(), start_unix: Date.now() / 1000 };
  try {
    const r = await fetch(a.url, {
      method: a.method,
      headers: a.headers,
      body: a.data,
      signal: AbortSignal.timeout(a.timeout * 1000),
    });
    line.head_s = now();
    line.status = r.status;
    line.outcome = r.headers.get("abide-outcome");
    line.attempts = r.headers.get("abide-attempts");
    line.waited = r.headers.get("abide-waited");
    line.not_before = r.headers.get("abide-not-before");
    line.retry_after = r.headers.get("retry-after");
    let len = 0;
    let text = "";
    const chunks = [];
    const d = decoder();
    if (r.body) {
      for await (const piece of r.body) {
        len += piece.length;
        const s = d.decode(piece, { stream: true });
        if (a.chunks) chunks.push([now(), s]);
        if (a.printBody) text += s;
      }
    }
    line.end_s = now();
    line.body_len = len;
    if (a.printBody) line.body = text;
    if (a.chunks) line.chunks = chunks;
  } catch (e) {
    line.error = String(e && e.cause ? e.cause : e);
    line.end_s = now();
  }
  process.stdout.write(JSON.stringify(line) + "\n");
}

async function worker() {
  for (;;) {
    const i = next++;
    if (i >= a.count) return;
    await one(i);
  }
}

await Promise.all(Array.from({ length: Math.max(1, a.parallel) }, worker));
