'use strict';
// The BullMQ processor: one delivery of one billing job.
//
// A delivery whose job is finished completes at once. Otherwise it takes the job's lease
// (lease.js); if another worker holds it (a duplicate delivery, or a redelivery that
// crossed a live owner), the delivery is put back for a lease (moveToDelayed) and tries
// again then, rather than be dropped: the holder may die, and a delivery only completes
// once the record says the job ended. Under the lease, each call (billing, then mailer):
//
//   reconcile first if an earlier write may have landed     before_reconcile, after_reconcile
//       confirmed -> next call; not_found -> write; conflict, no lookup -> needs_review
//       no answer, in flight -> ask again with backoff (needs_review if never answered)
//   dead-letter once the cap of writes is reached
//   record the key and count the write                      before_external_call
//   renew the lease (stop if lost), write (same key, same body every time)
//       2xx -> record it                                    after_external_call, after_local_write
//       timeout, reset, 409 -> unknown -> reconcile;  5xx -> back off, write again
//
// Boundaries of a call are reported for the job's own provider (the one the harness
// faults in the trial), with "provider" in the line.

const { DelayedError } = require('bullmq');
const config = require('./config');
const record = require('./record');
const providers = require('./providers');
const { failpoint } = require('./failpoint');
const { Lease, LeaseLost } = require('./lease');

const bugs = new Set();
const REVIEW_AFTER_MS = Math.max(8000, 16 * config.leaseMs);

