// bridgebench.js is testdata/bridgebench's figures with Node.js as the
// plugin: the process an IDE plugin (VS Code) drives the bridge from, one
// event-loop thread reading the bridge's stdout. Arguments and output are
// gobench's: `node bridgebench.js N THREADS EVENTS` with PHUX_BRIDGE (the
// phux-coordctl binary) and PHUX_CONFIG in the environment (and PHUX_GOLDEN,
// coordclient/coordjson/testdata, when the script is not in this tree); it prints
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
let total = 0; // notifications taken since the last reset
let objs = 0; // of them, Objectives added
// lastAnswer is the last response parsed: a plugin keeps its answers, and
// V8 throws away compiled code that checks for the shape of an object
// none of which is left (the answers' shapes, when the last one is
// collected), so that without it the reader was compiled again under
// the clock.
let lastAnswer = null;
let finished = null; // resolves the drain's promise: see counted
let rest = null; // the bytes of a message that straddles two reads

// The reader is what a plugin that cares about a burst of notifications
// would write: it frames and routes each message with byte loops over the
// chunk Node hands it (a call into Buffer's C++ methods, or a view made
// per message, costs more than the bytes it looks at), copies only a
// message that straddles two chunks, and parses only the responses.
const bytes = (s) => Array.from(Buffer.from(s));
const LENGTH = bytes('Content-Length: ');
const NOTE = bytes('{"jsonrpc":"2.0","method":"mirror.event"');
const ADD_END = bytes('"type":"add"}}}');
const KIND = bytes(',"kind":"');
const OBJECTIVE = bytes('OBJECTIVE"');

// at reports whether buf[off:end] starts with the bytes p.
function at(buf, p, off, end) {
  if (off < 0 || end - off < p.length) return false;
  for (let i = 0; i < p.length; i++) if (buf[off + i] !== p[i]) return false;
  return true;
}

// find is the offset of the first p in buf[off:end], or -1.
function find(buf, p, off, end) {
  for (let i = off; i + p.length <= end; i++) if (buf[i] === p[0] && at(buf, p, i, end)) return i;
  return -1;
}

// counted is called when objs reaches events. The function the reader
// calls stays the same from the warm-up on: V8 inlines a call's target
// into the reader's compiled code, and the code of a reader whose
// callee was replaced (and collected) is thrown away and compiled again,
// under the clock.
function counted(t) {
  if (finished !== null) finished(t);
}

// framed is the end of the message that starts at buf[off], or -1 when
// buf[off:end] does not hold all of it; bodyAt is then its body's start
// and need its whole length when the header was complete (else 0).
let bodyAt = 0;
let need = 0;
function framed(buf, off, end) {
  need = 0;
  let i = off;
  let n = 0;
  if (at(buf, LENGTH, off, end)) { // the bridge's own header, read in place
    for (i += LENGTH.length; i < end && buf[i] >= 0x30 && buf[i] <= 0x39; i++) n = n * 10 + buf[i] - 0x30;
    if (end - i < 4) return -1;
    if (buf[i] !== 13 || buf[i + 1] !== 10 || buf[i + 2] !== 13 || buf[i + 3] !== 10) i = -1;
  } else i = -1;
  if (i < 0) { // any other header block
    const h = buf.indexOf('\r\n\r\n', off);
    if (h < 0 || h + 4 > end) return -1;
    n = Number(/Content-Length: (\d+)/i.exec(buf.toString('latin1', off, h))[1]);
    i = h;
  }
  bodyAt = i + 4;
  need = bodyAt + n - off;
  return bodyAt + n <= end ? bodyAt + n : -1;
}

