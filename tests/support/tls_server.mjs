// A TLS test server for `abide fetch` (tests/support/tls_server.h starts it):
// HTTP/2 and HTTP/1.1 over TLS on one port (ALPN decides), 127.0.0.1 only,
// plus a plain HTTP control port from which a test reads what the TLS port
// saw. Written for Node 18 (Debian 12), with its standard modules only.
//
//   node tls_server.mjs --cert FILE --key FILE --root DIR [--http1-only] [--max-streams N]
//   (--max-streams: the HTTP/2 streams a connection may have open at once)
//   (--http1-only: HTTP/1.1 over TLS, with no ALPN offered: a server that
//   does not speak HTTP/2)
//   prints: listening on 127.0.0.1:TLS_PORT control 127.0.0.1:CONTROL_PORT
//
// TLS port:
//   GET /version             the HTTP version this request came in ("2.0", "1.1")
//   GET /files/NAME          the bytes of DIR/NAME (NAME: letters, digits, . _ -)
//   GET /once/CODE/KEY?ra=S  the first request for KEY is answered CODE with
//                            `Retry-After: S` and a body that names it; every
//                            later one 200 "final body for KEY". With &with=hold
//                            that first answer waits (at most 2 s) until
//                            /hold/KEY has arrived: both are then in flight at
//                            once however slowly the client connects
//   GET /hold/KEY?ms=M       200, once M ms have passed since /once/.../KEY was
//                            refused (or after 10 s)
//   POST /echo               200 with the request's body
//   GET /headers             200 application/json: the request's fields as received
// Control port:
//   GET /log                 {"connections": N, "tls_errors": [...], "requests": [...]},
//                            each request {path, version, alpn, arrived_ms, answered_ms}
//                            (answered_ms: when its answer began to be written)
//                            on the monotonic clock (ms), in order of arrival
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import path from 'node:path';

function option(name) {
  const i = process.argv.indexOf(name);
  if (i < 0 || i + 1 >= process.argv.length) {
    console.error(`tls_server: ${name} is required`);
    process.exit(2);
  }
  return process.argv[i + 1];
}

const root = option('--root');
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

const log = { connections: 0, tls_errors: [], requests: [] };
// KEY of /once/CODE/KEY to when its refusal was answered (monotonic ms).
const answeredOnce = new Map();
// KEYs of /hold/KEY requests that have arrived.
const holdArrived = new Set();

function answer(req, res) {
  const entry = {
    path: req.url,
    version: req.httpVersion,
    // h2: the session's socket knows the protocol ALPN chose; h1: the socket itself.
    alpn: (req.stream ? req.stream.session.alpnProtocol : req.socket.alpnProtocol) || null,
    arrived_ms: nowMs(),
    answered_ms: null,
  };
  log.requests.push(entry);

  const url = new URL(req.url, 'https://127.0.0.1');
  const parts = url.pathname.split('/').filter((p) => p.length > 0);
  const send = (status, body, headers = {}) => {
    // Taken before the answer is written: the client receives it later still,
    // and a Retry-After counts from that receipt, so a retry that arrives
    // sooner than answered_ms + hint is early by any reckoning.
    entry.answered_ms = nowMs();
    res.writeHead(status, { 'content-type': 'application/octet-stream', 'content-length': body.length, ...headers });
    res.end(body);
  };

  if (parts.length === 1 && parts[0] === 'version') return send(200, Buffer.from(req.httpVersion));
  if (parts.length === 2 && parts[0] === 'files' && /^[A-Za-z0-9._-]+$/.test(parts[1])) {
    fs.readFile(path.join(root, parts[1]), (err, data) => {
      if (err) send(404, Buffer.from('no such file\n'));
      else send(200, data);
    });
    return undefined;
  }
  if (parts.length === 3 && parts[0] === 'once' && /^[0-9]{3}$/.test(parts[1])) {
    const key = parts[2];
    if (!answeredOnce.has(key)) {
      const ra = url.searchParams.get('ra') || '1';
      const waitForHold = url.searchParams.get('with') === 'hold';
      const giveUp = nowMs() + 2000;
      answeredOnce.set(key, undefined);  // taken: a later request is the final one
      const refuse = () => {
        if (waitForHold && !holdArrived.has(key) && nowMs() < giveUp) return setTimeout(refuse, 2);
        answeredOnce.set(key, nowMs());
        return send(Number(parts[1]), Buffer.from(`refused body ${parts[1]} for ${key}\n`), { 'retry-after': ra });
      };
      return refuse();
    }
    return send(200, Buffer.from(`final body for ${key}\n`));
  }
  if (parts.length === 2 && parts[0] === 'hold') {
    // Answered `ms` after /once/.../KEY was refused (at most 10 s from now):
    // keeps a client's other worker busy until well after that refusal reached it.
    const key = parts[1];
    holdArrived.add(key);
    const ms = Number(url.searchParams.get('ms') || '0');
    const giveUp = nowMs() + 10000;
    const check = () => {
      const refused = answeredOnce.get(key);
      const now = nowMs();
      if ((refused !== undefined && now >= refused + ms) || now >= giveUp) send(200, Buffer.from(`held for ${key}\n`));
      else setTimeout(check, 5);
    };
    return check();
  }
  if (parts.length === 1 && parts[0] === 'echo' && req.method === 'POST') {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => send(200, Buffer.concat(chunks)));
    return undefined;
  }
  if (parts.length === 1 && parts[0] === 'headers') {
    return send(200, Buffer.from(JSON.stringify(req.headers)), { 'content-type': 'application/json' });
  }
  return send(404, Buffer.from('not found\n'));
}

const tlsOptions = { cert: fs.readFileSync(option('--cert')), key: fs.readFileSync(option('--key')) };
const server = process.argv.includes('--http1-only')
  ? https.createServer(tlsOptions, answer)
  : http2.createSecureServer({
    ...tlsOptions, allowHTTP1: true,
    ...(process.argv.includes('--max-streams')
      ? { settings: { maxConcurrentStreams: Number(option('--max-streams')) } } : {}),
  }, answer);
// Every attempt of a client opens its own connection when the last one failed
// its handshake, so connections count attempts that never got a request in.
server.on('connection', () => { log.connections += 1; });
server.on('tlsClientError', (err) => { log.tls_errors.push(String(err && err.message)); });

const control = http.createServer((req, res) => {
  if (req.url === '/log') {
    const body = Buffer.from(JSON.stringify(log));
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    return res.end(body);
  }
  res.writeHead(404);
  return res.end();
});

server.listen(0, '127.0.0.1', () => {
  control.listen(0, '127.0.0.1', () => {
    console.log(`listening on 127.0.0.1:${server.address().port} control 127.0.0.1:${control.address().port}`);
  });
});

// Stopped by the test with SIGTERM: end at once, whatever is open.
process.on('SIGTERM', () => process.exit(0));
