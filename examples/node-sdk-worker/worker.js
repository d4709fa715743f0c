#!/usr/bin/env node
'use strict';
// node worker.js [--bug sdk-auto-key]
//
// A billing worker in Node.js on the vendors' official SDKs, for crashpoint's command
// target. It claims jobs from the file queue in queue.js (the node-worker example's) and
// makes one effect per job at the provider the job names (its "provider"):
//
//   billing (kind = "stripe"):  stripe.paymentIntents.create(..., {idempotencyKey})
//                               metadata.job_id = the job; key charge-<job_id>
//   mailer  (kind = "resend"):  resend.emails.send(..., {idempotencyKey})
//                               tag job_id = the job; key receipt-<job_id>
//
// The key derives from the job only, never from the attempt, and is passed to the SDK
// on every call: the Stripe SDK's own automatic key lives for one SDK call, so a job
// retried after a crash, a timeout or an error would be a second charge without it.
//
// An answer in hand confirms the effect: the provider's id is written to queue/results/
// and the job is acknowledged (moved to queue/done/). No answer (a timeout, a reset) or
// a 409 (the same key still in flight) leaves the outcome *unknown*, never failed: the
// worker reconciles before anything else. At Stripe it searches the job's PaymentIntents
// by metadata (none: not found, one: confirmed, more: conflict); Resend has no lookup
// without the email's id, which a lost answer never gave, so there the reconcile is the
// same request under the same key, which Resend answers with the first email's id (its
// documented way). A conflict, or a key that holds another payload, sends the job to
// review; a 5xx or 429 is a failure before commit: retried with backoff, with the same
// key, until CRASHPOINT_MAX_ATTEMPTS writes were sent, then dead-lettered. A job
// reclaimed after its lease ran out whose earlier owner had already sent a write is
// reconciled the same way, and so is every unfinished job after a restore of the state
// directory (CRASHPOINT_RECOVERY=1).
//
// Neither SDK may retry on its own: new Stripe(..., {maxNetworkRetries: 0}) (stripe-node
// still retries a reset connection once, under the same key: harmless), and resend-node
// never retries.
//
// --bug sdk-auto-key passes no idempotency key to Stripe and trusts the SDK's own, so a
// retried job is charged again: here so crashpoint can show that it catches the bug.
//
// Environment (set by crashpoint): CRASHPOINT_PROVIDER_<NAME>_URL, CRASHPOINT_WORKER_ID,
// CRASHPOINT_STATE_DIR, CRASHPOINT_LEASE_TTL_S, CRASHPOINT_MAX_ATTEMPTS,
// CRASHPOINT_FAILPOINTS, CRASHPOINT_RECOVERY; optional CRASHPOINT_HTTP_TIMEOUT_S,
// CRASHPOINT_POLL_S.

const fs = require('fs');
const path = require('path');
const Stripe = require('stripe');
const { Resend } = require('resend');
const { failpoint } = require('./failpoint');
const queue = require('./queue');

const WORKER = process.env.CRASHPOINT_WORKER_ID || `node-${process.pid}`;
const LEASE_MS = 1000 * (Number(process.env.CRASHPOINT_LEASE_TTL_S) || 1);
const MAX_ATTEMPTS = Number(process.env.CRASHPOINT_MAX_ATTEMPTS) || 3;
const HTTP_TIMEOUT_MS =
  1000 * (Number(process.env.CRASHPOINT_HTTP_TIMEOUT_S) || Math.max(0.3, LEASE_MS / 1000));
const POLL_MS = 1000 * (Number(process.env.CRASHPOINT_POLL_S) || 0.02);
// Unknown outcomes that stay unreachable this many lookups in a row go to review.
const MAX_UNAVAILABLE = 50;
const RECOVERY = !['', '0'].includes(process.env.CRASHPOINT_RECOVERY || '');
const BUGS = new Set(['sdk-auto-key']);

function parseArgs(argv) {
  const bugs = new Set();
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--bug' && BUGS.has(argv[i + 1])) {
      bugs.add(argv[i + 1]);
      i += 1;
    } else {
      const usage = 'node worker.js [--bug sdk-auto-key]';
      process.stderr.write(`worker: unknown argument ${argv[i]}; usage: ${usage}\n`);
      process.exit(2);
    }
  }
  return bugs;
}

const bugs = parseArgs(process.argv.slice(2));

