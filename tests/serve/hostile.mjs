// hostile.mjs — careless and hostile HTTP clients for tests/integration/test_serve_hostile.sh,
// on raw sockets (node's net module), so each does exactly what a bad client does:
//
//   trickle HOST PORT N FROM HOLD_S   open N connections from local address FROM (another
//                                     loopback address such as 127.0.0.2 is another client;
//                                     A.B.C.D+K: round robin over K addresses from A.B.C.D),
//                                     each sending a request's header lines one every 0.5 s
//                                     and never finishing them; prints "holding" once they
//                                     are all started, then after HOLD_S seconds a JSON
//                                     summary: {opened, refused, closed: [seconds open, ...]}
//   halfclose HOST PORT PATH BODY     send one request (Connection: close), shut the writing
//                                     side (FIN) and read the reply to its end
//   raw HOST PORT FILE                send FILE's bytes as they are, read until the server
//                                     closes (or 5 s), print what came back
//   flood URL N                       N POSTs of BODY (env FLOOD_BODY) over 8 keep-alive
//                                     connections; prints {"<status>": count, ...}
import net from "node:net";
import http from "node:http";
import fs from "node:fs";

const [cmd, ...args] = process.argv.slice(2);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function trickle(host, port, n, from, holdS) {
  const t0 = Date.now();
  const res = { opened: 0, refused: 0, closed: [] };
  const socks = [];
  const [base, k] = from.split("+");
  const q = base.split(".").map(Number);
  const addr = (i) => k ? [q[0], q[1], q[2], q[3] + (i % +k)].join(".") : base;
  for (let i = 0; i < n; i++) {
    const s = net.connect({ host, port: +port, localAddress: addr(i) });
    let line = 0, timer = null;
    s.on("connect", () => {
      res.opened++;
      s.write(`POST /v1/completions HTTP/1.1\r\nHost: ${host}\r\n`);
      timer = setInterval(() => s.write(`X-Trickle-${line++}: a\r\n`), 500);
    });
    s.on("error", () => {});
    s.on("close", () => {
      clearInterval(timer);
      if (!s.connecting && s.bytesWritten > 0) res.closed.push((Date.now() - t0) / 1000);
      else res.refused++;
    });
    socks.push(s);
    if (i % 50 === 49) await sleep(10);
  }
  await sleep(1000);
  console.log("holding");
  await sleep(holdS * 1000);
  for (const s of socks) s.destroy();
  await sleep(200);
  console.log(JSON.stringify(res));
}

function halfclose(host, port, path, body) {
  const s = net.connect({ host, port: +port, allowHalfOpen: true });
  const chunks = [];
  s.on("connect", () => {
    s.write(`POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    s.end(); // FIN: nothing more to send, still reading
  });
  s.on("data", (d) => chunks.push(d));
  s.on("end", () => process.stdout.write(Buffer.concat(chunks)));
  s.on("error", (e) => { console.error(String(e)); process.exit(1); });
}

function raw(host, port, file) {
  const s = net.connect({ host, port: +port });
  const chunks = [];
  s.on("connect", () => s.write(fs.readFileSync(file)));
  s.on("data", (d) => chunks.push(d));
  const done = () => { process.stdout.write(Buffer.concat(chunks)); process.exit(0); };
  s.on("close", done);
  s.on("error", () => {});
  setTimeout(done, 5000);
}

async function flood(url, n) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  const body = process.env.FLOOD_BODY || '{"prompt": "Hi", "max_tokens": 1}';
  const counts = {};
  let next = 0;
  const one = () => new Promise((resolve) => {
    const req = http.request(url, { method: "POST", agent,
      headers: { "Content-Type": "application/json" } }, (r) => {
      r.resume();
      r.on("end", () => { counts[r.statusCode] = (counts[r.statusCode] || 0) + 1; resolve(); });
    });
    req.on("error", () => { counts.error = (counts.error || 0) + 1; resolve(); });
    req.end(body);
  });
  const worker = async () => { while (next++ < n) await one(); };
  await Promise.all(Array.from({ length: 8 }, worker));
  agent.destroy();
  console.log(JSON.stringify(counts));
}

if (cmd === "trickle") await trickle(args[0], args[1], +args[2], args[3], +args[4]);
else if (cmd === "halfclose") halfclose(...args);
else if (cmd === "raw") raw(...args);
else if (cmd === "flood") await flood(args[0], +args[1]);
else { console.error(`unknown command ${cmd}`); process.exit(2); }
