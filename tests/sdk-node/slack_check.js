// Drives the unmodified @slack/web-api WebClient against crashpoint's slack persona.
// Usage: node slack_check.js URL SCENARIO JOB MARKER
// Prints one JSON line: what the SDK returned or threw (its error code, status, data),
// which tests/process/test_sdk_slack.py holds against the provider's own arrivals.
'use strict';

const { WebClient } = require('@slack/web-api');

const [url, scenario, job, marker] = process.argv.slice(2);
const metadata = { event_type: 'crashpoint_job', event_payload: { job_id: job, client_marker: marker } };
// No waits between retries, so a retried 5xx shows at once in the arrivals.
const rapid = { retries: 2, minTimeout: 0, maxTimeout: 1 };

function client(options) {
  return new WebClient('xoxb-crashpoint', { slackApiUrl: `${url}/api/`, logLevel: 'error', ...options });
}

function post(web) {
  return web.chat.postMessage({ channel: 'C1', text: `job ${job}`, metadata });
}

const scenarios = {
  // Two posts of the same message (no idempotency), then the history read that finds it.
  async post() {
    const web = client({ retryConfig: { retries: 0 } });
    const first = await post(web);
    const second = await post(web);
    const history = await web.conversations.history({ channel: 'C1', include_all_metadata: true });
    const found = history.messages.filter((m) => m.metadata?.event_payload?.client_marker === marker);
    return { first: first.ts, second: second.ts, found: found.map((m) => m.ts) };
  },
  // One attempt only: how the SDK surfaces a 5xx, a timeout or a dropped connection.
  async once() {
    return { ts: (await post(client({ retryConfig: { retries: 0 }, timeout: 1500 }))).ts };
  },
  // The SDK's own retries (its default policy retries every HTTP error and connection error).
  async retried() {
    return { ts: (await post(client({ retryConfig: rapid }))).ts };
  },
  async reject429() {
    return { ts: (await post(client({ rejectRateLimitedCalls: true, retryConfig: { retries: 0 } }))).ts };
  },
  async wait429() {
    return { ts: (await post(client({ retryConfig: rapid }))).ts };
  },
  async nometa() {
    const web = client({ retryConfig: { retries: 0 } });
    return { ts: (await web.chat.postMessage({ channel: 'C1', text: 'no metadata' })).ts };
  },
  async identity() {
    const web = client({ retryConfig: { retries: 0 }, headers: { 'X-Crashpoint-Identity': 'acct-1' } });
    return { ts: (await post(web)).ts };
  },
  async history() {
    const web = client({ retryConfig: { retries: 0 } });
    return { messages: (await web.conversations.history({ channel: 'C1' })).messages.length };
  },
};

scenarios[scenario]()
  .then((result) => console.log(JSON.stringify({ ok: true, ...result })))
  .catch((err) => {
    console.log(
      JSON.stringify({
        ok: false,
        name: err.constructor.name,
        code: err.code,
        statusCode: err.statusCode,
        retryAfter: err.retryAfter,
        error: err.data?.error,
        message: String(err.message).slice(0, 300),
      }),
    );
  });
