#!/usr/bin/env node
'use strict';
// node worker.js [--bug fresh-key]
//
// A billing worker in Node.js, standard library only, for crashpoint's command target.
// It claims jobs from the file queue in queue.js and makes one effect per job at the
// provider the job names (its "provider"), of the kind CRASHPOINT_PROVIDER_<NAME>_KIND
// says (idempotent when unset):
//
//   idempotent:  POST $URL/v1/effects, Idempotency-Key: effect-<job_id>
//   plain, unqueryable: POST $URL/v1/sends, the body with client_marker: effect-<job_id>
//   key and marker derive from the job only, never the attempt
//   X-Worker-Id, X-Fencing-Token            who sends it, under which claim
//   body: the job's "body", unchanged
//
// 201, or 200 replaying an earlier answer, confirms the effect: the answer is written to
// queue/results/ and the job is acknowledged (moved to queue/done/). A timeout, a reset
// connection or a 409 (the same key still in flight) leave the outcome *unknown*: the
// worker never treats that as a failure worth a new key. It looks the key up
// (GET /v1/effects?idempotency_key=...) or the marker (GET /v1/sends?client_marker=...:
// no send = not found, one = confirmed, more = conflict) and sends again, with the same
// key or marker, only when the provider has nothing. A conflict, or a provider that
// cannot be asked (unqueryable, 501), sends the job to review. A 5xx is a failure before
// commit: retried with backoff, with the same key, until CRASHPOINT_MAX_ATTEMPTS writes
// were sent, then dead-lettered. A job reclaimed after its lease ran out whose earlier
// owner had already sent a write is reconciled the same way before anything is sent
// again, and so is every unfinished job after a restore of the state directory
// (CRASHPOINT_RECOVERY=1), whose counts of writes may be out of date.
//
// --bug fresh-key puts the attempt number in the key: every retry is a new effect. It is
// here so crashpoint can show that it catches the bug.
//
// Environment (set by crashpoint): CRASHPOINT_PROVIDER_<NAME>_URL and _KIND,
// CRASHPOINT_WORKER_ID, CRASHPOINT_STATE_DIR, CRASHPOINT_LEASE_TTL_S,
// CRASHPOINT_MAX_ATTEMPTS, CRASHPOINT_FAILPOINTS, CRASHPOINT_RECOVERY; optional
// CRASHPOINT_HTTP_TIMEOUT_S, CRASHPOINT_POLL_S.

const fs = require('fs');
const http = require('http');
const net = require('net');
const path = require('path');
const queue = require('./queue');

// -- failpoints: the protocol, for any language ------------------------------------------
// When CRASHPOINT_FAILPOINTS names a UNIX socket: connect once; at each boundary write one
// JSON line {"point", "job", "attempt", "pid", "file", "line"} and wait for one line back
// ({"action": "continue"}). While the worker waits, the harness may kill or stop it, so the
// signal lands exactly at the boundary. Unset: return at once. If the harness goes away,
// carry on as if failpoints were off.
const FP_PATH = process.env.CRASHPOINT_FAILPOINTS || '';
let fpSock = null; // connected once, at the first boundary
let fpGone = false; // the harness went away: behave as if failpoints were off
let fpBuf = '';
let fpWaiting = null;

// Where the caller of failpoint() is in its source ([0] Error, [1] here, [2] failpoint,
// [3] the caller): a report can then point at the boundary in the worker's own code.
function caller() {
  const m = /\(?(?:file:\/\/)?([^\s()]+):(\d+):\d+\)?$/.exec((new Error().stack || '').split('\n')[3] || '');
  return m ? { file: m[1], line: Number(m[2]) } : {};
}

function failpoint(point, job, attempt) {
  if (!FP_PATH || fpGone) return Promise.resolve('continue');
  const where = caller();
  if (!fpSock) {
    fpSock = net.createConnection(FP_PATH).setEncoding('utf8');
    fpSock.on('data', (chunk) => {
      fpBuf += chunk;
      const nl = fpBuf.indexOf('\n');
      if (nl < 0 || !fpWaiting) return;
      const reply = JSON.parse(fpBuf.slice(0, nl));
      fpBuf = fpBuf.slice(nl + 1);
      const resolve = fpWaiting;
      fpWaiting = null;
      resolve(reply.action || 'continue');
    });
    fpSock.on('error', () => {}); // 'close' follows
    fpSock.on('close', () => {
      fpGone = true;
      if (fpWaiting) fpWaiting('continue');
      fpWaiting = null;
    });
  }
  return new Promise((resolve) => {
    fpWaiting = resolve;
    fpSock.write(`${JSON.stringify({ point, job, attempt, pid: process.pid, ...where })}\n`);
  });
}
// -- end of the failpoint protocol -------------------------------------------------------

const WORKER = process.env.CRASHPOINT_WORKER_ID || `node-${process.pid}`;
const LEASE_MS = 1000 * (Number(process.env.CRASHPOINT_LEASE_TTL_S) || 1);
const MAX_ATTEMPTS = Number(process.env.CRASHPOINT_MAX_ATTEMPTS) || 3;
const HTTP_TIMEOUT_MS =
  1000 * (Number(process.env.CRASHPOINT_HTTP_TIMEOUT_S) || Math.max(0.3, LEASE_MS / 1000));
