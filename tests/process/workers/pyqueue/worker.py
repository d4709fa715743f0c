"""python3 worker.py [--cap N] [--bug BUG] [--poll S] [--nap-after-jobs] [--release 2]
       [--job-end] [--requeue]

A small third-party job worker, as a user would write one: its own SQLite queue
(jobdb.py) in ``$CRASHPOINT_STATE_DIR``, Python's standard library only, and two
providers it finds by name: ``billing`` (idempotent: one ``Idempotency-Key`` per job) and
``mailer`` (plain: one ``client_marker`` per job, looked up before any retry). A job's
payload names its provider.

Correct by construction: keys and markers come from the job, never the attempt; a write
is counted and marked unknown in the queue before it is sent; an unknown outcome is
reconciled before anything is sent again; after a restore (``CRASHPOINT_RECOVERY=1``)
every unfinished job is reconciled first; a provider that cannot be asked sends the job
to review; writes stop at ``CRASHPOINT_MAX_ATTEMPTS``.

It looks at its queue every ``CRASHPOINT_POLL_S`` (``--poll S`` instead), 0.02 s unless
told; with ``--nap-after-jobs`` it sleeps that long after each job too, as a worker
that works in batches does: a slow poll, yet correct. With ``--job-end`` it announces
each job's end on the failpoint socket (``job_end`` with the outcome).

A cancelled job (cancel.py) is looked for before each write, and ends dead, unsent.
``--release 2`` is the worker's next release: its keys and markers carry ``v2-``, and it
looks an unknown write up under every release's key, newest first, since an earlier
release may have sent it.

With ``--requeue`` a failed or unknown write gives the job back to the queue, and its
next claim (any worker's) reconciles or retries, as queue-driven frameworks retry: each
retry is then a claim, which a claim-counting status line (``status.py --count-claims``)
reports as an attempt.

Bugs, for crashpoint to catch: ``--cap N`` sends up to N writes whatever the cap it was
given; ``--bug done-on-reclaim`` closes a job taken over from an earlier owner as done
without asking the provider; ``--bug forgets-old-keys`` (release 2) looks up its own
key only; ``--bug cancel-at-claim-only`` looks for a cancel once, when it takes the job.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import time
import urllib.parse

import jobdb

WORKER = os.environ.get("CRASHPOINT_WORKER_ID", f"py-{os.getpid()}")
LEASE_S = float(os.environ.get("CRASHPOINT_LEASE_TTL_S", "1.0"))
HTTP_TIMEOUT_S = float(os.environ.get("CRASHPOINT_HTTP_TIMEOUT_S", "2.0"))
RECOVERY = os.environ.get("CRASHPOINT_RECOVERY") == "1"
POLL_S = float(os.environ.get("CRASHPOINT_POLL_S", "0.02"))
MAX_UNAVAILABLE = 50
#: With --job-end, each job's end is announced on the failpoint socket, in these words.
OUTCOMES = {"done": "done", "review": "needs_review", "dead": "dead_lettered"}
JOB_END = "--job-end" in sys.argv[1:]
#: With --requeue, a retry goes back through the queue: one claim per retry.
REQUEUE = "--requeue" in sys.argv[1:]

# -- the failpoint protocol (any language does the same in twenty lines) ------------------
_FP = os.environ.get("CRASHPOINT_FAILPOINTS")
_fp: tuple[socket.socket, object] | None = None


def failpoint(point: str, job: str, attempt: int | None, **extra: str) -> None:
    """Say where we are and wait for the harness's answer; a no-op without the socket."""
    global _FP, _fp
    if not _FP:
        return
    try:
        if _fp is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(_FP)
            _fp = (sock, sock.makefile("rb"))
        line = {"point": point, "job": job, "attempt": attempt, "pid": os.getpid(), **extra}
        _fp[0].sendall((json.dumps(line) + "\n").encode())
        _fp[1].readline()  # type: ignore[attr-defined]
    except OSError:
        _FP = None  # the harness went away: carry on without failpoints


# -- the providers ------------------------------------------------------------------------


def provider(name: str) -> tuple[str, str]:
    var = "".join(c if c.isalnum() else "_" for c in name.upper()).strip("_")
    url = os.environ.get(f"CRASHPOINT_PROVIDER_{var}_URL", "")
    return url, os.environ.get(f"CRASHPOINT_PROVIDER_{var}_KIND", "plain")


