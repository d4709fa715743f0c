#!/usr/bin/env node
'use strict';
// node enqueue.js JOB_ID PAYLOAD_FILE
//
// Puts one logical job into the file queue (see queue.js). The payload is the harness's
// job document, {"job_id", "provider", "body"}. Enqueueing a job id twice, even from two
// processes at the same moment, creates one job: the first step is an exclusive link(2)
// into queue/jobs/, which only one of them can win. The winner then publishes the job to
// queue/ready/ with a rename(2), so a worker never reads a half-written file.
//
// A later enqueue of a job that has not ended is a redelivery, as a real queue's
// at-least-once delivery would make it: a message in queue/deliveries/ that some worker
// picks up (see claim() in worker.js). Of a job that ended it is dropped, and it says so
// on stdout with {"queued": false}.

const fs = require('fs');
const queue = require('./queue');

function fail(message) {
  process.stderr.write(`enqueue: ${message}\n`);
  process.exit(1);
}

function main(argv) {
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
  queue.ensureDirs();
  const tmp = queue.writeTemp(JSON.stringify({ ...doc, job_id: jobId }));
  try {
    fs.linkSync(tmp, queue.jobFile('jobs', jobId));
  } catch (err) {
    fs.unlinkSync(tmp);
    if (err.code === 'EEXIST') {
      if (queue.ended(jobId)) {
        process.stderr.write(`enqueue: ${jobId} already ended; nothing to do\n`);
        // The one line crashpoint reads: this queue refused a job it already holds.
        process.stdout.write('{"queued": false}\n');
        return;
      }
      queue.redeliver(jobId);
      process.stderr.write(`enqueue: ${jobId} is known; delivered again\n`);
      return;
    }
    throw err;
  }
  fs.renameSync(tmp, queue.jobFile('ready', jobId));
}

main(process.argv.slice(2));
