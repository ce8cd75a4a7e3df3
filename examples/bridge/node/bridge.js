// A phux coordinator client for Node.js through `phux-coordctl bridge`:
// JSON-RPC 2.0 over the child's stdin/stdout, LSP-style Content-Length
// framing, shapes from the coordjson schema (docs/ffi.md). Copy it.
//
//   PHUX_COORDCTL=phux-coordctl PHUX_CONFIG='{"address":...}' node bridge.js
'use strict';
const { spawn } = require('child_process');
const { randomBytes } = require('crypto');

class Bridge {
  constructor(bin) {
    this.child = spawn(bin || 'phux-coordctl', ['bridge'], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.nextId = 1;
    this.pending = new Map();   // request id -> {resolve, reject}
    this.onEvent = () => {};    // (mirror handle, mirror_event) for "mirror.event"
    this.gone = null;           // why the bridge has gone (an Error): every call then rejects with it
    this.exited = new Promise((resolve) => {
      const end = (why) => {
        this.gone = this.gone || new Error(`phux-coordctl bridge ${why}`);
        for (const p of this.pending.values()) p.reject(this.gone);
        this.pending.clear(); resolve();
      };
      this.child.on('error', (e) => end(`failed: ${e.message}`)); // not found (ENOENT), ...
      this.child.on('close', (code, signal) => end(`exited (${signal || code})`)); // after its output
    });
    this.child.stdin.on('error', () => {}); // EPIPE once it has gone: 'close' says so
    let buf = Buffer.alloc(0);
    this.child.stdout.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const m = /Content-Length: (\d+)/i.exec(buf.subarray(0, end).toString());
        const n = Number(m[1]);
        if (buf.length < end + 4 + n) return;
        const msg = JSON.parse(buf.subarray(end + 4, end + 4 + n).toString());
        buf = buf.subarray(end + 4 + n);
        this.dispatch(msg);
      }
    });
  }

  dispatch(msg) {
    if (msg.method === 'mirror.event') return this.onEvent(msg.params.mirror, msg.params.event);
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    if (!msg.error) return p.resolve(msg.result);
    const e = new Error(`${msg.error.message}: ${msg.error.data ? msg.error.data.reason : ''}`);
    e.rpc = msg.error; // data is the coordjson "error": code, reason, sentinels
    p.reject(e);
  }

  // send writes one framed message, header and body in one write (one
  // wake-up of the bridge); raw lets a test send anything.
  send(body) {
    const b = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
    this.child.stdin.write(Buffer.concat([Buffer.from(`Content-Length: ${b.length}\r\n\r\n`), b]));
  }

  call(method, params) {
    if (this.gone) return Promise.reject(this.gone);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  close() { this.child.stdin.end(); return this.exited; }
}

const newId = () => randomBytes(16).toString('hex');
module.exports = { Bridge, newId };

// The example: create an Objective and watch it arrive in a Mirror.
async function main() {
  const b = new Bridge(process.env.PHUX_COORDCTL);
  const { client } = await b.call('open', { config: JSON.parse(process.env.PHUX_CONFIG) });
  const id = newId();
  const seen = new Promise((resolve) => {
    b.onEvent = (_, ev) => {
      if (ev.type === 'state' || ev.type === 'gap') console.log('mirror', ev.state);
      if (ev.object && ev.object.id === id) resolve(ev.object);
    };
  });
  await b.call('mirror.open', { client });
  const doc = Buffer.from('ship the plugin').toString('base64');
  const res = await b.call('command', {
    client, command: { kind: 'CREATE_OBJECTIVE', payload: { objective_id: id, schema: 1, document: doc } },
  });
  console.log('CREATE_OBJECTIVE', res.operation.tag, res.operation.result.object.id);
  const obj = await seen;
  console.log('mirror has objective', obj.id, 'revision', obj.revision, obj.payload.state);
  await b.call('close', { client });
  await b.close();
}

if (require.main === module) main().catch((e) => { console.error(e.rpc || e); process.exit(1); });
