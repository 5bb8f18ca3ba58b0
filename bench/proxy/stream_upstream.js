// The streams scenario's upstream (bench/proxy/run.py --streams): an HTTP/2
// server over TLS on 127.0.0.1 (HTTP/1.1 too, as ALPN decides) that holds
// many trickled event streams at once. HTTP/2, so that a proxy's libcurl
// multiplexes thousands of streams over a few connections: over HTTP/1.1
// 10,000 streams would take 10,000 upstream sockets, and the proxy twice
// that in descriptors. Node 18+, standard modules only.
//
//   node stream_upstream.js --cert FILE --key FILE [--port 0] [--events 5] [--interval-ms 1000]
//                           [--spread-ms INTERVAL]
//   prints: listening on 127.0.0.1:TLS_PORT control 127.0.0.1:CONTROL_PORT
//
// TLS port:
//   GET /stream  200 text/event-stream, no Content-Length: EVENTS events
//                `id: I\ndata: I/EVENTS t=MS\n\n`, INTERVAL apart, then the end.
//                MS is this process's monotonic clock in ms (CLOCK_MONOTONIC,
//                which the load generator reads too) when the event was
//                written, so a caller can tell how late it arrived. The first
//                event comes after a random delay in [0, spread): callers that
//                all ask at once get their events spread over the interval,
//                a steady trickle, not one burst per interval.
//   GET /fresh   200 "fresh\n" at once.
// Control port (plain HTTP):
//   GET /stats   {"sessions", "sessions_open", "sessions_peak", "h1_sockets",
//                 "streams_started", "streams_done", "streams_aborted",
//                 "streams_open", "streams_peak", "streams_per_session_peak",
//                 "fresh", "tls_errors"}
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const http2 = require('node:http2');

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    if (fallback !== undefined) return fallback;
    console.error(`stream_upstream: ${name} is required`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const events = Number(option('--events', '5'));
const intervalMs = Number(option('--interval-ms', '1000'));
const spreadMs = Number(option('--spread-ms', String(intervalMs)));
const port = Number(option('--port', '0'));
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

const stats = {
  sessions: 0, sessions_open: 0, sessions_peak: 0, h1_sockets: 0,
  streams_started: 0, streams_done: 0, streams_aborted: 0, streams_open: 0, streams_peak: 0,
  streams_per_session_peak: 0, fresh: 0, tls_errors: 0,
};
const perSession = new WeakMap();  // session -> streams open on it

function stream(req, res) {
  stats.streams_started += 1;
  stats.streams_open += 1;
  stats.streams_peak = Math.max(stats.streams_peak, stats.streams_open);
  const session = req.stream && req.stream.session;
  if (session) {
    const n = (perSession.get(session) || 0) + 1;
    perSession.set(session, n);
    stats.streams_per_session_peak = Math.max(stats.streams_per_session_peak, n);
  }
  let ended = false;
  let timer = null;
  const finish = (clean) => {
    if (ended) return;
    ended = true;
    if (timer) clearTimeout(timer);
    stats.streams_open -= 1;
    if (clean) stats.streams_done += 1;
    else stats.streams_aborted += 1;
    if (session) perSession.set(session, (perSession.get(session) || 1) - 1);
  };
  res.on('close', () => finish(false));  // after a clean end, finish() has run already
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  const next = () => {
    i += 1;
    res.write(`id: ${i}\ndata: ${i}/${events} t=${nowMs().toFixed(3)}\n\n`);
    if (i >= events) {
      finish(true);
      res.end();
    } else {
      timer = setTimeout(next, intervalMs);
    }
  };
  timer = setTimeout(next, Math.random() * spreadMs);
}

function answer(req, res) {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/stream') return stream(req, res);
  if (req.method === 'GET' && path === '/fresh') {
    stats.fresh += 1;
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 6 });
    return res.end('fresh\n');
  }
  res.writeHead(404, { 'content-type': 'text/plain', 'content-length': 10 });
  return res.end('not found\n');
}

const server = http2.createSecureServer(
  {
    cert: fs.readFileSync(option('--cert')),
    key: fs.readFileSync(option('--key')),
    allowHTTP1: true,
    // Streams per connection as the client wants them (libcurl asks 100),
    // and room for their buffers: Node refuses new streams on a session
    // past maxSessionMemory (10 MB by default).
    settings: { maxConcurrentStreams: 100000 },
    maxSessionMemory: 1000,
  },
  answer,
);
server.on('session', (session) => {
  stats.sessions += 1;
  stats.sessions_open += 1;
  stats.sessions_peak = Math.max(stats.sessions_peak, stats.sessions_open);
  session.on('close', () => { stats.sessions_open -= 1; });
});
server.on('secureConnection', (socket) => {
  if (socket.alpnProtocol !== 'h2') stats.h1_sockets += 1;
});
server.on('tlsClientError', () => { stats.tls_errors += 1; });
server.setTimeout(0);

const control = http.createServer((req, res) => {
  if (req.url === '/stats') {
    const body = Buffer.from(JSON.stringify(stats));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    return res.end(body);
  }
  res.writeHead(404);
  return res.end();
});

server.listen(port, '127.0.0.1', 4096, () => {
  control.listen(0, '127.0.0.1', () => {
    console.log(`listening on 127.0.0.1:${server.address().port} control 127.0.0.1:${control.address().port}`);
  });
});

process.on('SIGTERM', () => process.exit(0));