function log(message) {
  process.stderr.write(`[${WORKER}] ${message}\n`);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function providerUrl(name) {
  const upper = String(name).toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '');
  return (process.env[`CRASHPOINT_PROVIDER_${upper}_URL`] || '').replace(/\/+$/, '');
}

// -- the two vendors, through their SDKs --------------------------------------------------
// send() resolves {kind: ok|failed|unknown|conflict|identity|refused, detail, id};
// lookup() resolves {state: confirmed|not_found|conflict|in_flight|unavailable, why, id}.
// Neither rejects.

function headersFor(lease, doc) {
  const headers = { 'X-Worker-Id': WORKER, 'X-Fencing-Token': String(lease.token) };
  const identity = doc.body && doc.body.identity;
  if (identity) headers['X-Crashpoint-Identity'] = String(identity);
  return headers;
}

class Billing {
  constructor(url) {
    const u = new URL(url);
    this.stripe = new Stripe('sk_test_crashpoint', {
      host: u.hostname,
      port: Number(u.port),
      protocol: u.protocol.slice(0, -1),
      maxNetworkRetries: 0,
      timeout: HTTP_TIMEOUT_MS,
    });
  }

  key(job) {
    return bugs.has('sdk-auto-key') ? null : `charge-${job}`;
  }

  async send(job, doc, key, headers) {
    const params = {
      amount: Number(doc.body.amount_cents) || 100,
      currency: 'usd',
      confirm: true,
      metadata: { job_id: job },
    };
    const options = { headers };
    if (key) options.idempotencyKey = key; // BUG sdk-auto-key: none, the SDK makes one up
    try {
      const pi = await this.stripe.paymentIntents.create(params, options);
      return { kind: 'ok', detail: `${pi.id} ${pi.status}`, id: pi.id };
    } catch (err) {
      const status = err.statusCode;
      const what = `stripe ${status || ''} ${err.type}: ${String(err.message).slice(0, 160)}`;
      if (err.type === 'StripeConnectionError') return { kind: 'unknown', detail: what };
      if (status === 409) return { kind: 'unknown', detail: `${what} (the key is in flight)` };
      if (err.type === 'StripeIdempotencyError') return { kind: 'conflict', detail: what };
      if (status === 401 || status === 403) return { kind: 'identity', detail: what };
      if (status === 429 || status >= 500) return { kind: 'failed', detail: what };
      return { kind: 'refused', detail: what };
    }
  }

  async lookup(job, key, headers) {
    try {
      const found = await this.stripe.paymentIntents.search(
        { query: `metadata['job_id']:'${job}'` },
        { headers },
      );
      const ids = found.data.map((pi) => pi.id);
      if (ids.length === 0) return { state: 'not_found' };
      if (ids.length === 1) return { state: 'confirmed', id: ids[0] };
      return { state: 'conflict', why: `${ids.length} payment intents for ${job}` };
    } catch (err) {
      const status = err.statusCode;
      if (status === 401 || status === 403) return { state: 'conflict', why: `identity ${status}` };
      return { state: 'unavailable', why: `stripe search: ${err.type}` };
    }
  }
}

class Mailer {
  constructor(url) {
    this.resend = new Resend('re_crashpoint', { baseUrl: url });
  }

  key(job) {
    return `receipt-${job}`;
  }

  async send(job, doc, key, headers) {
    const amount = (Number(doc.body.amount_cents) || 100) / 100;
    const email = {
      from: 'billing@example.com',
      to: ['customer@example.com'],
      subject: `Your receipt for ${job}`,
      html: `<p>We charged ${amount.toFixed(2)} USD.</p>`,
      tags: [{ name: 'job_id', value: job }],
    };
    const options = { idempotencyKey: key, headers, signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) };
    let res;
    try {
      res = await this.resend.emails.send(email, options);
    } catch (err) {
      return { kind: 'unknown', detail: `resend threw ${err.name}` };
    }
    const { data, error } = res;
    if (!error && data && data.id) return { kind: 'ok', detail: `email ${data.id}`, id: data.id };
    const status = error ? error.statusCode : null;
    const what = `resend ${status} ${error ? error.name : 'no data'}`;
    // A reset, a refused connection or the timeout's abort: statusCode null.
    if (status === null || status === undefined) return { kind: 'unknown', detail: what };
    if (status === 409 && error.name === 'concurrent_idempotent_requests') {
      return { kind: 'unknown', detail: `${what} (the key is in flight)` };
    }
    if (status === 409) return { kind: 'conflict', detail: what };
    if (status === 401 || status === 403) return { kind: 'identity', detail: what };
    if (status === 429 || status >= 500) return { kind: 'failed', detail: what };
    return { kind: 'refused', detail: what };
  }

  // No lookup without the email's id: the reconcile is the same request, same key.
  // (reconcile() counts it as a write.)
  async lookup() {
    return { state: 'resend' };
  }
}

