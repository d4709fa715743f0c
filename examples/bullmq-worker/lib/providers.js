'use strict';
// Provider calls over HTTP (standard library), classified the way the protocol needs.
//
// A write ends ok, failed (a 5xx, or the connection never opened: nothing can have been
// committed), unknown (no answer after the request left, or 409: the key is in flight),
// conflict (422) or refused (another 4xx). A lookup ends confirmed, not_found, conflict
// (several sends under one marker, or an error stored under the key), in_flight,
// unavailable or unqueryable.

const http = require('http');
const config = require('./config');

// One exchange on a fresh connection: {status, body}, {notSent} or {error}; never rejects.
function exchange(method, url, headers, body) {
  return new Promise((resolve) => {
    const all = { ...headers };
    if (body !== undefined) all['Content-Length'] = Buffer.byteLength(body);
    let connected = false;
    const options = { method, headers: all, agent: false, timeout: config.httpTimeoutMs };
    const req = http.request(url, options);
    req.on('socket', (s) => s.on('connect', () => (connected = true)));
    req.on('response', (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode, body: data }));
      res.on('aborted', () => resolve({ error: 'response aborted' }));
      res.on('error', (err) => resolve({ error: err.code || err.message }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => {
      const why = err.code || err.message;
      resolve(connected ? { error: why } : { notSent: why });
    });
    req.end(body);
  });
}

function json(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function id(doc) {
  return doc && doc.id !== undefined && doc.id !== null ? String(doc.id) : null;
}

function headers(token) {
  return { 'X-Worker-Id': config.worker, 'X-Fencing-Token': String(token) };
}

async function write(p, body, key, token) {
  const h = { ...headers(token), 'Content-Type': 'application/json' };
  let url = `${p.url}/v1/sends`;
  let payload = { ...body, client_marker: key }; // a plain provider finds the send by it
  if (p.kind === 'idempotent') {
    url = `${p.url}/v1/effects`;
    payload = body;
    h['Idempotency-Key'] = key;
  }
  const res = await exchange('POST', url, h, JSON.stringify(payload));
  if (res.notSent) return { kind: 'failed', detail: `not sent (${res.notSent})` };
  if (res.error) return { kind: 'unknown', detail: `no answer (${res.error})` };
  if (res.status >= 200 && res.status < 300) {
    return { kind: 'ok', detail: `http ${res.status}`, ref: id(json(res.body)) };
  }
  if (res.status === 409) return { kind: 'unknown', detail: 'http 409: the key is in flight' };
  if (res.status === 422) {
    return { kind: 'conflict', detail: 'http 422: the key holds another payload' };
  }
  if (res.status >= 500) return { kind: 'failed', detail: `http ${res.status}` };
  return { kind: 'refused', detail: `http ${res.status}: ${res.body.slice(0, 200)}` };
}

async function lookup(p, job, key, token) {
  if (p.kind === 'unqueryable') {
    return { outcome: 'unqueryable', detail: 'the provider has no lookup' };
  }
  const idem = p.kind === 'idempotent';
  const q = new URLSearchParams({ [idem ? 'idempotency_key' : 'client_marker']: key, job_id: job });
  const url = `${p.url}/v1/${idem ? 'effects' : 'sends'}?${q}`;
  const res = await exchange('GET', url, headers(token));
  if (res.notSent || res.error) return { outcome: 'unavailable', detail: res.notSent || res.error };
  if (res.status === 501) return { outcome: 'unqueryable', detail: 'http 501' };
  if (res.status === 404 && idem) return { outcome: 'not_found', detail: 'http 404' };
  const doc = json(res.body);
  if (res.status !== 200 || doc === null) {
    return { outcome: 'unavailable', detail: `http ${res.status}` };
  }
  if (!idem) {
    if (!Array.isArray(doc)) return { outcome: 'unavailable', detail: 'not a list' };
    if (doc.length === 0) return { outcome: 'not_found', detail: 'no send with this marker' };
    if (doc.length === 1) return { outcome: 'confirmed', detail: 'one send', ref: id(doc[0]) };
    return { outcome: 'conflict', detail: `${doc.length} sends with one marker` };
  }
  if (doc.state === 'in_flight') return { outcome: 'in_flight', detail: 'the key is in flight' };
  const status = (doc.response && doc.response.status) || 0;
  if (doc.state === 'completed' && status >= 200 && status < 300) {
    return { outcome: 'confirmed', detail: 'completed', ref: id(doc.response.body) };
  }
  if (doc.state === 'completed') {
    return { outcome: 'conflict', detail: `completed with http ${status}` };
  }
  return { outcome: 'unavailable', detail: `state ${doc.state}` };
}

module.exports = { lookup, write };
