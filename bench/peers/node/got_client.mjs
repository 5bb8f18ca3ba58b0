// got (npm) with its own retry support: retry.limit R on 408/413/429/500/502/503/504/
// 521/522/524; it waits Retry-After (seconds or HTTP-date) when present, else
// 1 s x 2^(n-1) plus up to 100 ms noise. Worker i sends X-Client-Id: ID-wi.
import got from 'got';
import { options, run, version } from './pool.mjs';

const opts = options('got');
const api = got.extend({ retry: { limit: opts.retries }, timeout: { request: 30000 } });
await run('got', version('got'), opts, async (url, w) => {
  try {
    const r = await api.get(url, { headers: { 'X-Client-Id': `${opts.clientId}-w${w}` } });
    return String(r.statusCode);
  } catch (e) {
    return e?.response?.statusCode ? String(e.response.statusCode) : 'error';
  }
});
