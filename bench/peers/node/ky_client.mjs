// ky (npm) with its own retry support: retry.limit R on 408/413/429/500/502/503/504;
// on 413/429/503 it waits Retry-After (seconds, HTTP-date), else RateLimit-Reset,
// X-RateLimit-Retry-After, X-RateLimit-Reset (GitHub's epoch) or
// X-Rate-Limit-Reset; otherwise 0.3 s x 2^(n-1). Worker i sends X-Client-Id: ID-wi.
import ky from 'ky';
import { options, run, version } from './pool.mjs';

const opts = options('ky');
const api = ky.create({ retry: { limit: opts.retries }, timeout: 30000 });
await run('ky', version('ky'), opts, async (url, w) => {
  try {
    const r = await api.get(url, { headers: { 'X-Client-Id': `${opts.clientId}-w${w}` } });
    await r.arrayBuffer();
    return String(r.status);
  } catch (e) {
    return e?.response?.status ? String(e.response.status) : 'error';
  }
});
