#!/usr/bin/env node
'use strict';
// node enqueue.js JOB_ID PAYLOAD_FILE
//
// Records the job in the trial's state directory (once: a job id seen before keeps its
// record) and adds one delivery to the trial's BullMQ queue. Enqueueing a job twice
// delivers it twice; the worker that takes the job's lease acts, the other waits.

const fs = require('fs');
const record = require('./lib/record');
const { connect, deliver, queue } = require('./lib/queue');

function fail(message) {
  process.stderr.write(`enqueue: ${message}\n`);
  process.exit(1);
}

async function main(argv) {
  if (argv.length !== 2) fail('usage: node enqueue.js JOB_ID PAYLOAD_FILE');
  const [jobId, payloadFile] = argv;
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(payloadFile, 'utf8'));
  } catch (err) {
    fail(`cannot read the payload ${payloadFile}: ${err.message}`);
  }
  if (doc === null || typeof doc !== 'object' || typeof doc.body !== 'object') {
    fail(`${payloadFile}: expected {"job_id", "provider", "body"}`);
  }
  if (doc.job_id !== undefined && doc.job_id !== jobId) {
    fail(`${payloadFile}: job_id ${JSON.stringify(doc.job_id)} is not ${JSON.stringify(jobId)}`);
  }
  const full = { ...doc, job_id: jobId };
  record.create(jobId, full);
  const connection = connect();
  const q = queue(connection);
  await deliver(q, jobId, full);
  await q.close();
  await connection.quit();
}

main(process.argv.slice(2)).catch((err) => fail(err.stack || String(err)));
