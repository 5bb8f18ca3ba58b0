// stripe (Node) pointed at abide proxy: customers.create, a POST, with the
// SDK's default retries (2: it then sends an Idempotency-Key) unless
// --max-retries says otherwise. Telemetry off.
//   node stripe.mjs --base URL [--calls N] [--parallel P] [--max-retries R]
//        [--header "Name: value"]...
// Output: common.mjs; each successful call adds "id".
import Stripe from "stripe";
import { headerObject, options, recordingFetch, runCalls } from "./common.mjs";

const a = options({ base: "", calls: 1, parallel: 1, maxRetries: -1 }, ["header"]);
const base = new URL(a.base);
const stripe = new Stripe("sk_test_not_a_key", {
  host: base.hostname,
  port: base.port,
  protocol: base.protocol.replace(":", ""),
  telemetry: false,
  httpClient: Stripe.createFetchHttpClient(recordingFetch),
  ...(a.maxRetries >= 0 ? { maxNetworkRetries: a.maxRetries } : {}),
});
const headers = headerObject(a.header);

await runCalls(a.calls, a.parallel, () => "customers.create", async (i) => {
  const c = await stripe.customers.create({ email: `c${i}@example.test` }, { headers });
  return { id: c.id };
});
