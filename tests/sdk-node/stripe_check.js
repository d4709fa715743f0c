// stripe-node, unmodified, against crashpoint's stripe persona (argv[2]: its URL).
// Prints one JSON line of what the SDK saw; the Python test judges the provider's truth.
'use strict';
const Stripe = require('stripe');

const url = new URL(process.argv[2]);
const stripe = new Stripe('sk_test_crashpoint', {
  host: url.hostname,
  port: Number(url.port),
  protocol: 'http',
  maxNetworkRetries: 0, // explicit: the SDK's default is 2
  timeout: 5000,
});

const intent = (job) => ({
  amount: 1000,
  currency: 'usd',
  confirm: true,
  metadata: { job_id: job },
});

async function main() {
  const out = {};
  const first = await stripe.paymentIntents.create(intent('j-create'), {
    idempotencyKey: 'job-j-create',
  });
  const again = await stripe.paymentIntents.create(intent('j-create'), {
    idempotencyKey: 'job-j-create',
  });
  out.replay_same_id = first.id === again.id;
  out.replayed_header = again.lastResponse.headers['idempotent-replayed'];
  try {
    await stripe.paymentIntents.create(intent('j-5xx'), { idempotencyKey: 'job-j-5xx' });
    out.error_class = null;
  } catch (err) {
    out.error_class = err.type;
    out.error_status = err.statusCode;
  }
  // No key passed: the SDK makes one (stripe-node-retry-<uuid>) and, on a reset
  // connection, retries once under it even with maxNetworkRetries 0.
  const dropped = await stripe.paymentIntents.create(intent('j-drop'));
  out.drop_status = dropped.status;
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.type || ''} ${err.stack || err}\n`);
  process.exit(1);
});
