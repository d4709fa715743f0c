'use strict';
// A tiny durable job queue in plain files, inside the trial's state directory.
//
//   queue/jobs/<job>.json      every job ever enqueued; created exclusively (dedupe)
//   queue/ready/<job>.json     waiting to be claimed
//   queue/leased/<job>@<token>@<sends>@<worker>@<deadline_ms>.json
//                              claimed: the claim count (the attempt and fencing token),
//                              the writes already sent to the provider, the owner and
//                              the wall-clock time the lease runs out
//   queue/results/<job>.json   the provider's answer, written before the ack
//   queue/done/<job>.json      acknowledged: the effect is confirmed
//   queue/dead/<job>.json      dead-lettered: retries exhausted or a permanent error
//   queue/review/<job>.json    needs_review: an unknown outcome that could not be reconciled
//   queue/notes/<job>.json     how a job ended (why, attempts), written after it ended
//   queue/reconcile/<job>.json the state directory was restored: reconcile before writing
//   queue/deliveries/<job>@<stamp>.json
//                              a redelivery of a known job (enqueued again), waiting for
//                              a worker to pick it up
//
// Every state change of a claimed job is one rename(2) of its lease file, which is
// atomic: of two processes renaming the same file, exactly one succeeds and the other
// gets ENOENT. A claim, a renewal, a reclaim after expiry and the final ack are therefore
// all compare-and-set on the lease file's name, and a worker that lost its lease finds
// out at its next step.

const fs = require('fs');
const path = require('path');

const DIRS = [
  'jobs',
  'ready',
  'leased',
  'results',
  'done',
  'dead',
  'review',
  'notes',
  'reconcile',
  'deliveries',
  'tmp',
];

function root() {
  return path.join(process.env.CRASHPOINT_STATE_DIR || process.cwd(), 'queue');
}

function dir(name) {
  return path.join(root(), name);
}

function ensureDirs() {
  for (const d of DIRS) fs.mkdirSync(dir(d), { recursive: true });
}

let tmpCounter = 0;

// A temporary file with `data`, flushed to disk; the caller renames or links it into place.
function writeTemp(data) {
  tmpCounter += 1;
  const file = path.join(dir('tmp'), `${process.pid}-${Date.now()}-${tmpCounter}.json`);
  const fd = fs.openSync(file, 'wx');
  try {
    fs.writeSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return file;
}

// Write `data` to `file` atomically: readers see the old file or the new one, never half.
function writeAtomic(file, data) {
  fs.renameSync(writeTemp(data), file);
}

// rename(2) as compare-and-set: false when `from` is gone (someone else moved it first).
function tryRename(from, to) {
  try {
    fs.renameSync(from, to);
    return true;
  } catch (err) {
    if (err.code === 'ENOENT') return false;
    throw err;
  }
}

function jobFile(name, job) {
  return path.join(dir(name), `${encodeURIComponent(job)}.json`);
}

function leaseName(lease) {
  const parts = [lease.job, lease.token, lease.sends, lease.worker, lease.deadline];
  return `${parts.map((p) => encodeURIComponent(String(p))).join('@')}.json`;
}

function leaseFile(lease) {
  return path.join(dir('leased'), leaseName(lease));
}

// The lease a file name describes, or null for a name that is not a lease.
function parseLease(name) {
  if (!name.endsWith('.json')) return null;
  const parts = name.slice(0, -'.json'.length).split('@').map(decodeURIComponent);
  if (parts.length !== 5) return null;
  const [job, token, sends, worker, deadline] = parts;
  return { job, token: Number(token), sends: Number(sends), worker, deadline: Number(deadline) };
}

function list(name) {
  try {
    return fs.readdirSync(dir(name)).filter((f) => f.endsWith('.json')).sort();
  } catch (err) {
    if (err.code === 'ENOENT') return [];
    throw err;
  }
}

const ENDS = ['done', 'dead', 'review'];

function ended(job) {
  return ENDS.some((d) => fs.existsSync(jobFile(d, job)));
}

// Deliver a known job again: one more message in deliveries/, published by a rename.
function redeliver(job) {
  tmpCounter += 1;
  const stamp = `${Date.now()}-${process.pid}-${tmpCounter}`;
  const name = `${encodeURIComponent(job)}@${stamp}.json`;
  fs.renameSync(writeTemp('{}'), path.join(dir('deliveries'), name));
}

// The job a delivery's file name is for.
function deliveryJob(name) {
  return decodeURIComponent(name.split('@')[0]);
}

module.exports = {
  deliveryJob,
  dir,
  ended,
  redeliver,
  ensureDirs,
  jobFile,
  leaseFile,
  leaseName,
  list,
  parseLease,
  tryRename,
  writeAtomic,
  writeTemp,
};