const POLL_MS = 1000 * (Number(process.env.CRASHPOINT_POLL_S) || 0.02);
// Unknown outcomes that stay unreachable this many lookups in a row go to review.
const MAX_UNAVAILABLE = 50;
const RECOVERY = !['', '0'].includes(process.env.CRASHPOINT_RECOVERY || '');
const BUGS = new Set(['fresh-key', 'lease-by-clock']);

function parseArgs(argv) {
  const bugs = new Set();
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--bug' && BUGS.has(argv[i + 1])) {
      bugs.add(argv[i + 1]);
      i += 1;
    } else {
      const usage = 'node worker.js [--bug fresh-key|lease-by-clock]';
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

function idempotencyKey(lease) {
  if (bugs.has('fresh-key')) return `effect-${lease.job}-attempt-${lease.token}`;
  return `effect-${lease.job}`;
}

function providerEnv(name, what) {
  const upper = String(name).toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '');
  return process.env[`CRASHPOINT_PROVIDER_${upper}_${what}`] || '';
}

// The provider a job names: its URL and kind (idempotent, plain or unqueryable).
function provider(name) {
  return { name, url: providerEnv(name, 'URL'), kind: providerEnv(name, 'KIND') || 'idempotent' };
}

// One HTTP exchange; resolves {status, body} or {error} (a timeout or a broken connection:
// the outcome is unknown). Never rejects.
function exchange(method, url, headers, body) {
  return new Promise((resolve) => {
    const all = { ...headers };
    if (body !== undefined) all['Content-Length'] = Buffer.byteLength(body);
    const options = { method, headers: all, agent: false, timeout: HTTP_TIMEOUT_MS };
    const req = http.request(url, options, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        data += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
      res.on('aborted', () => resolve({ error: 'response aborted' }));
      res.on('error', (err) => resolve({ error: err.code || err.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ error: err.code || err.message }));
    req.end(body);
  });
}

// -- the queue, from a worker's side ------------------------------------------------------

// Claim the next ready job, or reclaim one whose lease ran out; null when there is none.
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

// Pick up one redelivery (a job enqueued again), if there is one: the job it is for and
// the live lease another worker holds on it, or null for none. Taking the message is a
// rename only one worker wins. The message is then dropped, whatever the job's state:
// the job is in ready/ (a claim takes it), ended, or leased; a lease that ran out is
// reclaimed by claim(), and one that is live is another worker's attempt, perhaps in
// flight at the provider, so nothing may be sent for the job now. The job is not lost
// by declining: its lease file stays, and comes back to any worker when it runs out.
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

// Extend the lease (and record what changed) if it is still ours; null if it was lost.
function renew(lease, changes = {}) {
  const next = { ...lease, ...changes, deadline: Date.now() + LEASE_MS };
  return queue.tryRename(queue.leaseFile(lease), queue.leaseFile(next)) ? next : null;
}

function finish(lease, where, why) {
  if (queue.tryRename(queue.leaseFile(lease), queue.jobFile(where, lease.job))) {
    log(`${lease.job}: ${where} (${why})`);
    // For status.js: how it ended and after how many claims (best effort, after the fact).
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
  const target = provider(doc.provider || 'billing');
  const key = idempotencyKey(lease);
  const owned = (changes) => {
    const next = renew(lease, changes);
    if (!next && bugs.has('lease-by-clock') && Date.now() < lease.deadline) {
      // The bug: the queue says the lease is gone, but the worker's own clock says it has
      // time left, and the worker believes its clock. Harmless until the clock is wrong.
      lease = { ...lease, ...changes };
      return;
    }
    if (!next) throw new LeaseLost(`${job}: lease lost (attempt ${lease.token}); stopping`);
    lease = next;
  };

  await failpoint('after_claim', job, lease.token);
  if (!target.url) return finish(lease, 'dead', `no provider URL for ${doc.provider}`);
  if (fs.existsSync(queue.jobFile('results', job))) {
    owned();
    return finish(lease, 'done', 'result already written by an earlier attempt');
  }

  // What we know about the provider's side: nothing sent yet, or an earlier write whose
  // outcome we could not observe (a crashed owner sent one: lease.sends > 0; or the state
  // directory was restored and the count may be stale: a reconcile mark).
  const restored = fs.existsSync(queue.jobFile('reconcile', job));
  let state = lease.sends > 0 || restored ? 'unknown' : 'not_sent';
  let response = null;
  let unavailable = 0;
  let failures = 0;
  while (response === null) {
    if (state === 'unknown') {
      await failpoint('before_reconcile', job, lease.token);
      owned();
      const found = await lookup(target, key, job);
      await failpoint('after_reconcile', job, lease.token);
      if (found.state === 'confirmed') {
        response = found.response;
        break;
      }
      if (found.state === 'not_found') {
        state = 'not_sent';
      } else if (found.state === 'unqueryable') {
        return finish(lease, 'review', 'unknown outcome and the provider cannot be asked');
      } else if (found.state === 'conflict') {
        return finish(lease, 'review', `unknown outcome and ${found.why}`);
      } else {
        // in flight at the provider, or the provider is unreachable: ask again later
        unavailable += found.state === 'unavailable' ? 1 : 0;
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
    const res = await send(target, key, lease, doc.body);
    if (res.status === 200 || res.status === 201) {
      await failpoint('after_external_call', job, lease.token);
      response = { status: res.status, body: safeJson(res.body) };
    } else if (res.error || res.status === 409) {
      log(`${job}: outcome unknown (${res.error || '409 in flight'}); reconcile before any retry`);
      state = 'unknown';
      await sleep(backoff(1));
    } else if (res.status === 422) {
      return finish(lease, 'review', `the key holds another payload: ${res.body.slice(0, 200)}`);
    } else if (res.status >= 500) {
      failures += 1;
      log(`${job}: failed before commit (${res.status}); write ${lease.sends} of ${MAX_ATTEMPTS}`);
      state = 'not_sent';
      await sleep(backoff(failures));
    } else {
      const why = `provider refused the write: ${res.status} ${res.body.slice(0, 200)}`;
      return finish(lease, 'dead', why);
    }
  }

  // Response in hand: write it locally, then acknowledge. Both only while we own the job.
  owned();
  queue.writeAtomic(queue.jobFile('results', job), JSON.stringify({ job_id: job, key, response }));
  await failpoint('after_local_write', job, lease.token);
  return finish(lease, 'done', `effect confirmed with key ${key}`);
}

// The one write of a job: by key to an idempotent provider, with the marker otherwise.
function send(target, key, lease, body) {
  const headers = {
    'Content-Type': 'application/json',
    'X-Worker-Id': WORKER,
    'X-Fencing-Token': String(lease.token),
  };
  if (target.kind === 'idempotent') {
    headers['Idempotency-Key'] = key;
    return exchange('POST', `${target.url}/v1/effects`, headers, JSON.stringify(body));
  }
  const marked = JSON.stringify({ ...body, client_marker: key });
  return exchange('POST', `${target.url}/v1/sends`, headers, marked);
}

async function lookup(target, key, job) {
  if (target.kind === 'unqueryable') return { state: 'unqueryable' };
  const idem = target.kind === 'idempotent';
  const param = idem ? 'idempotency_key' : 'client_marker';
  const q = `${param}=${encodeURIComponent(key)}&job_id=${encodeURIComponent(job)}`;
  const path = idem ? 'effects' : 'sends';
  const res = await exchange('GET', `${target.url}/v1/${path}?${q}`, { 'X-Worker-Id': WORKER });
  if (res.status === 200) {
    const doc = safeJson(res.body);
    if (!idem) {
      // A plain provider answers every send with this marker: none, one, or (a bug
      // somewhere) several, which no retry can repair.
      if (!Array.isArray(doc)) return { state: 'unavailable' };
      if (doc.length === 0) return { state: 'not_found' };
      if (doc.length === 1) return { state: 'confirmed', response: { status: 201, body: doc[0] } };
      return { state: 'conflict', why: `${doc.length} sends carry the marker ${key}` };
    }
    if (doc && doc.state === 'completed') {
      const status = (doc.response && doc.response.status) || 0;
      if (status >= 200 && status < 300) return { state: 'confirmed', response: doc.response };
      return { state: 'conflict', why: `the key holds a stored ${status}` };
    }
    return { state: 'in_flight' };
  }
  if (res.status === 404 && idem) return { state: 'not_found' };
  if (res.status === 501) return { state: 'unqueryable' };
  return { state: 'unavailable' };
}

// After a restore of the state directory the queue's counts of writes may be older than
// the provider's truth: mark every unfinished job to be reconciled before its next write.
function markForReconcile() {
  let marked = 0;
  for (const name of queue.list('jobs')) {
    const job = decodeURIComponent(name.slice(0, -'.json'.length));
    const ended = ['done', 'dead', 'review'].some((d) => fs.existsSync(queue.jobFile(d, job)));
    if (!ended) {
      queue.writeAtomic(queue.jobFile('reconcile', job), '{}');
      marked += 1;
    }
  }
  return marked;
}

function backoff(n) {
  return Math.min(LEASE_MS / 3, 25 * 2 ** Math.max(0, n - 1));
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// -- the loop -----------------------------------------------------------------------------

async function main() {
  queue.ensureDirs();
  log(`started (pid ${process.pid}, lease ${LEASE_MS} ms${bugs.size ? `, bug ${[...bugs]}` : ''})`);
  if (RECOVERY) log(`recovery: ${markForReconcile()} unfinished jobs reconcile before any write`);
  for (;;) {
    const delivery = takeDelivery();
    if (delivery) {
      // Reported so a harness sees the redelivery consumed; then declined or dropped.
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
