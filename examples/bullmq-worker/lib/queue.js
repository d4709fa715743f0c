'use strict';
// This trial's BullMQ queue and how a delivery is added to it.

const { Queue } = require('bullmq');
const IORedis = require('ioredis');
const config = require('./config');

function connect() {
  // BullMQ's blocking commands need maxRetriesPerRequest: null.
  return new IORedis(config.redisUrl, { maxRetriesPerRequest: null });
}

function queue(connection) {
  return new Queue(config.queueName, { connection, prefix: config.prefix });
}

// One delivery of the job. No jobId: enqueueing a job twice delivers it twice, as a real
// broker may, and the worker's lease makes one of them act.
function deliver(q, jobId, doc) {
  return q.add(
    'billing',
    { job_id: jobId, doc },
    {
      removeOnComplete: true,
      removeOnFail: { age: 300 },
      // Only for errors nobody expected (a full disk): the protocol never throws.
      attempts: 20,
      backoff: { type: 'fixed', delay: config.leaseMs },
    },
  );
}

module.exports = { connect, deliver, queue };
