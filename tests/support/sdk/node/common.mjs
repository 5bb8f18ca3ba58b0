// What the Node SDK clients of tests/proxy_sdk_test.cpp share: options, a
// fetch that records every request the SDK makes (so the test sees each retry
// and every URL it went to), and the JSON lines they print:
//   one per call: {"i", "call", "ok", "start_s", "elapsed_s", ... , "error": {
//     "class", "status", "retry_after", "retry_after_ms", "should_retry",
//     "outcome", "not_before", "message"}}
//   last: {"summary": true, "requests": [{"method", "url", "t_s", "status"}]}
// Times in seconds since the program started.

const t0 = performance.now();
export const now = () => Math.round(performance.now() - t0) / 1000;

// --name value pairs (repeatable ones collect into arrays) and --flag.
export function options(defaults, repeatable = []) {
  const a = { ...defaults };
  for (const name of repeatable) a[name] = [];
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; ++i) {
    const name = argv[i].replace(/^--/, "").replace(/-([a-z0-9])/g, (_, c) => c.toUpperCase());
    if (!(name in a)) throw new Error(`unknown option ${argv[i]}`);
    if (typeof a[name] === "boolean") a[name] = true;
    else if (Array.isArray(a[name])) a[name].push(argv[++i]);
    else a[name] = typeof a[name] === "number" ? Number(argv[++i]) : argv[++i];
  }
  return a;
}

// "Name: value" strings to an object.
export function headerObject(list) {
  const out = {};
  for (const h of list) {
    const c = h.indexOf(":");
    out[h.slice(0, c).trim()] = h.slice(c + 1).trim();
  }
  return out;
}

export const requests = [];

// globalThis.fetch, recording what went where.
export async function recordingFetch(input, init) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const method = (init?.method ?? (typeof input === "object" && input.method) ?? "GET").toUpperCase();
  const entry = { method, url, t_s: now() };
  requests.push(entry);
  const response = await fetch(input, init);
  entry.status = response.status;
  return response;
}

export function emit(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

// A header from a Headers object or a plain object, or null.
function header(headers, name) {
  if (!headers) return null;
  if (typeof headers.get === "function") return headers.get(name);
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return String(v);
  return null;
}

// What an SDK's error says: its class and the answer's status and fields.
export function describeError(err, headers = err?.headers ?? err?.response?.headers) {
  return {
    class: err?.constructor?.name ?? typeof err,
    type: err?.type ?? null,
    status: err?.status ?? err?.statusCode ?? null,
    retry_after: header(headers, "retry-after"),
    retry_after_ms: header(headers, "retry-after-ms"),
    should_retry: header(headers, "x-should-retry") ?? header(headers, "stripe-should-retry"),
    outcome: header(headers, "abide-outcome"),
    not_before: header(headers, "abide-not-before"),
    message: String(err?.message ?? err).slice(0, 300),
  };
}

// Runs calls 0..count-1 of `one(i)` on `parallel` workers; each call's line
// gets its timing, and "ok": false with the error when it throws (with the
// fields of the error's own `callFields`).
export async function runCalls(count, parallel, name, one) {
  let next = 0;
  async function worker() {
    for (let i = next++; i < count; i = next++) {
      const line = { i, call: name(i), start_s: now() };
      try {
        Object.assign(line, await one(i), { ok: true });
      } catch (err) {
        Object.assign(line, err?.callFields ?? {}, { ok: false, error: describeError(err) });
      }
      line.elapsed_s = Math.round((now() - line.start_s) * 1000) / 1000;
      emit(line);
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  emit({ summary: true, requests });
}