// message takes the message buf[start:end]. A notification is routed
// without parsing: the event's type is read from the message's end and
// the object's kind from its first "kind" member after the envelope's
// fixed prefix, as the projection's keys are sorted (docs/ffi.md).
function message(buf, start, end) {
  if (at(buf, NOTE, start, end)) {
    total++;
    if (at(buf, ADD_END, end - ADD_END.length, end)) {
      const k = find(buf, KIND, start + NOTE.length, end);
      if (k >= 0 && at(buf, OBJECTIVE, k + KIND.length, end) && ++objs === events) counted(process.hrtime.bigint());
    }
    return;
  }
  const msg = JSON.parse(buf.toString('utf8', start, end));
  lastAnswer = msg;
  const p = pending.get(msg.id);
  pending.delete(msg.id);
  if (msg.error) throw new Error(`bridge error: ${JSON.stringify(msg.error)}`);
  p(msg.result);
}

// onData takes every complete message out of a chunk, after completing
// the one the previous chunk ended inside.
function onData(chunk) {
  let off = 0;
  if (rest !== null) {
    // The header is read from the straddler's bytes and at most 64 of the
    // chunk's; then only the bytes the message still needs are copied.
    let head = Buffer.concat([rest, chunk.subarray(0, 64)]);
    let e = framed(head, 0, head.length);
    if (e < 0 && need > 0 && need - rest.length <= chunk.length) {
      head = Buffer.concat([rest, chunk.subarray(0, need - rest.length)]);
      e = framed(head, 0, head.length);
    }
    if (e >= 0) {
      off = e - rest.length;
      rest = null;
      message(head, bodyAt, e);
    } else { // a longer header, or a message longer than the chunk
      chunk = Buffer.concat([rest, chunk]);
      rest = null;
    }
  }
  const end = chunk.length;
  for (let e; off < end && (e = framed(chunk, off, end)) >= 0; off = e) message(chunk, bodyAt, e);
  if (off < end) rest = Buffer.from(chunk.subarray(off)); // a copy: Node may reuse the chunk's memory
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
// warm one here). Uncounted: the counters are reset when the clock starts.
// The same bytes, cut at odd sizes (a message split inside its header, its
// body, or across several chunks), check the reader's framing first.
function warmUp() {
  const dir = process.env.PHUX_GOLDEN || path.join(__dirname, '..', '..', '..', 'coordclient', 'coordjson', 'testdata');
  const golden = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
  const frame = (event) => {
    const m = JSON.stringify({ jsonrpc: '2.0', method: 'mirror.event', params: { mirror: 0, event } });
    return `Content-Length: ${Buffer.byteLength(m)}\r\n\r\n${m}`;
  };
  const pair = frame(golden('mirror_add.json')) +
    frame({ initial: false, object: golden('record_operation.json'), type: 'add' });
  const all = Buffer.from(pair.repeat(6000));
  const take = (sizes) => {
    [total, objs] = [0, 0];
    for (let off = 0, i = 0; off < all.length; off += sizes[i++ % sizes.length]) {
      onData(all.subarray(off, off + sizes[i % sizes.length]));
    }
    if (rest !== null || total !== 12000 || objs !== 6000) {
      throw new Error(`reader: ${total} notifications, ${objs} objectives, ${rest ? rest.length : 0} bytes left`);
    }
  };
  take([1, 7, 64, 333, 4096, 2, 1000]);
  // Several passes: the last objective of each is counted, and the first
  // time that branch runs V8 drops the code compiled without it; the later
  // passes leave the reader compiled with every branch it takes.
  for (let i = 0; i < 4; i++) take([65536]);
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
  for (let seen = -1, quiet = 0; quiet < 20; quiet++) { // the initial state, until LIVE and quiet for 2 s
    if (total !== seen) [seen, quiet] = [total, 0];
    await sleep(100);
  }
  child.stdout.pause(); // notifications queue while the plugin waits
  const done = new Promise((r) => { finished = r; });
  console.log('ready');
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((r) => rl.once('line', r));
  rl.close();
  // The reader counts from here, on the same path it took in the warm-up
  // and for the initial state (a branch first taken under the clock would
  // send V8 back to recompile it).
  total = 0;
  objs = 0;
  t = process.hrtime.bigint();
  child.stdout.resume();
  const end = await done;
  console.log(`events ${total} ${Number(end - t) / 1e9}`);
  child.stdin.end();
  await new Promise((r) => child.on('exit', r));
}

main().catch((e) => { console.error(e); process.exit(1); });