def exchange(url: str, method: str, path: str, headers: dict[str, str], body: bytes | None):
    """``(status, body)``; ``("not_sent", ...)`` when nothing left us, ``("unknown", ...)``
    when the request may have arrived but no answer came back."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.connect()
    except OSError as exc:
        return "not_sent", str(exc)
    try:
        conn.request(method, path, body=body, headers=headers)
        res = conn.getresponse()
        return res.status, res.read()
    except (OSError, http.client.HTTPException) as exc:
        return "unknown", str(exc)
    finally:
        conn.close()


#: ``--bug email-in-key``: the key names the customer's address (a hygiene warning).
EMAIL_IN_KEY = "email-in-key" in sys.argv


#: ``--release N``: which release of the worker this is (keys changed in release 2).
RELEASE = int(sys.argv[sys.argv.index("--release") + 1]) if "--release" in sys.argv else 1


def key_of(job: str, kind: str, release: int = RELEASE) -> str:
    key = f"{'billing' if kind == 'idempotent' else 'mail'}-{job}"
    key = f"v2-{key}" if release >= 2 else key
    return f"{key}-for-{job}@customers.example" if EMAIL_IN_KEY else key


def write(lease: jobdb.Lease, url: str, kind: str) -> tuple[str, str]:
    headers = {
        "Content-Type": "application/json",
        "X-Worker-Id": WORKER,
        "X-Fencing-Token": str(lease.token),
    }
    body = json.loads(lease.body)
    if kind == "idempotent":
        headers["Idempotency-Key"] = key_of(lease.job_id, kind)
        path = "/v1/effects"
    else:
        body = {**body, "client_marker": key_of(lease.job_id, kind)}
        path = "/v1/sends"
    status, data = exchange(url, "POST", path, headers, json.dumps(body).encode())
    if status in ("unknown", 409):
        return "unknown", str(status)
    if status == "not_sent" or (isinstance(status, int) and status >= 500):
        return "failed", str(status)
    if isinstance(status, int) and 200 <= status < 300:
        return "ok", _ref(data)
    return "refused", f"{status} {data[:200]!r}"


def lookup_any(job: str, url: str, kind: str, releases: list[int]) -> tuple[str, str]:
    """:func:`lookup` under each release's key in turn, until one finds more than nothing."""
    for release in releases:
        found = lookup(job, url, kind, release)
        if found[0] != "not_found":
            return found
    return "not_found", ""


def lookup(job: str, url: str, kind: str, release: int = RELEASE) -> tuple[str, str]:
    """``confirmed``, ``not_found``, ``unqueryable``, ``conflict`` or ``unavailable``."""
    key = urllib.parse.quote(key_of(job, kind, release))
    if kind == "idempotent":
        path = f"/v1/effects?idempotency_key={key}&job_id={job}"
    else:
        path = f"/v1/sends?client_marker={key}&job_id={job}"
    status, data = exchange(url, "GET", path, {"X-Worker-Id": WORKER}, None)
    if status == 501:
        return "unqueryable", ""
    if status == 404 and kind == "idempotent":
        return "not_found", ""
    if status != 200:
        return "unavailable", str(status)
    doc = json.loads(data)
    if kind == "idempotent":
        if doc.get("state") != "completed":
            return "unavailable", "in flight"
        response = doc.get("response") or {}
        ok = 200 <= response.get("status", 0) < 300
        if not ok:
            return "conflict", "an error stored under our key"
        return "confirmed", _record(response.get("body"))
    if not doc:
        return "not_found", ""
    return ("confirmed", _record(doc[0])) if len(doc) == 1 else ("conflict", "")


def _record(effect: object) -> str:
    """The provider's record id of an effect: what the status line names the job's by."""
    if not isinstance(effect, dict):
        return ""
    return str(effect.get("external_id") or effect.get("id") or "")


def _ref(data: bytes) -> str:
    try:
        return _record(json.loads(data))
    except ValueError:
        return ""


# -- one job ------------------------------------------------------------------------------


class LeaseLost(Exception):
    pass


