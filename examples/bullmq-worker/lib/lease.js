'use strict';
// The lease on one logical job, in Redis: SET NX PX with "<worker>:<token>" as the value,
// renewed (compare-and-pexpire) every third of the TTL while the job runs, released
// (compare-and-delete) at its end. The token, an INCR per job, is the fencing token sent
// with every write; Redis is not rolled back by a restore of the state directory, so
// tokens never repeat. BullMQ's own lock covers one delivery; two deliveries of one job
// (a duplicate enqueue, a redelivery) are two BullMQ jobs, and this lease lets one act.

const config = require('./config');

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end`;
// Call out only with this share of the TTL left.
const MARGIN = 0.25;

class LeaseLost extends Error {}

class Lease {
  constructor(redis, job, token) {
    this.redis = redis;
    this.job = job;
    this.token = token;
    this.key = config.redisKey('lease', job);
    this.value = `${config.worker}:${token}`;
    this.lost = false;
    this.timer = setInterval(() => {
      this.renew().catch(() => {
        this.lost = true;
      });
    }, config.leaseMs / 3);
  }

  static async acquire(redis, job) {
    // The job's fencing token; kept a day, far longer than any trial.
    const [[, token]] = await redis
      .multi()
      .incr(config.redisKey('token', job))
      .expire(config.redisKey('token', job), 86400)
      .exec();
    const key = config.redisKey('lease', job);
    const ok = await redis.set(key, `${config.worker}:${token}`, 'PX', config.leaseMs, 'NX');
    return ok === 'OK' ? new Lease(redis, job, token) : null;
  }

  async renew() {
    const t0 = Date.now();
    const ok = await this.redis.eval(RENEW, 1, this.key, this.value, config.leaseMs);
    if (ok !== 1 || Date.now() - t0 > (1 - MARGIN) * config.leaseMs) this.lost = true;
    return !this.lost;
  }

  // Throw LeaseLost unless the lease is ours, just renewed.
  async ensure(step) {
    if (this.lost || !(await this.renew())) {
      throw new LeaseLost(`${this.job}: lease lost before ${step}`);
    }
  }

  async release() {
    clearInterval(this.timer);
    await this.redis.eval(RELEASE, 1, this.key, this.value).catch(() => {});
  }
}

module.exports = { Lease, LeaseLost };
