'use strict';
// crashpoint's failpoint client for Node.js (docs/failpoints.md). Copy it beside your worker:
//   const { failpoint } = require('./failpoint');
//   await failpoint('after_claim', jobId, attempt);   // resolves to 'continue'
//   await jobEnd(jobId, 'done', attempt);   // once the end is durable: no status polling
// Unset CRASHPOINT_FAILPOINTS: resolves at once. If the harness goes away: failpoints off.
const net = require('net');

let path = process.env.CRASHPOINT_FAILPOINTS || '';
let sock = null;
let buf = '';
let answer = null; // resolves the one request in flight
let queue = Promise.resolve(); // the protocol has one request in flight per connection

// Where the caller of failpoint() is in its source ([0] Error, [1] here, [2] failpoint,
// [3] the caller): a report can then point at the boundary in the worker's own code.
function caller() {
  const m = /\(?(?:file:\/\/)?([^\s()]+):(\d+):\d+\)?$/.exec((new Error().stack || '').split('\n')[3] || '');
  return m ? { file: m[1], line: Number(m[2]) } : {};
}

function ask(point, job, attempt, extra) {
  if (!path) return 'continue';
  if (!sock) {
    sock = net.createConnection(path).setEncoding('utf8');
    sock.on('data', (chunk) => {
      buf += chunk;
      const nl = buf.indexOf('\n');
      if (nl < 0 || !answer) return;
      let action = 'continue';
      try { action = JSON.parse(buf.slice(0, nl)).action || action; } catch (e) { /* continue */ }
      buf = buf.slice(nl + 1);
      sock.unref(); // idle: an open socket must not keep the worker alive
      answer(action);
    });
    sock.on('error', () => {}); // 'close' follows
    sock.on('close', () => { path = ''; sock = null; if (answer) answer('continue'); });
  }
  const line = { point, job, attempt, pid: process.pid, ...extra };
  if (process.env.CRASHPOINT_WORKER_ID) line.worker = process.env.CRASHPOINT_WORKER_ID;
  return new Promise((resolve) => {
    answer = (action) => { answer = null; resolve(action); };
    sock.ref(); // waiting for the harness is work: keep the process alive meanwhile
    sock.write(`${JSON.stringify(line)}\n`);
  });
}

function failpoint(point, job, attempt, extra) {
  if (!path) return Promise.resolve('continue');
  const where = caller();
  queue = queue.then(() => ask(point, job, attempt, { ...where, ...extra }));
  return queue;
}

// The job has ended (outcome: 'done', 'needs_review' or 'dead_lettered'), durably.
function jobEnd(job, outcome, attempt = null) {
  return failpoint('job_end', job, attempt, { outcome }).then(() => undefined);
}

module.exports = { failpoint, jobEnd };
