// @anthropic-ai/sdk pointed at abide proxy: messages, JSON or streamed.
//   node anthropic.mjs --base URL [--calls N] [--parallel P] [--mode json|stream|mixed]
//        [--max-retries R] [--timeout-ms T] [--header "Name: value"]...
// --max-retries and --timeout-ms: the SDK's own default when not given.
// Output: common.mjs; each successful call adds "text" (the answer's content).
import Anthropic from "@anthropic-ai/sdk";
import { options, runCalls, stainlessClientOptions, streamed } from "./common.mjs";

const a = options({ base: "", calls: 1, parallel: 1, mode: "json", maxRetries: -1, timeoutMs: 0 }, ["header"]);
const client = new Anthropic(stainlessClientOptions(a, "sk-ant-test-not-a-key"));

await runCalls(a.calls, a.parallel, (i) => (streamed(a, i) ? "stream" : "json"), async (i) => {
  const request = { model: "test-model", max_tokens: 64, messages: [{ role: "user", content: `call ${i}` }] };
  if (!streamed(a, i)) {
    const r = await client.messages.create(request);
    return { text: r.content.map((b) => b.text).join("") };
  }
  const stream = await client.messages.create({ ...request, stream: true });
  let text = "";
  let events = 0;
  for await (const event of stream) {
    ++events;
    if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text;
  }
  return { text, events };
});
