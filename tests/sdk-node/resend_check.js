// Drives the unpatched `resend` Node SDK against a resend persona for
// tests/process/test_sdk_resend.py.
//
// Usage: node resend_check.js BASE_URL
// Reads one JSON command per line on stdin and answers one JSON line per command on
// stdout, in completion order (commands run concurrently, so a test can hold one
// request at the provider while it sends another):
//   {"id": 1, "op": "send", "params": {...}, "key": "k-1", "headers": {...}, "timeout_ms": 2000}
//   {"id": 2, "op": "get", "email_id": "...", "headers": {...}}
// -> {"id": 1, "data": ..., "error": ..., "threw": null | "message"}
// The SDK never throws for an HTTP or network failure: it returns {data, error}.
"use strict";

const readline = require("node:readline");
const { Resend } = require("resend");

const baseUrl = process.argv[2];
if (!baseUrl) {
  process.stderr.write("usage: node resend_check.js BASE_URL\n");
  process.exit(2);
}
// The base URL through the constructor's documented option (RESEND_BASE_URL works too).
const resend = new Resend("re_crashpoint_test", { baseUrl });

function options(cmd) {
  const opts = {};
  if (cmd.key) opts.idempotencyKey = cmd.key;
  if (cmd.headers) opts.headers = cmd.headers;
  if (cmd.timeout_ms) opts.signal = AbortSignal.timeout(cmd.timeout_ms);
  return opts;
}

async function run(cmd) {
  if (cmd.op === "send") return resend.emails.send(cmd.params, options(cmd));
  if (cmd.op === "get") return resend.emails.get(cmd.email_id, options(cmd));
  throw new Error(`unknown op ${JSON.stringify(cmd.op)}; use send or get`);
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const cmd = JSON.parse(line);
  run(cmd).then(
    ({ data, error }) => {
      process.stdout.write(JSON.stringify({ id: cmd.id, data, error, threw: null }) + "\n");
    },
    (err) => {
      const threw = `${err && err.name}: ${err && err.message}`;
      process.stdout.write(JSON.stringify({ id: cmd.id, data: null, error: null, threw }) + "\n");
    },
  );
});
