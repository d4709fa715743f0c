'use strict';
// Everything the example reads from its environment, read once.

const crypto = require('crypto');
const path = require('path');

const BUGS = ['new-key-on-retry', 'no-backoff', 'done-check'];
// The two calls of one job, in order, and the kind each provider has unless told.
const PLAN = ['billing', 'mailer'];
const DEFAULT_KINDS = { billing: 'idempotent', mailer: 'plain' };

function envName(provider) {
  return String(provider).toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '');
}

function number(name, fallback) {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

const stateDir = path.resolve(process.env.CRASHPOINT_STATE_DIR || process.cwd());
// Trials share one Redis server; a hash of the trial's own state directory keeps their
// queues and keys apart.
const namespace = crypto.createHash('sha256').update(stateDir).digest('hex').slice(0, 16);

module.exports = {
  BUGS,
  PLAN,
  stateDir,
  namespace,
  queueName: `billing-${namespace}`,
  prefix: 'crashpoint-bull',
  redisUrl: process.env.REDIS_URL || 'redis://127.0.0.1:6379/0',
  redisKey: (...parts) => ['crashpoint', namespace, ...parts].join(':'),
  worker: process.env.CRASHPOINT_WORKER_ID || `bullmq-${process.pid}`,
  leaseMs: 1000 * number('CRASHPOINT_LEASE_TTL_S', 1),
  httpTimeoutMs: 1000 * number('CRASHPOINT_HTTP_TIMEOUT_S', 2),
  maxAttempts: Math.floor(number('CRASHPOINT_MAX_ATTEMPTS', 3)),
  recovery: !['', '0'].includes(process.env.CRASHPOINT_RECOVERY || ''),
  provider(name) {
    const url = process.env[`CRASHPOINT_PROVIDER_${envName(name)}_URL`] || '';
    if (!url) return null;
    const declared = process.env[`CRASHPOINT_PROVIDER_${envName(name)}_KIND`];
    const kind = declared || DEFAULT_KINDS[name] || 'idempotent';
    return { name, kind, url: url.replace(/\/+$/, '') };
  },
};
