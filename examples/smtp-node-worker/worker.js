#!/usr/bin/env node
'use strict';
// node worker.js [--bug resend-after-drop]
//
// A receipt mailer in Node.js that sends plain SMTP through nodemailer, for crashpoint's
// command target. It claims jobs from the file queue in queue.js (the node-worker
// example's) and sends one email per job to the provider the job names:
//
//   mailer (kind = "smtp"):  nodemailer.createTransport(CRASHPOINT_PROVIDER_MAILER_URL)
//                            .sendMail({..., messageId, headers: {X-Crashpoint-Job}})
//
// The Message-ID derives from the job only (<receipt-<job>@billing.example.com>), and
// the job rides in the X-Crashpoint-Job header, beside X-Worker-Id and X-Fencing-Token.
//
// SMTP has no idempotency key and no lookup: once DATA was sent, a lost reply (a reset,
// a timeout) leaves the outcome unknown, and nothing can tell whether the email went out.
// So the worker never sends it again: the job goes to review. Only a reply it could read
// settles an attempt: 250 confirms it, a 4xx says nothing was accepted (retried with
// backoff, under the same Message-ID, until CRASHPOINT_MAX_ATTEMPTS sends), 535 or a
// 5.7.x refusal of the sender goes to review, any other 5xx is permanent (dead-lettered).
// A job reclaimed after its lease ran out whose earlier owner had already sent, and every
// unfinished job after a restore of the state directory (CRASHPOINT_RECOVERY=1), is
// unknown the same way: review.
//
// --bug resend-after-drop treats a lost reply as a failure and sends the email again: the
// bug crashpoint must catch (no_duplicate_effect: the customer gets two receipts).
//
// Environment (set by crashpoint): CRASHPOINT_PROVIDER_<NAME>_URL (smtp://host:port),
// CRASHPOINT_WORKER_ID, CRASHPOINT_STATE_DIR, CRASHPOINT_LEASE_TTL_S,
// CRASHPOINT_MAX_ATTEMPTS, CRASHPOINT_FAILPOINTS, CRASHPOINT_RECOVERY; optional
// CRASHPOINT_HTTP_TIMEOUT_S (here: the SMTP timeouts), CRASHPOINT_POLL_S.

const fs = require('fs');
const path = require('path');
const nodemailer = require('nodemailer');
const { failpoint } = require('./failpoint');
const queue = require('./queue');

const WORKER = process.env.CRASHPOINT_WORKER_ID || `node-${process.pid}`;
const LEASE_MS = 1000 * (Number(process.env.CRASHPOINT_LEASE_TTL_S) || 1);
const MAX_ATTEMPTS = Number(process.env.CRASHPOINT_MAX_ATTEMPTS) || 3;
const TIMEOUT_MS =
  1000 * (Number(process.env.CRASHPOINT_HTTP_TIMEOUT_S) || Math.max(0.3, LEASE_MS / 1000));
const POLL_MS = 1000 * (Number(process.env.CRASHPOINT_POLL_S) || 0.02);
const RECOVERY = !['', '0'].includes(process.env.CRASHPOINT_RECOVERY || '');
const BUGS = new Set(['resend-after-drop']);

function parseArgs(argv) {
  const bugs = new Set();
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--bug' && BUGS.has(argv[i + 1])) {
      bugs.add(argv[i + 1]);
      i += 1;
    } else {
      const usage = 'node worker.js [--bug resend-after-drop]';
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
  return process.env[`CRASHPOINT_PROVIDER_${upper}_URL`] || '';
}

// -- the mail, through nodemailer ---------------------------------------------------------
// send() resolves {kind: ok|failed|unknown|identity|refused, detail, id}; never rejects.

function messageId(job) {
  return `<receipt-${job}@billing.example.com>`;
}

function transport(url) {
  // One connection per message (no pool), and every wait bounded: a reply that does not
  // come within TIMEOUT_MS is a lost one.
  return nodemailer.createTransport({
    url,
    pool: false,
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: TIMEOUT_MS,
  });
}

