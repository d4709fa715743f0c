#!/usr/bin/env node
'use strict';
// node status.js JOB_ID
//
// Prints the job's end state as one JSON line, read from the file queue (see queue.js):
// {"state": "done" | "needs_review" | "dead_lettered" | "pending", "external_ref",
// "attempts", "last_error"}. A job never seen, or still on its way, is "pending".

const fs = require('fs');
const queue = require('./queue');

const ENDS = [
  ['done', 'done'],
  ['review', 'needs_review'],
  ['dead', 'dead_lettered'],
];

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return null;
  }
}

function status(job) {
  const end = ENDS.find(([dir]) => fs.existsSync(queue.jobFile(dir, job)));
  if (!end) return { state: 'pending' };
  const out = { state: end[1] };
  const note = readJson(queue.jobFile('notes', job));
  if (note && Number.isInteger(note.attempts)) out.attempts = note.attempts;
  if (end[0] === 'done') {
    const result = readJson(queue.jobFile('results', job));
    const body = result && result.response && result.response.body;
    if (body && body.id !== undefined && body.id !== null) out.external_ref = String(body.id);
  } else if (note && note.why) {
    out.last_error = String(note.why);
  }
  return out;
}

if (process.argv.length !== 3) {
  process.stderr.write('usage: node status.js JOB_ID\n');
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(status(process.argv[2]))}\n`);
