// The token workload sent straight by a vendor's Node SDK, with its own
// retries: node direct.mjs openai|anthropic BASE CALLERS < bodies.json
// Prints {"done": N}. The SDKs resolve from SDK_DIR (the folder whose
// node_modules holds them): ESM imports ignore NODE_PATH.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.env.SDK_DIR ?? process.cwd(), "package.json"));

const [vendor, base, callersText] = process.argv.slice(2);
const bodies = JSON.parse(readFileSync(0, "utf8"));
const callers = Number(callersText);
let client;
if (vendor === "anthropic") {
  const Anthropic = require("@anthropic-ai/sdk").default;
  client = new Anthropic({ apiKey: "x", baseURL: base });
} else {
  const OpenAI = require("openai").default;
  client = new OpenAI({ apiKey: "x", baseURL: `${base}/v1` });
}
let next = 0;
let done = 0;
async function caller() {
  while (next < bodies.length) {
    const b = bodies[next++];
    try {
      if (vendor === "anthropic") await client.messages.create(b);
      else await client.chat.completions.create(b);
      ++done;
    } catch {
      // a call the SDK gave up on
    }
  }
}
await Promise.all(Array.from({ length: callers }, caller));
console.log(JSON.stringify({ done }));
