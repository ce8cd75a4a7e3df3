// bridgebench.js is testdata/bridgebench's figures with Node.js as the
// plugin: the process an IDE plugin (VS Code) drives the bridge from, one
// event-loop thread reading the bridge's stdout. Arguments and output are
// gobench's: `node bridgebench.js N THREADS EVENTS` with PHUX_BRIDGE (the
// phux-coordctl binary) and PHUX_CONFIG in the environment; it prints
// "commands_seq", "commands_par", then "ready", waits for a line on stdin
// and prints "events".
'use strict';
const { spawn } = require('child_process');
const readline = require('readline');

const [n, threads, events] = process.argv.slice(2).map(Number);
const child = spawn(process.env.PHUX_BRIDGE, ['bridge'], { stdio: ['pipe', 'pipe', 'inherit'] });

let nextId = 1;
const pending = new Map();
let gated = false;
let lastNote = Date.now();
let total = 0;
let objs = 0;
let counted = null; // resolve of the events figure
let chunks = [];
let buffered = 0;

// onData takes every complete message out of what arrived; a
// notification is classified without parsing, as bridgebench does.
function onData(chunk) {
  chunks.push(chunk);
  buffered += chunk.length;
  let buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, buffered);
  let off = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', off);
    if (end < 0) break;
    const m = /Content-Length: (\d+)/i.exec(buf.toString('latin1', off, end));
    const len = Number(m[1]);
    if (buf.length < end + 4 + len) break;
    const body = buf.subarray(end + 4, end + 4 + len);
    off = end + 4 + len;
    if (body.indexOf('{"jsonrpc":"2.0","method":"mirror.event"') === 0) {
      if (!gated) {
        lastNote = Date.now();
        continue;
      }
      total++;
      if (body.indexOf('"type":"add"') >= 0 && body.indexOf('"kind":"OBJECTIVE","payload"') >= 0) {
        if (++objs === events) counted(process.hrtime.bigint());
      }
      continue;
    }
    const msg = JSON.parse(body.toString());
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) throw new Error(`bridge error: ${JSON.stringify(msg.error)}`);
    p(msg.result);
  }
  const rest = buf.subarray(off);
  chunks = rest.length ? [rest] : [];
  buffered = rest.length;
}
child.stdout.on('data', onData);

function call(method, params) {
  const id = nextId++;
  return new Promise((resolve) => {
    pending.set(id, resolve);
    const b = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
    child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${b.length}\r\n\r\n`), b]));
  });
}

const hex = (i) => 'b0' + i.toString(16).padStart(30, '0');
const secs = (t) => Number(process.hrtime.bigint() - t) / 1e9;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const { client } = await call('open', { config: JSON.parse(process.env.PHUX_CONFIG) });
  const command = (i) => call('command', { client, command: { kind: 'CREATE_OBJECTIVE',
    payload: { objective_id: hex(i), schema: 1, document: 'YmVuY2g=' } } });
  await command(2 ** 40);
  let t = process.hrtime.bigint();
  for (let i = 1; i <= n; i++) await command(i);
  console.log(`commands_seq ${n} ${secs(t)}`);

  const per = Math.floor(n / threads);
  t = process.hrtime.bigint();
  await Promise.all(Array.from({ length: threads }, async (_, th) => {
    for (let i = 0; i < per; i++) await command(0x100000 * (th + 1) + i);
  }));
  console.log(`commands_par ${per * threads} ${secs(t)}`);

  await call('mirror.open', { client });
  lastNote = Date.now();
  while (Date.now() - lastNote < 2000) await sleep(100); // the initial state, until LIVE and quiet
  gated = true;
  child.stdout.pause(); // notifications queue while the plugin waits
  const done = new Promise((r) => { counted = r; });
  console.log('ready');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((r) => rl.once('line', r));
  rl.close();
  t = process.hrtime.bigint();
  child.stdout.resume();
  const end = await done;
  console.log(`events ${total} ${Number(end - t) / 1e9}`);
  child.stdin.end();
  await new Promise((r) => child.on('exit', r));
}

main().catch((e) => { console.error(e); process.exit(1); });
