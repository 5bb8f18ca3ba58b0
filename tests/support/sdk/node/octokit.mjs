// @octokit/rest with plugin-throttling and plugin-retry pointed at abide proxy.
//   node octokit.mjs --base URL [--steps get,post,paginate,...] [--per-page N]
//        [--budget S] [--no-retry-429] [--header "Name: value"]...
// Steps: get (repos.get), post (issues.create), paginate (every page of
// issues.listForRepo). onRateLimit and onSecondaryRateLimit retry when the
// wait they are given fits in --budget seconds, as octokit's documentation
// advises a caller that cannot wait longer; each call is recorded.
// --no-retry-429 adds 429 to plugin-retry's doNotRetry: else it retries a 429
// three times, a second apart, whatever the answer says.
// Output: common.mjs, and per call "limit_calls": [{"kind", "retry_after", "retry_count"}]
// (+ "items": the number of issues a paginate step collected).
import { Octokit } from "@octokit/rest";
import { retry } from "@octokit/plugin-retry";
import { throttling } from "@octokit/plugin-throttling";
import { headerObject, options, recordingFetch, runCalls } from "./common.mjs";

const a = options({ base: "", steps: "get", perPage: 2, budget: 60, noRetry429: false }, ["header"]);
const steps = a.steps.split(",");
const extra = headerObject(a.header);
let limitCalls = [];

const handler = (kind) => (retryAfter, _options, _octokit, retryCount) => {
  limitCalls.push({ kind, retry_after: retryAfter, retry_count: retryCount });
  return retryAfter <= a.budget && retryCount < 2;
};

const octokit = new (Octokit.plugin(throttling, retry))({
  auth: "ghp_test_not_a_token",
  baseUrl: a.base,
  request: { fetch: recordingFetch },
  throttle: { onRateLimit: handler("primary"), onSecondaryRateLimit: handler("secondary") },
  ...(a.noRetry429 ? { retry: { doNotRetry: [400, 401, 403, 404, 410, 422, 429, 451] } } : {}),
  log: { debug() {}, info() {}, warn() {}, error() {} },
});
octokit.hook.before("request", (o) => Object.assign(o.headers, extra));

const owner = "octo";
const repo = "tests";
await runCalls(steps.length, 1, (i) => steps[i], async (i) => {
  limitCalls = [];
  try {
    const step = steps[i];
    if (step === "get") {
      const r = await octokit.rest.repos.get({ owner, repo });
      return { status: r.status, limit_calls: limitCalls, name: r.data.full_name };
    }
    if (step === "post") {
      const r = await octokit.rest.issues.create({ owner, repo, title: `issue of call ${i}` });
      return { status: r.status, limit_calls: limitCalls, number: r.data.number };
    }
    if (step === "paginate") {
      const items = await octokit.paginate(octokit.rest.issues.listForRepo, { owner, repo, per_page: a.perPage });
      return { limit_calls: limitCalls, items: items.length, numbers: items.map((x) => x.number) };
    }
    throw new Error(`unknown step ${step}`);
  } catch (err) {
    if (err && typeof err === "object") err.callFields = { limit_calls: limitCalls };
    throw err;
  }
});
