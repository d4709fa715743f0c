'use strict';
// The durable per-job record: one JSON file per job under records/ in the trial's state
// directory, so a restore of that directory restores everything the worker owns.
//
//   records/<job>.json    {job_id, doc, state, claims, token, last_error,
//                          steps: {<provider>: {key, sends, state, ref}}}
//                         state: queued | done | dead | review
//   reconcile/<job>.json  the directory was restored: reconcile every call before writing
//
// enqueue.js creates a record exclusively (link(2): a second enqueue keeps the first);
// afterwards only the holder of the job's lease (lease.js) rewrites it, each time whole,
// through a temporary file and rename(2), flushed first, so a reader and a crash see the
// old record or the new one, never half.

const fs = require('fs');
const path = require('path');
const config = require('./config');

const FINAL = ['done', 'dead', 'review'];

function dir(name) {
  return path.join(config.stateDir, name);
}

function file(name, job) {
  return path.join(dir(name), `${encodeURIComponent(job)}.json`);
}

function ensureDirs() {
  for (const d of ['records', 'reconcile', 'tmp']) fs.mkdirSync(dir(d), { recursive: true });
}

let counter = 0;
function writeTemp(data) {
  counter += 1;
  const tmp = path.join(dir('tmp'), `${process.pid}-${Date.now()}-${counter}.json`);
  const fd = fs.openSync(tmp, 'wx');
  try {
    fs.writeSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return tmp;
}

function read(job) {
  try {
    return JSON.parse(fs.readFileSync(file('records', job), 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
}

// Create the record of a new job; false (and nothing changed) if it already has one.
function create(job, doc) {
  ensureDirs();
  const rec = { job_id: job, doc, state: 'queued', claims: 0, token: 0, steps: {} };
  const tmp = writeTemp(JSON.stringify(rec));
  try {
    fs.linkSync(tmp, file('records', job));
    return true;
  } catch (err) {
    if (err.code === 'EEXIST') return false;
    throw err;
  } finally {
    fs.unlinkSync(tmp);
  }
}

function write(rec) {
  fs.renameSync(writeTemp(JSON.stringify(rec)), file('records', rec.job_id));
}

function markForReconcile(job) {
  fs.renameSync(writeTemp('{}'), file('reconcile', job));
}

function mustReconcile(job) {
  return fs.existsSync(file('reconcile', job));
}

function unfinished() {
  let names = [];
  try {
    names = fs.readdirSync(dir('records')).filter((f) => f.endsWith('.json'));
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  return names
    .map((n) => read(decodeURIComponent(n.slice(0, -'.json'.length))))
    .filter((rec) => rec && !FINAL.includes(rec.state));
}

module.exports = {
  FINAL,
  create,
  ensureDirs,
  markForReconcile,
  mustReconcile,
  read,
  unfinished,
  write,
};