def run_job(conn, lease: jobdb.Lease, cap: int | None, bugs: set[str]) -> None:
    job, token = lease.job_id, lease.token

    def owned(**changes: object) -> None:
        if not jobdb.update(conn, lease, LEASE_S, **changes):
            raise LeaseLost(f"{job}: lease lost (token {token})")

    def finish(state: str, note: str) -> None:
        owned(state=state, note=note)
        log(f"{job}: {state} ({note})")
        if JOB_END:
            # Durable now: the harness need not ask the status command about this job.
            failpoint("job_end", job, token, outcome=OUTCOMES[state])

    url, kind = provider(lease.provider)
    if not url:
        return finish("dead", f"no provider {lease.provider}")
    if "done-on-reclaim" in bugs and token > 1:
        return finish("done", "taken over from an earlier owner")  # the bug: never asked
    if "cancel-at-claim-only" in bugs and jobdb.cancelled(conn, job):
        return finish("dead", "cancelled")  # the bug: asked here, never again
    # Any release up to ours may have sent the write: each one's key is asked for.
    releases = [RELEASE] if "forgets-old-keys" in bugs else list(range(RELEASE, 0, -1))
    # A restored queue may have forgotten writes that were sent: ask before sending.
    unknown = lease.unknown or RECOVERY
    sends, unavailable, failures = lease.sends, 0, 0
    while True:
        if unknown:
            failpoint("before_reconcile", job, token)
            owned()
            found, detail = lookup_any(job, url, kind, releases)
            failpoint("after_reconcile", job, token)
            if found == "confirmed":
                return finish("done", detail or "confirmed by lookup")
            if found in ("unqueryable", "conflict"):
                return finish("review", f"unknown outcome, lookup says {found}")
            if found == "unavailable":
                unavailable += 1
                if unavailable >= MAX_UNAVAILABLE:
                    return finish("review", f"unknown outcome; {unavailable} lookups failed")
                time.sleep(backoff(unavailable))
                continue
            unknown = False
        if cap is not None and sends >= cap:
            return finish("dead", f"{sends} writes sent, none confirmed")
        if "cancel-at-claim-only" not in bugs and jobdb.cancelled(conn, job):
            return finish("dead", "cancelled")
        failpoint("before_external_call", job, token)
        sends += 1
        owned(sends=sends, unknown=1)  # counted, and unknown, before it leaves
        outcome, detail = write(lease, url, kind)
        if outcome == "ok":
            failpoint("after_external_call", job, token)
            finish("done", detail)
            failpoint("after_local_write", job, token)
            return
        if outcome == "unknown":
            log(f"{job}: outcome unknown ({detail}); reconcile before any retry")
            if REQUEUE:
                # Still unknown in the queue: its next claim reconciles first.
                jobdb.requeue(conn, lease, backoff(1))
                return
            unknown = True
            time.sleep(backoff(1))
        elif outcome == "failed":
            failures += 1
            owned(unknown=0)  # the provider said no before committing: nothing happened
            if REQUEUE:
                jobdb.requeue(conn, lease, backoff(sends))
                return
            time.sleep(backoff(failures))
        else:
            return finish("dead", f"provider refused: {detail}")


def backoff(n: int) -> float:
    return min(LEASE_S / 4, 0.02 * 2 ** max(0, n - 1))


def log(message: str) -> None:
    print(f"[{WORKER}] {message}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cap", type=int, help="send up to N writes, whatever we are told")
    parser.add_argument(
        "--bug",
        action="append",
        default=[],
        choices=["done-on-reclaim", "email-in-key", "forgets-old-keys", "cancel-at-claim-only"],
    )
    parser.add_argument("--release", type=int, default=1, help="which release this is")
    parser.add_argument("--poll", type=float, help="seconds between looks at the queue")
    parser.add_argument("--nap-after-jobs", action="store_true", help="sleep a poll after a job")
    parser.add_argument("--job-end", action="store_true", help="announce each job's end")
    parser.add_argument("--requeue", action="store_true", help="retry through the queue")
    args = parser.parse_args()
    poll = args.poll if args.poll is not None else POLL_S
    told = os.environ.get("CRASHPOINT_MAX_ATTEMPTS")
    cap = args.cap if args.cap is not None else (int(told) if told else None)
    conn = jobdb.connect()
    log(f"started (pid {os.getpid()}, lease {LEASE_S} s, cap {cap}, recovery {RECOVERY})")
    while True:
        lease, consumed = jobdb.claim(conn, WORKER, LEASE_S)
        for job in consumed:
            failpoint("after_claim", job, None)
        if lease is None:
            time.sleep(poll)
            continue
        try:
            run_job(conn, lease, cap, set(args.bug))
        except LeaseLost as exc:
            log(str(exc))
        if args.nap_after_jobs:
            time.sleep(poll)


if __name__ == "__main__":
    sys.exit(main())
