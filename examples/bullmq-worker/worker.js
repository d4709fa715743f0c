#!/usr/bin/env node
'use strict';
// node worker.js [--bug new-key-on-retry | no-backoff | done-check]
//
// One BullMQ worker for crashpoint's command target: takes billing jobs from this trial's
// queue on Redis (REDIS_URL, default redis://127.0.0.1:6379/0), one at a time, and runs
// each in lib/flow.js. BullMQ's lock on a delivery lasts one lease
// (CRASHPOINT_LEASE_TTL_S) and any worker looks for stalled deliveries every lease, so
// the delivery of a killed worker goes back to the queue about two leases later.
// Everything durable lives in CRASHPOINT_STATE_DIR (lib/record.js).
//
// After a restore of the state directory (CRASHPOINT_RECOVERY=1) every unfinished job is
// marked to be reconciled before any write and delivered again (the restored record may
// say "nothing sent" for a call that was made, and its delivery may be long gone).
//
// SIGTERM or Ctrl-C: exit at once with status 0. Each record change is one rename(2),
// and a job this worker held is delivered again once BullMQ sees it stalled.

const { Worker } = require('bullmq');
const config = require('./lib/config');
const record = require('./lib/record');
const flow = require('./lib/flow');
const { connect, deliver, queue } = require('./lib/queue');

function parseArgs(argv) {
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--bug' && config.BUGS.includes(argv[i + 1])) {
      flow.bugs.add(argv[i + 1]);
      i += 1;
    } else {
      const usage = 'node worker.js [--bug new-key-on-retry | no-backoff | done-check]';
      process.stderr.write(`worker: unknown argument ${argv[i]}; usage: ${usage}\n`);
      process.exit(2);
    }
  }
}

async function recover(redis) {
  const q = queue(redis);
  const jobs = record.unfinished();
  for (const rec of jobs) {
    record.markForReconcile(rec.job_id);
    await deliver(q, rec.job_id, rec.doc);
  }
  await q.close();
  flow.log(`recovery: ${jobs.length} unfinished jobs reconcile before any write`);
}

async function main() {
  parseArgs(process.argv.slice(2));
  record.ensureDirs();
  const redis = connect();
  if (config.recovery) await recover(redis);
  const worker = new Worker(config.queueName, flow.processor(redis), {
    connection: connect(),
    prefix: config.prefix,
    concurrency: 1,
    lockDuration: config.leaseMs,
    stalledInterval: config.leaseMs,
    // A delivery may stall any number of times (a worker killed at every boundary).
    maxStalledCount: 1000,
  });
  worker.on('error', (err) => flow.log(`bullmq: ${err.message}`));
  worker.on('failed', (job, err) => {
    flow.log(`${job && job.data.job_id}: delivery failed: ${err.message}`);
  });
  const bugs = flow.bugs.size ? `, bug ${[...flow.bugs]}` : '';
  const lease = `lease ${config.leaseMs} ms${bugs}`;
  flow.log(`started (pid ${process.pid}, queue ${config.queueName}, ${lease})`);
}

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    flow.log(`${sig}: exiting`);
    process.exit(0);
  });
}

main().catch((err) => {
  flow.log(`crashed: ${err.stack || err}`);
  process.exit(1);
});