const VENDORS = { billing: Billing, mailer: Mailer };

// -- the queue, from a worker's side (as in examples/node-worker) -------------------------

function claim() {
  const now = Date.now();
  for (const name of queue.list('ready')) {
    const job = decodeURIComponent(name.slice(0, -'.json'.length));
    const lease = { job, token: 1, sends: 0, worker: WORKER, deadline: now + LEASE_MS };
    if (queue.tryRename(queue.jobFile('ready', job), queue.leaseFile(lease))) return lease;
  }
  for (const name of queue.list('leased')) {
    const old = queue.parseLease(name);
    if (!old || old.deadline > now) continue;
    const lease = { ...old, token: old.token + 1, worker: WORKER, deadline: now + LEASE_MS };
    if (queue.tryRename(queue.leaseFile(old), queue.leaseFile(lease))) {
      log(`reclaimed ${old.job} from ${old.worker} (lease ran out), attempt ${lease.token}`);
      return lease;
    }
  }
  return null;
}

// A redelivery (the job enqueued again): taken by one worker (a rename), reported at
// after_claim, then dropped; a job under another worker's live lease is declined.
function takeDelivery() {
  for (const name of queue.list('deliveries')) {
    const mine = path.join(queue.dir('tmp'), `delivery-${process.pid}-${name}`);
    if (!queue.tryRename(path.join(queue.dir('deliveries'), name), mine)) continue;
    fs.unlinkSync(mine);
    const job = queue.deliveryJob(name);
    const now = Date.now();
    const held = queue
      .list('leased')
      .map((f) => queue.parseLease(f))
      .find((l) => l && l.job === job && l.deadline > now && l.worker !== WORKER);
    return { job, held: held || null };
  }
  return null;
}

function renew(lease, changes = {}) {
  const next = { ...lease, ...changes, deadline: Date.now() + LEASE_MS };
  return queue.tryRename(queue.leaseFile(lease), queue.leaseFile(next)) ? next : null;
}

function finish(lease, where, why) {
  if (queue.tryRename(queue.leaseFile(lease), queue.jobFile(where, lease.job))) {
    log(`${lease.job}: ${where} (${why})`);
    const note = { why, attempts: lease.token, sends: lease.sends };
    queue.writeAtomic(queue.jobFile('notes', lease.job), JSON.stringify(note));
  } else {
    log(`${lease.job}: lease lost before it could move to ${where}; the new owner finishes it`);
  }
}

// -- one job ------------------------------------------------------------------------------

class LeaseLost extends Error {}

