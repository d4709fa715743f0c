"""python3 worker.py: charge each queued job once through Stripe's API.

The job's id is its Idempotency-Key and its ``metadata[job_id]``, so a worker that takes
over a job whose first owner died mid-charge sends the same request again and Stripe
answers the first charge. A claim is a file holding its owner's lease deadline.
"""

import json
import os
import pathlib
import socket
import time
import urllib.parse
import urllib.request

STATE = pathlib.Path(os.environ.get("CRASHPOINT_STATE_DIR", "."))
BASE = os.environ["STRIPE_API_BASE"]
LEASE_S = float(os.environ.get("CRASHPOINT_LEASE_TTL_S", "1.0"))
TIMEOUT_S = float(os.environ.get("CRASHPOINT_HTTP_TIMEOUT_S", "2.0"))
ME = os.environ.get("CRASHPOINT_WORKER_ID", str(os.getpid()))
_fp = None


def failpoint(point, job):
    global _fp
    path = os.environ.get("CRASHPOINT_FAILPOINTS")
    if not path:
        return
    if _fp is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        _fp = (sock, sock.makefile("rb"))
    line = {"point": point, "job": job, "attempt": None, "pid": os.getpid()}
    _fp[0].sendall((json.dumps(line) + "\n").encode())
    _fp[1].readline()


def claim(job):
    """Own the job until the lease runs out: a new claim, or one whose owner's ran out."""
    path = STATE / "claims" / job
    try:
        if time.time() < float(path.read_text() or 0):
            return False
    except (FileNotFoundError, ValueError):
        pass
    tmp = path.with_name(f".{job}.{ME}")
    tmp.write_text(str(time.time() + LEASE_S * 4))
    tmp.replace(path)
    return True


def charge(job, body):
    form = urllib.parse.urlencode(
        {"amount": body.get("amount_cents", 1000), "currency": "usd", "metadata[job_id]": job}
    ).encode()
    # The URL is the harness's http:// provider address: no file: or custom scheme.
    req = urllib.request.Request(  # noqa: S310
        BASE.rstrip("/") + "/v1/payment_intents",
        data=form,
        headers={
            "Authorization": "Bearer sk_test_crashpoint",
            "Idempotency-Key": job,
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Worker-Id": ME,
        },
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as res:  # noqa: S310
        return json.loads(res.read())["id"]


def main():
    for d in ("queue", "claims", "done"):
        (STATE / d).mkdir(exist_ok=True)
    while True:
        for item in sorted((STATE / "queue").glob("*.json")):
            job = item.stem
            if (STATE / "done" / job).exists() or not claim(job):
                continue
            doc = json.loads(item.read_text())
            failpoint("after_claim", job)
            failpoint("before_external_call", job)
            try:
                ref = charge(job, doc.get("body") or {})
            except OSError:
                (STATE / "claims" / job).unlink(missing_ok=True)  # unknown: retry, same key
                continue
            failpoint("after_external_call", job)
            (STATE / "done" / job).write_text(ref)
            failpoint("after_local_write", job)
        time.sleep(float(os.environ.get("CRASHPOINT_POLL_S", "0.02")))


if __name__ == "__main__":
    main()
