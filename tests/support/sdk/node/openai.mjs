// openai (Node) pointed at abide proxy: chat completions, JSON or streamed.
//   node openai.mjs --base URL/v1 [--calls N] [--parallel P] [--mode json|stream|mixed]
//        [--max-retries R] [--timeout-ms T] [--header "Name: value"]...
// --max-retries and --timeout-ms: the SDK's own default when not given.
// Output: common.mjs; each successful call adds "text" (the answer's content).
import OpenAI from "openai";
import { options, runCalls, stainlessClientOptions, streamed } from "./common.mjs";

const a = options({ base: "", calls: 1, parallel: 1, mode: "json", maxRetries: -1, timeoutMs: 0 }, ["header"]);
const client = new OpenAI(stainlessClientOptions(a, "sk-test-not-a-key"));

await runCalls(a.calls, a.parallel, (i) => (streamed(a, i) ? "stream" : "json"), async (i) => {
  const request = { model: "gpt-4o-mini", messages: [{ role: "user", content: `call ${i}` }] };
  if (!streamed(a, i)) {
    const r = await client.chat.completions.create(request);
    return { text: r.choices[0].message.content };
  }
  const stream = await client.chat.completions.create({ ...request, stream: true });
  let text = "";
  let events = 0;
  for await (const chunk of stream) {
    ++events;
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  return { text, events };
});