async function runJob(claimed) {
  let lease = claimed;
  const { job } = lease;
  const doc = JSON.parse(fs.readFileSync(queue.leaseFile(lease), 'utf8'));
  const name = doc.provider || 'billing';
  const owned = (changes) => {
    const next = renew(lease, changes);
    if (!next) throw new LeaseLost(`${job}: lease lost (attempt ${lease.token}); stopping`);
    lease = next;
  };

  await failpoint('after_claim', job, lease.token);
  const url = providerUrl(name);
  if (!url || !VENDORS[name]) return finish(lease, 'dead', `no provider ${name} to call`);
  if (fs.existsSync(queue.jobFile('results', job))) {
    owned();
    return finish(lease, 'done', 'result already written by an earlier attempt');
  }
  const vendor = new VENDORS[name](url);
  const key = vendor.key(job);
  const headers = headersFor(lease, doc);

  // An earlier owner's write (sends > 0) may have landed; after a restore even a count
  // of zero may be stale (a reconcile mark).
  const restored = fs.existsSync(queue.jobFile('reconcile', job));
  // BUG sdk-auto-key: trusting the SDK's key to make a retry safe, it never looks.
  const looks = !bugs.has('sdk-auto-key');
  let state = (lease.sends > 0 || restored) && looks ? 'unknown' : 'not_sent';
  let id = null;
  let unavailable = 0;
  let failures = 0;
  while (id === null) {
    if (state === 'unknown') {
      await failpoint('before_reconcile', job, lease.token);
      owned();
      let found = await vendor.lookup(job, key, headers);
      if (found.state === 'resend') {
        // Resend: the same request under the same key is the lookup (a write: counted).
        if (lease.sends >= MAX_ATTEMPTS) {
          return finish(lease, 'review', `unknown outcome and ${lease.sends} writes sent`);
        }
        owned({ sends: lease.sends + 1 });
        const again = await vendor.send(job, doc, key, headers);
        if (again.kind === 'ok') found = { state: 'confirmed', id: again.id };
        else if (again.kind === 'conflict' || again.kind === 'identity') {
          found = { state: 'conflict', why: again.detail };
        } else found = { state: 'unavailable', why: again.detail };
      }
      await failpoint('after_reconcile', job, lease.token);
      log(`${job}: reconcile: ${found.state} ${found.why || found.id || ''}`);
      if (found.state === 'confirmed') {
        id = found.id;
        break;
      }
      if (found.state === 'not_found') {
        state = 'not_sent';
      } else if (found.state === 'conflict') {
        return finish(lease, 'review', `unknown outcome and ${found.why}`);
      } else {
        unavailable += 1;
        if (unavailable >= MAX_UNAVAILABLE) {
          return finish(lease, 'review', `unknown outcome; lookups failed ${unavailable} times`);
        }
        await sleep(backoff(unavailable));
        continue;
      }
    }
    if (lease.sends >= MAX_ATTEMPTS) {
      return finish(lease, 'dead', `${lease.sends} writes sent, none confirmed`);
    }
    await failpoint('before_external_call', job, lease.token);
    // Check the lease before calling out, and count the write durably before it is sent.
    owned({ sends: lease.sends + 1 });
    const res = await vendor.send(job, doc, key, headers);
    log(`${job}: ${name} write ${lease.sends}: ${res.kind} (${res.detail})`);
    if (res.kind === 'ok') {
      await failpoint('after_external_call', job, lease.token);
      id = res.id;
    } else if (res.kind === 'unknown') {
      state = looks ? 'unknown' : 'not_sent';
      await sleep(backoff(1));
    } else if (res.kind === 'failed') {
      failures += 1;
      state = 'not_sent';
      await sleep(backoff(failures));
    } else if (res.kind === 'conflict' || res.kind === 'identity') {
      return finish(lease, 'review', res.detail);
    } else {
      return finish(lease, 'dead', `refused: ${res.detail}`);
    }
  }

  // The id in hand: write it locally, then acknowledge. Both only while we own the job.
  owned();
  const response = { status: 200, body: { id } };
  queue.writeAtomic(queue.jobFile('results', job), JSON.stringify({ job_id: job, key, response }));
  await failpoint('after_local_write', job, lease.token);
  return finish(lease, 'done', `effect ${id} confirmed`);
}

function markForReconcile() {
  let marked = 0;
  for (const name of queue.list('jobs')) {
    const job = decodeURIComponent(name.slice(0, -'.json'.length));
    if (!queue.ended(job)) {
      queue.writeAtomic(queue.jobFile('reconcile', job), '{}');
      marked += 1;
    }
  }
  return marked;
}

function backoff(n) {
  return Math.min(LEASE_MS / 3, 25 * 2 ** Math.max(0, n - 1));
}

// -- the loop -----------------------------------------------------------------------------

async function main() {
  queue.ensureDirs();
  log(`started (pid ${process.pid}, lease ${LEASE_MS} ms${bugs.size ? `, bug ${[...bugs]}` : ''})`);
  if (RECOVERY) log(`recovery: ${markForReconcile()} unfinished jobs reconcile before any write`);
  for (;;) {
    const delivery = takeDelivery();
    if (delivery) {
      const { job, held } = delivery;
      await failpoint('after_claim', job, held ? held.token : 0);
      const why = held ? `${held.worker} holds it under a live lease; declined` : 'dropped';
      log(`${job}: redelivered; ${why}`);
      continue;
    }
    const lease = claim();
    if (!lease) {
      await sleep(POLL_MS);
      continue;
    }
    try {
      await runJob(lease);
    } catch (err) {
      if (!(err instanceof LeaseLost)) throw err;
      log(err.message);
    }
  }
}

// SIGTERM (and Ctrl-C): stop at once. Nothing is half-written (every change is a rename),
// and a job this worker held comes back when its lease runs out.
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    log(`${sig}: exiting`);
    process.exit(0);
  });
}

main().catch((err) => {
  log(`crashed: ${err.stack || err}`);
  process.exit(1);
});