async function send(mailer, job, doc, lease) {
  const amount = (Number(doc.body.amount_cents) || 100) / 100;
  const headers = {
    'X-Crashpoint-Job': job,
    'X-Worker-Id': WORKER,
    'X-Fencing-Token': String(lease.token),
  };
  if (doc.body.identity) headers['X-Crashpoint-Identity'] = String(doc.body.identity);
  try {
    const info = await mailer.sendMail({
      from: 'billing@example.com',
      to: 'customer@example.com',
      subject: `Your receipt for ${job}`,
      text: `We charged ${amount.toFixed(2)} USD.`,
      messageId: messageId(job),
      headers,
    });
    // The relay's own id for the message ("250 2.0.0 OK: queued as <id>") is the
    // external reference to keep: it names the provider's record, as a vendor's id would.
    const queued = /queued as (\S+)/.exec(String(info.response));
    return { kind: 'ok', detail: info.response, id: queued ? queued[1] : info.messageId };
  } catch (err) {
    const code = Number(err.responseCode) || null;
    const what = `${err.code || 'error'} ${code || ''} ${String(err.message).slice(0, 160)}`;
    // A refused connection: nothing reached the server, so nothing can have been sent.
    if (!code && err.code === 'ECONNECTION' && /ECONNREFUSED/.test(String(err.message))) {
      return { kind: 'failed', detail: what };
    }
    // No reply in hand (a reset, a timeout, a closed connection): unknown, never failed.
    if (!code) return { kind: 'unknown', detail: what };
    if (code >= 400 && code < 500) return { kind: 'failed', detail: what };
    // 535 or an enhanced status 5.7.x: the sender's credentials or rights were refused;
    // acting again under another identity is a person's decision.
    if (code === 535 || /^\d{3} 5\.7\./.test(String(err.response))) {
      return { kind: 'identity', detail: what };
    }
    return { kind: 'refused', detail: what };
  }
}

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
  const name = doc.provider || 'mailer';
  const owned = (changes) => {
    const next = renew(lease, changes);
    if (!next) throw new LeaseLost(`${job}: lease lost (attempt ${lease.token}); stopping`);
    lease = next;
  };

  await failpoint('after_claim', job, lease.token);
  const url = providerUrl(name);
  if (!url.startsWith('smtp://')) return finish(lease, 'dead', `no SMTP provider ${name}`);
  if (fs.existsSync(queue.jobFile('results', job))) {
    owned();
    return finish(lease, 'done', 'result already written by an earlier attempt');
  }
  // An earlier owner's send (sends > 0) may have gone out; after a restore even a count
  // of zero may be stale. SMTP cannot be asked: only a person can decide.
  const restored = fs.existsSync(queue.jobFile('reconcile', job));
  if ((lease.sends > 0 || restored) && !bugs.has('resend-after-drop')) {
    await failpoint('before_reconcile', job, lease.token);
    owned();
    await failpoint('after_reconcile', job, lease.token);
    const why = restored ? 'the state was restored' : `${lease.sends} sends by an earlier owner`;
    return finish(lease, 'review', `unknown outcome (${why}); SMTP has no lookup`);
  }
  const mailer = transport(url);
  let id = null;
  let failures = 0;
  try {
    while (id === null) {
      if (lease.sends >= MAX_ATTEMPTS) {
        return finish(lease, 'dead', `${lease.sends} sends, none accepted`);
      }
      await failpoint('before_external_call', job, lease.token);
      // Check the lease before calling out, and count the send durably before it goes.
      owned({ sends: lease.sends + 1 });
      const res = await send(mailer, job, doc, lease);
      log(`${job}: send ${lease.sends}: ${res.kind} (${res.detail})`);
      if (res.kind === 'ok') {
        await failpoint('after_external_call', job, lease.token);
        id = res.id;
      } else if (res.kind === 'identity') {
        return finish(lease, 'review', res.detail);
      } else if (res.kind === 'unknown' && !bugs.has('resend-after-drop')) {
        return finish(lease, 'review', `unknown outcome: ${res.detail}; SMTP has no lookup`);
      } else if (res.kind === 'failed' || res.kind === 'unknown') {
        // BUG resend-after-drop: an unknown outcome is taken for a failure and resent.
        failures += 1;
        await sleep(backoff(failures));
      } else {
        return finish(lease, 'dead', `refused: ${res.detail}`);
      }
    }
  } finally {
    mailer.close();
  }

  // The reply in hand: write it locally, then acknowledge. Both only while we own the job.
  owned();
  const response = { status: 250, body: { id } };
  queue.writeAtomic(queue.jobFile('results', job), JSON.stringify({ job_id: job, response }));
  await failpoint('after_local_write', job, lease.token);
  return finish(lease, 'done', `message ${id} accepted`);
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
  if (RECOVERY) log(`recovery: ${markForReconcile()} unfinished jobs go to review`);
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
