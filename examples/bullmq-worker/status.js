#!/usr/bin/env node
'use strict';
// node status.js JOB_ID
//
// Prints the job's end state as one JSON line, read from its record (lib/record.js):
// {"state": "done" | "needs_review" | "dead_lettered" | "pending", "external_ref",
// "attempts", "last_error"}. A job never seen, or not ended, is "pending".

const record = require('./lib/record');

const STATES = { done: 'done', review: 'needs_review', dead: 'dead_lettered' };

function status(job) {
  const rec = record.read(job);
  if (!rec) return { state: 'pending' };
  const out = { state: STATES[rec.state] || 'pending', attempts: rec.claims };
  // The effect at the job's own provider (the one the harness faults) comes first.
  const steps = Object.entries(rec.steps || {}).filter(([, s]) => s.state === 'confirmed' && s.ref);
  steps.sort(([a], [b]) => Number(b === rec.doc.provider) - Number(a === rec.doc.provider));
  if (steps.length) out.external_ref = String(steps[0][1].ref);
  if (rec.last_error) out.last_error = String(rec.last_error);
  return out;
}

if (process.argv.length !== 3) {
  process.stderr.write('usage: node status.js JOB_ID\n');
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(status(process.argv[2]))}\n`);
