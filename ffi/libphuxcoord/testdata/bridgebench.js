// bridgebench.js is testdata/bridgebench's figures with Node.js as the
// plugin: the process an IDE plugin (VS Code) drives the bridge from, one
// event-loop thread reading the bridge's stdout. Arguments and output are
// gobench's: `node bridgebench.js N THREADS EVENTS` with PHUX_BRIDGE (the
// phux-coordctl binary) and PHUX_CONFIG in the environment; it prints
// "commands_seq", "commands_par", then "ready", waits for a line on stdin
// and prints "events".
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
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

const NOTE = Buffer.from('{"jsonrpc":"2.0","method":"mirror.event"');
const ADD_END = Buffer.from('"type":"add"}}}');
const KIND = Buffer.from(',"kind":"');
const OBJECTIVE = Buffer.from('OBJECTIVE"');
const LENGTH = Buffer.from('Content-Length: ');

// starts reports whether buf holds prefix at off.
const starts = (buf, prefix, off) =>
  off >= 0 && buf.length >= off + prefix.length && buf.compare(prefix, 0, prefix.length, off, off + prefix.length) === 0;

// objectiveAdd reports whether a notification adds an Objective: the
// event's type is read from the message's end and the object's kind from
// its first "kind" member, as the projection's keys are sorted
// (docs/ffi.md), so that routing a notification scans little of it.
function objectiveAdd(body) {
  if (!starts(body, ADD_END, body.length - ADD_END.length)) return false;
  const i = body.indexOf(KIND);
  return i >= 0 && starts(body, OBJECTIVE, i + KIND.length);
}

// contentLength is the Content-Length of the header block buf[off:end].
function contentLength(buf, off, end) {
  if (starts(buf, LENGTH, off)) { // the bridge's own header, read in place
    let n = 0;
    let i = off + LENGTH.length;
    for (; i < end && buf[i] >= 0x30 && buf[i] <= 0x39; i++) n = n * 10 + buf[i] - 0x30;
    if (i === end) return n;
  }
  return Number(/Content-Length: (\d+)/i.exec(buf.toString('latin1', off, end))[1]);
}

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
    const len = contentLength(buf, off, end);
    if (buf.length < end + 4 + len) break;
    const start = end + 4;
    off = start + len;
    if (starts(buf, NOTE, start)) {
      const add = objectiveAdd(buf.subarray(start, off)); // before the gate too: warmUp compiles it
      if (!gated) {
        lastNote = Date.now();
        continue;
      }
      total++;
      if (add && ++objs === events) counted(process.hrtime.bigint());
      continue;
    }
    const body = buf.subarray(start, off);
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

// warmUp runs the reader over 12,000 notifications before the Mirror
// opens, with nothing in flight: an Objective's add and an Operation's
// add from coordjson's golden files (the projection's own bytes,
// compacted), 6000 times each. A plugin's reader has long been compiled
// by V8 when a burst comes, and without it the figure would time V8's
// tier-up (a cold pass over the same messages is 2-3 times slower than a
// warm one here). Uncounted: the Mirror is not gated yet.
function warmUp() {
  const golden = (name) => JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..',
    'coordclient', 'coordjson', 'testdata', name), 'utf8'));
  const frame = (event) => {
    const m = JSON.stringify({ jsonrpc: '2.0', method: 'mirror.event', params: { mirror: 0, event } });
    return `Content-Length: ${Buffer.byteLength(m)}\r\n\r\n${m}`;
  };
  const pair = frame(golden('mirror_add.json')) +
    frame({ initial: false, object: golden('record_operation.json'), type: 'add' });
  const all = Buffer.from(pair.repeat(6000));
  for (let off = 0; off < all.length; off += 65536) onData(all.subarray(off, off + 65536));
  if (buffered !== 0) throw new Error('warm-up left a partial message');
}

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

  warmUp();
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
