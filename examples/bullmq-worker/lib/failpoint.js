'use strict';
// The failpoint protocol, client side. With CRASHPOINT_FAILPOINTS naming a UNIX socket:
// connect once; at each boundary write one JSON line {"point", "job", "attempt", "pid",
// "worker", "provider"} and wait for one line back ({"action": "continue"}). While the
// worker waits the harness may kill or stop it, so the signal lands exactly there.
// Unset: return at once. If the harness goes away, carry on as if failpoints were off.

const net = require('net');

const FP_PATH = process.env.CRASHPOINT_FAILPOINTS || '';
const WORKER = process.env.CRASHPOINT_WORKER_ID || '';
let sock = null;
let gone = false;
let buf = '';
let waiting = null;

// Where the caller of failpoint() is in its source ([0] Error, [1] here, [2] failpoint,
// [3] the caller): a report can then point at the boundary in the worker's own code.
function caller() {
  const m = /\(?(?:file:\/\/)?([^\s()]+):(\d+):\d+\)?$/.exec((new Error().stack || '').split('\n')[3] || '');
  return m ? { file: m[1], line: Number(m[2]) } : {};
}

function failpoint(point, job, attempt, provider) {
  if (!FP_PATH || gone) return Promise.resolve('continue');
  const where = caller();
  if (!sock) {
    sock = net.createConnection(FP_PATH).setEncoding('utf8');
    sock.on('data', (chunk) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0 || !waiting) return;
      const reply = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      const resolve = waiting;
      waiting = null;
      resolve(reply.action || 'continue');
    });
    sock.on('error', () => {}); // 'close' follows
    sock.on('close', () => {
      gone = true;
      if (waiting) waiting('continue');
      waiting = null;
    });
  }
  return new Promise((resolve) => {
    waiting = resolve;
    const line = { point, job, attempt, pid: process.pid, worker: WORKER, ...where };
    if (provider) line.provider = provider;
    sock.write(`${JSON.stringify(line)}\n`);
  });
}

module.exports = { failpoint };