function log(message) {
  process.stderr.write(`[${config.worker}] ${message}\n`);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// 100 ms, then doubling, at most a third of a lease: the least it waits after a refused
// write is what crashpoint.toml declares (min_backoff_s = 0.1).
const FIRST_BACKOFF_MS = 100;

function backoff(n) {
  return sleep(Math.min(config.leaseMs / 3, FIRST_BACKOFF_MS * 2 ** Math.max(0, n - 1)));
}

function keyOf(p, job, sends) {
  // BUG new-key-on-retry: the key names the retry, so no retry is recognised.
  if (bugs.has('new-key-on-retry')) return `${p.name}-${job}-retry-${sends}`;
  return `${p.name}-${job}`;
}

async function later(job, token, why) {
  log(`${job.data.job_id}: delivery put back for a lease (${why})`);
  await job.moveToDelayed(Date.now() + config.leaseMs, token);
  throw new DelayedError();
}

function processor(redis) {
  return async (job, token) => {
    const { job_id: id, doc } = job.data;
    // A delivery carries the document: a record restored from before the enqueue learns
    // the job again; a job seen before keeps its record.
    record.create(id, doc);
    if (record.FINAL.includes(record.read(id).state)) return 'already ended';
    const lease = await Lease.acquire(redis, id);
    if (!lease) return later(job, token, 'another worker holds the job');
    try {
      return await run(new Run(lease, record.read(id)));
    } catch (err) {
      if (!(err instanceof LeaseLost)) throw err;
      return later(job, token, err.message);
    } finally {
      await lease.release();
    }
  };
}

class Run {
  constructor(lease, rec) {
    this.lease = lease;
    this.rec = rec;
    this.job = rec.job_id;
    this.mustReconcile = record.mustReconcile(rec.job_id);
  }

  // Rewrite the record, only while the lease is ours.
  async save(step) {
    await this.lease.ensure(step);
    record.write(this.rec);
  }
}

async function run(r) {
  if (record.FINAL.includes(r.rec.state)) return 'already ended';
  r.rec.claims += 1;
  r.rec.token = r.lease.token;
  await r.save('the claim');
  log(`${r.job}: claimed, attempt ${r.rec.claims}, token ${r.lease.token}`);
  await failpoint('after_claim', r.job, r.rec.claims);
  const own = String(r.rec.doc.provider || '');
  const plan = [...config.PLAN, ...(own && !config.PLAN.includes(own) ? [own] : [])];
  for (const name of plan) {
    const p = config.provider(name);
    if (!p) {
      if (name === own) return finish(r, 'dead', `no CRASHPOINT_PROVIDER URL for ${name}`);
      log(`${r.job}: no URL for provider ${name}; that call is skipped`);
      continue;
    }
    const end = await call(r, p);
    if (end) return finish(r, end[0], end[1]);
  }
  return finish(r, 'done', null);
}

async function finish(r, state, why) {
  r.rec.state = state;
  if (why) r.rec.last_error = why;
  await r.save(`marking it ${state}`);
  log(`${r.job}: ${state}${why ? ` (${why})` : ''}`);
  return state;
}

// Make the job's one effect at p; null once confirmed, else [end, why].
async function call(r, p) {
  const { job } = r;
  const faulted = p.name === r.rec.doc.provider;
  const boundary = (point) => (faulted ? failpoint(point, job, r.rec.claims, p.name) : null);
  const step = r.rec.steps[p.name] || { sends: 0, state: 'not_sent', ref: null };
  r.rec.steps[p.name] = step;
  if (step.state === 'confirmed') return null;
  // An earlier write (sends > 0) may have landed; after a restore even "nothing sent"
  // may be out of date.
  let unknown = step.sends > 0 || r.mustReconcile;
  let failures = 0;
  let unansweredSince = null;
  let last = 'none';
  const confirm = async (key, ref) => {
    Object.assign(step, { key, state: 'confirmed', ref });
    await r.save(`recording the ${p.name} effect`);
    await boundary('after_local_write');
    return null;
  };
  for (;;) {
    if (r.lease.lost) throw new LeaseLost(`${job}: lease lost while calling ${p.name}`);
    const key = keyOf(p, job, step.sends);
    if (unknown) {
      await boundary('before_reconcile');
      const found = await providers.lookup(p, job, key, r.lease.token);
      await boundary('after_reconcile');
      log(`${job}: ${p.name} lookup: ${found.outcome} (${found.detail})`);
      if (found.outcome === 'confirmed') return confirm(key, found.ref);
      if (found.outcome === 'conflict' || found.outcome === 'unqueryable') {
        return ['review', `${p.name}: outcome unknown; ${found.detail}`];
      }
      if (found.outcome !== 'not_found') {
        unansweredSince = unansweredSince || Date.now();
        if (Date.now() - unansweredSince > REVIEW_AFTER_MS) {
          return ['review', `${p.name}: outcome unknown; lookups: ${found.detail}`];
        }
        failures += 1;
        await backoff(failures);
        continue;
      }
      unknown = false;
      unansweredSince = null;
    }
    if (step.sends >= config.maxAttempts) {
      return ['dead', `${p.name}: ${step.sends} writes sent, none committed (last: ${last})`];
    }
    Object.assign(step, { key, state: 'submitted', sends: step.sends + 1 });
    await r.save(`the write to ${p.name}`); // key and count durable before the call
    await boundary('before_external_call');
    if (bugs.has('done-check')) {
      // BUG done-check: asks whether the job has ended instead of whether its lease still
      // holds (a delivery redelivered each lock window runs as several copies at once).
      if (record.FINAL.includes(record.read(r.job).state)) {
        throw new LeaseLost(`${r.job}: ended by another copy`);
      }
    } else {
      await r.lease.ensure(`the write to ${p.name}`);
    }
    const sent = await providers.write(p, r.rec.doc.body || {}, key, r.lease.token);
    log(`${job}: ${p.name} write ${step.sends}: ${sent.kind} (${sent.detail})`);
    last = sent.detail;
    if (sent.kind === 'ok') {
      await boundary('after_external_call');
      return confirm(key, sent.ref);
    }
    step.last_error = sent.detail;
    r.rec.last_error = `${p.name}: ${sent.detail}`;
    if (sent.kind === 'unknown') {
      unknown = true;
      await backoff(1);
    } else if (sent.kind === 'failed') {
      failures += 1;
      // BUG no-backoff: a refused write is retried at once (BullMQ's own retries have no
      // backoff unless one is set), within the cap but as fast as the provider answers.
      if (!bugs.has('no-backoff')) await backoff(failures);
    } else if (sent.kind === 'conflict') {
      return ['review', `${p.name}: ${sent.detail}`];
    } else {
      return ['dead', `${p.name}: ${sent.detail}`];
    }
  }
}

module.exports = { bugs, log, processor };
