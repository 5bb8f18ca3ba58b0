// Shared by ky_client.mjs and got_client.mjs: the command line, a pool of N
// async workers over the URL list, and the summary file.
//
//   node X_client.mjs --urls FILE --jobs N --client-id ID --retries R --summary OUT.json
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

export function options(name) {
  const { values } = parseArgs({
    options: {
      urls: { type: 'string' },
      jobs: { type: 'string', default: '8' },
      'client-id': { type: 'string', default: name },
      retries: { type: 'string', default: '10' },
      summary: { type: 'string', default: '/dev/stdout' },
    },
  });
  if (!values.urls) {
    console.error(`${name}: --urls is required`);
    process.exit(2);
  }
  return {
    urls: readFileSync(values.urls, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean),
    jobs: Number(values.jobs),
    clientId: values['client-id'],
    retries: Number(values.retries),
    summary: values.summary,
  };
}

// get(url, workerIndex) resolves to the final status as a string ("200",
// "429", ..., or "error").
export async function run(name, version, opts, get) {
  const finals = {};
  let next = 0;
  const start = performance.now();
  const worker = async (w) => {
    while (next < opts.urls.length) {
      const url = opts.urls[next++];
      const final = await get(url, w);
      finals[final] = (finals[final] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: opts.jobs }, (_, w) => worker(w)));
  const elapsed = (performance.now() - start) / 1000;
  const done = finals['200'] ?? 0;
  const ended = Object.values(finals).reduce((a, b) => a + b, 0);
  const summary = {
    client: name, version, requests: opts.urls.length, done, failed: ended - done,
    final_status: finals, elapsed_s: Math.round(elapsed * 1000) / 1000,
  };
  writeFileSync(opts.summary, JSON.stringify(summary) + '\n');
}

export function version(pkg) {
  return JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), 'utf8')).version;
}
