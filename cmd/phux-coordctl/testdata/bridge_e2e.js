// The bridge end to end from Node.js (run by TestBridgeNode): open a
// client, mirror, create an Objective, start a Run, follow it to its end
// through notifications across a coordinator restart (GAP, replacement
// snapshot, new authority) and an explicit resync; bad input on the way.
// Lines "@@ STEP ..." ask the Go test to act; it answers "ok" on stdin.
'use strict';
const readline = require('readline');
const { Bridge, newId } = require(process.env.PHUX_BRIDGE_JS);

const rl = readline.createInterface({ input: process.stdin });
const answers = [];
let answered = null;
rl.on('line', (l) => { answers.push(l); if (answered) { answered(); answered = null; } });
async function ask(step) {
  console.log('@@ ' + step);
  while (answers.length === 0) await new Promise((r) => { answered = r; });
  return answers.shift();
}

const b = new Bridge(process.env.PHUX_COORDCTL);
const events = [];
let wake = () => {};
b.onEvent = (m, ev) => { events.push(ev); console.log('event', ev.type, (ev.gap && ev.gap.reason) || ev.state || ev.reason || (ev.object && ev.object.kind) || ''); wake(); };
async function waitEvent(what, pred) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const i = events.findIndex(pred);
    if (i >= 0) return events.splice(0, i + 1)[i];
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => { wake = r; setTimeout(r, 200); });
  }
}
// waitAll waits until each predicate has matched an event of its own, in
// any order, and returns them in the predicates' order: a Mirror's state
// transitions and its handler's notifications (replaced, object changes)
// are queued by different goroutines, so their order between each other
// is not fixed (a resync's "replaced" may follow its LIVE).
async function waitAll(what, ...preds) {
  const got = preds.map(() => undefined); // not new Array(n): every() skips its holes
  const deadline = Date.now() + 60000;
  for (;;) {
    for (let i = 0; i < events.length;) {
      const k = preds.findIndex((p, j) => got[j] === undefined && p(events[i]));
      if (k >= 0) { got[k] = events.splice(i, 1)[0]; } else { i++; }
    }
    if (got.every((g) => g !== undefined)) return got;
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => { wake = r; setTimeout(r, 200); });
  }
}
function assert(c, msg) { if (!c) throw new Error('assertion failed: ' + msg); }
async function refused(p, code, reason) {
  try { await p; } catch (e) {
    assert(e.rpc.code === code && e.rpc.data.reason === reason, `want ${code} ${reason}, have ${JSON.stringify(e.rpc)}`);
    return e.rpc.data;
  }
  throw new Error('not refused: ' + reason);
}

async function main() {
  await refused(b.call('frobnicate', {}), -32601, 'method.unknown');
  const { client } = await b.call('open', { config: JSON.parse(process.env.PHUX_CONFIG) });
  await refused(b.call('command', { client, command: { kind: 'CANCEL_RUN', payload: { run_id: 7 } } }), -32602, 'json.type');
  // A huge message is refused and skipped; the bridge stays usable.
  const huge = Buffer.alloc(1 << 20, 0x20);
  const hugeErr = new Promise((resolve) => { b.pending.set(null, { resolve, reject: resolve }); });
  b.child.stdin.write(`Content-Length: ${huge.length}\r\n\r\n`); b.child.stdin.write(huge);
  const he = await hugeErr;
  assert(he.rpc.code === -32600 && he.rpc.data.reason === 'bridge.too_large', 'huge: ' + JSON.stringify(he.rpc));
  const session = await b.call('session', { client });
  assert(session.alive, 'session alive');

  const { mirror } = await b.call('mirror.open', { client });
  await waitEvent('live', (e) => e.type === 'state' && e.state === 'LIVE');
  const auth1 = await waitEvent('authority', (e) => e.type === 'authority');

  const objective = newId();
  let res = await b.call('command', { client, command: { kind: 'CREATE_OBJECTIVE', payload: { objective_id: objective, schema: 1, document: Buffer.from('node').toString('base64') } } });
  assert(res.operation.tag === 'SUCCEEDED', 'objective created');
  const run = newId();
  const cmd = { kind: 'START_RUN', payload: {
    objective_id: objective, run_id: run, work_session_id: newId(), executor_schema: 1,
    executor_document: Buffer.from('{}').toString('base64'), pending_binding_id: newId(),
    owner_authority_fingerprint: process.env.PHUX_OWNER_FP, owner_incarnation: process.env.PHUX_OWNER_INC,
    terminal_group: Buffer.from('g').toString('base64') } };
  res = await b.call('command', { client, command: cmd, timeout_ms: 30000 });
  if (res.operation.tag === 'PENDING') res = await b.call('lookup', { client, operation_id: res.operation_id, wait: true, timeout_ms: 30000 });
  assert(res.operation.tag === 'SUCCEEDED' && res.operation.result.kind === 'STARTED', 'run started: ' + JSON.stringify(res));
  const binding = res.operation.result.binding_id;
  await waitEvent('run running', (e) => e.object && e.object.id === run && e.object.payload.state === 'RUNNING');

  await ask('restart');
  const [gap, , auth2] = await waitAll('gap, replacement and new authority',
    (e) => e.type === 'gap', (e) => e.type === 'replaced', (e) => e.type === 'authority');
  assert(gap.gap.reason === 'EPOCH_CHANGED' && gap.state === 'HEALING', 'gap ' + JSON.stringify(gap));
  assert(auth2.authority.authority_epoch > auth1.authority.authority_epoch, 'epoch rises');

  await ask('exit ' + binding);
  const done = await waitEvent('run completed', (e) => e.object && e.object.id === run && e.object.payload.state === 'COMPLETED');
  assert(done.object.payload.outcome.closed.exit_status === 0, 'exit status 0');

  await b.call('mirror.resync', { mirror, timeout_ms: 30000 });
  await waitAll('resync and live again', (e) => e.type === 'replaced' && e.reason === 'resync',
    (e) => e.type === 'state' && e.state === 'LIVE');
  const status = await b.call('mirror.status', { mirror });
  assert(status.state === 'LIVE' && status.synced, 'status ' + JSON.stringify(status));
  const got = await b.call('mirror.get', { mirror, ref: { kind: 'RUN', id: run } });
  assert(got.payload.state === 'COMPLETED', 'get run');

  await b.call('close', { client });
  await refused(b.call('session', { client }), -32000, 'handle.closed');
  await b.close();
  console.log('@@ done');
}

main().then(() => process.exit(0), (e) => { console.error(e.stack, e.rpc ? JSON.stringify(e.rpc) : ''); process.exit(1); });
