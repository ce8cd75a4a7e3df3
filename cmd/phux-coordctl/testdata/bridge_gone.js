// bridge_gone.js: examples/bridge/node/bridge.js when the bridge is not
// there or goes away (PHUX_BRIDGE_JS, PHUX_COORDCTL in the environment).
// Every pending and later call must reject with the Error in b.gone, and
// close must resolve, instead of a promise that never settles or an
// unhandled EPIPE that ends the plugin's process.
'use strict';
const { Bridge } = require(process.env.PHUX_BRIDGE_JS);

async function outcome(p) {
  try { return `answered ${JSON.stringify(await p)}`; } catch (e) { return `rejected ${e.message}`; }
}

async function main() {
  let b = new Bridge('/nonexistent/phux-coordctl');
  console.log('missing:', await outcome(b.call('version')));
  await b.close();

  b = new Bridge(process.env.PHUX_COORDCTL);
  console.log('version:', (await b.call('version')).protocol);
  // A length over 1 GiB ends the bridge (docs/ffi.md); the call behind it
  // is never read.
  b.child.stdin.write('Content-Length: 4294967296\r\n\r\n');
  const pending = b.call('version');
  console.log('ended:', await outcome(pending));
  const later = b.call('version');
  console.log('later:', await outcome(later));
  console.log('same error:', await later.catch((e) => e === b.gone));
  b.child.stdin.write('more'); // after the end: no unhandled EPIPE
  await b.close();
  console.log('closed');
}

main().catch((e) => { console.error(e); process.exit(1); });
