"""Each mutant, shown misbehaving with real worker processes against real providers.

Every test runs one setup twice: with the correct worker (which must not show the bug,
so the test can fail) and with the mutant (which must). Crash points are reached exactly
through a small failpoint server speaking the worker's UNIX-socket protocol; signals go to
the worker's whole process group.
"""

from __future__ import annotations

import contextlib
import json
import queue
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fake_providers import Arrival, Effect, Fault, start_provider
from scenarios import LedgerView, ReferenceTarget
from scenarios.fleet import Fleet, WorkerProc

pytestmark = pytest.mark.process

LEASE_TTL_S = 0.4
HTTP_TIMEOUT_S = 0.3
MAX_ATTEMPTS = 3
WAIT_S = 8.0


# -- a failpoint server: the harness side of the worker's protocol, in thirty lines ------


@dataclass
class Hit:
    point: str
    job: str
    attempt: int
    pid: int
    conn: socket.socket

    def resume(self) -> None:
        with contextlib.suppress(OSError):  # the worker may have been killed while held
            self.conn.sendall(b'{"action": "continue"}\n')


class Gate:
    def __init__(self, point: str, job: str | None) -> None:
        self.point, self.job = point, job
        self.hits: queue.Queue[Hit] = queue.Queue()
        self.spent = False

    def wait(self, timeout_s: float = WAIT_S) -> Hit:
        try:
            return self.hits.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"failpoint {self.point} for {self.job} never reached") from None


class FailpointServer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._gates: list[Gate] = []
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(64)
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, point: str, *, job: str | None = None) -> Gate:
        """Hold the next worker that reaches ``point`` (for ``job``) until resumed."""
        gate = Gate(point, job)
        with self._lock:
            self._gates.append(gate)
        return gate

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        for line in conn.makefile("rb"):
            msg = json.loads(line)
            hit = Hit(msg["point"], msg["job"], msg["attempt"], msg["pid"], conn)
            with self._lock:
                gate = next(
                    (
                        g
                        for g in self._gates
                        if not g.spent and g.point == hit.point and g.job in (None, hit.job)
                    ),
                    None,
                )
                if gate is not None:
                    gate.spent = True
            if gate is None:
                hit.resume()
            else:
                gate.hits.put(hit)

    def close(self) -> None:
        self._sock.close()
        for c in self._conns:
            c.close()


# -- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, Any]]:
    d = Path(tempfile.mkdtemp(prefix="cp-prov-"))
    procs = {
        k: start_provider(k, state_path=d / f"{k}.db", name=k)
        for k in ("idempotent", "plain", "unqueryable")
    }
    try:
        yield procs
    finally:
        for p in procs.values():
            p.close()
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class Rig:
    target: ReferenceTarget
    fleet: Fleet
    failpoints: FailpointServer
    providers: dict[str, Any]
    job: str

    def enqueue(self, kind: str, job: str | None = None) -> str:
        job = job or self.job
        self.target.enqueue(job, kind, {"job_id": job, "amount": 42, "to": "ops@example.com"})
        return job

    def start(self, mutant: str | None, **kw: Any) -> WorkerProc:
        return self.fleet.start(mutant=mutant, failpoints=self.failpoints.path, **kw)

    def view(self) -> LedgerView:
        return self.target.read_ledger()

    def effects(self, kind: str) -> list[Effect]:
        return [e for e in self.providers[kind].client.effects() if e.job_id == self.job]

    def writes(self, kind: str) -> list[Arrival]:
        return [
            a
            for a in self.providers[kind].client.arrivals()
            if a.job_id == self.job and a.kind == "write"
        ]

    def lookups(self, kind: str) -> list[Arrival]:
        return [
            a
            for a in self.providers[kind].client.arrivals()
            if a.job_id == self.job and a.kind == "lookup"
        ]

    def quiescent(self) -> bool:
        return self.target.quiescent(self.view(), [self.job])

    def wait_for(self, what: str, cond: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                logs = "\n".join(w.log()[-2000:] for w in self.fleet.workers.values())
                raise AssertionError(f"timed out waiting for {what}; worker logs:\n{logs}")
            time.sleep(0.01)

    def settle(self) -> None:
        self.wait_for("quiescence", self.quiescent)


@pytest.fixture
def rig(providers: dict[str, Any], tmp_path: Path) -> Iterator[Rig]:
    sock_dir = Path(tempfile.mkdtemp(prefix="cpfp-"))  # short: UNIX socket paths max 107
    target = ReferenceTarget("sqlite:///ledger.db", state_dir=tmp_path)
    target.setup()
    specs = {k: (k, p.url) for k, p in providers.items()}
    settings = dict(
        lease_ttl_s=LEASE_TTL_S,
        http_timeout_s=HTTP_TIMEOUT_S,
        max_attempts=MAX_ATTEMPTS,
        poll_s=0.01,
        backoff_s=0.02,
    )
    fleet = Fleet(target, specs, settings=settings)
    server = FailpointServer(sock_dir / "fp.sock")
    try:
        yield Rig(target, fleet, server, providers, f"j-{uuid.uuid4().hex[:8]}")
    finally:
        fleet.stop_all()
        server.close()
        target.close()
        for p in providers.values():
            p.client.disarm_all()
        shutil.rmtree(sock_dir, ignore_errors=True)


def kill(w: WorkerProc) -> None:
    w.signal(signal.SIGKILL)
    w.popen.wait(5)


MUTANT_OR_CORRECT = pytest.mark.parametrize("broken", [False, True], ids=["correct", "mutant"])


# -- the tests, one per mutant -------------------------------------------------------------


def crash_after_call(rig: Rig, kind: str, mutant: str | None) -> None:
    """Kill the owner with the provider's response in hand, then let a new worker recover."""
    rig.enqueue(kind)
    gate = rig.failpoints.hold("after_external_call", job=rig.job)
    w1 = rig.start(mutant)
    gate.wait()
    kill(w1)
    rig.start(mutant)
    rig.settle()


@MUTANT_OR_CORRECT
def test_fresh_key_per_attempt(rig: Rig, broken: bool) -> None:
    crash_after_call(rig, "idempotent", "fresh_key_per_attempt" if broken else None)
    keys = {a.idempotency_key for a in rig.writes("idempotent")}
    effects = rig.effects("idempotent")
    if broken:
        assert len(keys) == 2, keys
        assert len(effects) == 2, "a retry under a new key is a second effect"
    else:
        assert keys == {f"effect-{rig.job}"}
        assert len(effects) == 1
        assert rig.view().job(rig.job).delivery_state == "acknowledged"  # type: ignore[union-attr]


@MUTANT_OR_CORRECT
def test_key_persisted_after_call(rig: Rig, broken: bool) -> None:
    crash_after_call(rig, "plain", "key_persisted_after_call" if broken else None)
    writes, lookups = rig.writes("plain"), rig.lookups("plain")
    if broken:
        assert len(writes) == 2
        assert lookups == [], "nothing told the next attempt to look first"
        assert len(rig.effects("plain")) == 2
    else:
        assert len(writes) == 1
        assert len(lookups) == 1
        assert len(rig.effects("plain")) == 1


@MUTANT_OR_CORRECT
def test_timeout_is_failure(rig: Rig, broken: bool) -> None:
    rig.enqueue("plain")
    # The provider commits, then answers after the worker stopped waiting.
    rig.providers["plain"].client.arm(Fault("delay_response", job=rig.job, delay_s=1.0))
    rig.start("timeout_is_failure" if broken else None)
    rig.settle()
    if broken:
        assert len(rig.effects("plain")) == 2
        assert rig.view().reconciles == ()
    else:
        assert len(rig.effects("plain")) == 1
        assert [r.outcome for r in rig.view().reconciles] == ["confirmed"]


def stale_owner(rig: Rig, kind: str, point: str, mutant: str | None) -> WorkerProc:
    """Pause the owner at ``point`` past its lease while a second worker finishes the job,
    then let the first one go on."""
    rig.enqueue(kind)
    gate = rig.failpoints.hold(point, job=rig.job)
    w1 = rig.start(mutant, lease_ttl_s=LEASE_TTL_S)
    hit = gate.wait()
    w1.signal(signal.SIGSTOP)
    hit.resume()  # read when it wakes up
    rig.start(mutant)
    rig.wait_for(
        "the second owner to finish",
        lambda: (
            (j := rig.view().job(rig.job)) is not None
            and j.delivery_state == "acknowledged"
            and j.token == 2
        ),
    )
    w1.signal(signal.SIGCONT)
    return w1


@MUTANT_OR_CORRECT
def test_no_cas_on_result(rig: Rig, broken: bool) -> None:
    stale_owner(rig, "idempotent", "after_external_call", "no_cas_on_result" if broken else None)
    rig.wait_for(
        "the stale owner's result write",
        lambda: any(w.token == 1 for w in rig.view().result_writes),
    )
    [stale] = [w for w in rig.view().result_writes if w.token == 1]
    assert stale.accepted is broken, "only a missing CAS lets token 1 write after token 2"
    assert len(rig.effects("idempotent")) == 1


def stale_call_or_stop(rig: Rig, w1: WorkerProc) -> None:
    rig.wait_for(
        "the stale owner to call out or give up",
        lambda: len(rig.writes("plain")) >= 2 or '"lease_lost"' in w1.log(),
    )


@MUTANT_OR_CORRECT
def test_lease_checked_only_at_claim(rig: Rig, broken: bool) -> None:
    mutant = "lease_checked_only_at_claim" if broken else None
    w1 = stale_owner(rig, "plain", "before_external_call", mutant)
    stale_call_or_stop(rig, w1)
    tokens = [a.fencing_token for a in rig.writes("plain")]
    if broken:
        assert tokens == ["2", "1"], "the paused owner called out under its stale token"
        assert len(rig.effects("plain")) == 2
    else:
        assert tokens == ["2"]
        assert len(rig.effects("plain")) == 1


@MUTANT_OR_CORRECT
def test_renew_without_owner_check(rig: Rig, broken: bool) -> None:
    mutant = "renew_without_owner_check" if broken else None
    w1 = stale_owner(rig, "plain", "before_external_call", mutant)
    stale_call_or_stop(rig, w1)
    tokens = [a.fencing_token for a in rig.writes("plain")]
    if broken:
        assert tokens == ["2", "1"]
        rig.wait_for(
            "the stale result", lambda: any(w.token == 1 for w in rig.view().result_writes)
        )
        stale = [w for w in rig.view().result_writes if w.token == 1]
        assert any(w.accepted for w in stale), "the stolen lease lets the stale write through"
    else:
        assert tokens == ["2"]
        assert len(rig.effects("plain")) == 1


@MUTANT_OR_CORRECT
def test_skip_reconcile_after_restart(rig: Rig, broken: bool) -> None:
    mutant = "skip_reconcile_after_restart" if broken else None
    rig.enqueue("plain")
    snapshot = rig.target.snapshot()
    w1 = rig.start(mutant)
    rig.settle()
    w1.signal(signal.SIGTERM)
    assert w1.popen.wait(5) == 0, "SIGTERM is a clean exit"
    rig.target.restore(snapshot)
    assert rig.view().job(rig.job).delivery_state == "queued"  # type: ignore[union-attr]
    rig.start(mutant, recovery=True)
    rig.settle()
    if broken:
        assert len(rig.effects("plain")) == 2
    else:
        assert len(rig.effects("plain")) == 1
        assert [r.outcome for r in rig.view().reconciles] == ["confirmed"]


def test_restore_in_front_of_an_unqueryable_provider_goes_to_review(rig: Rig) -> None:
    rig.enqueue("unqueryable")
    snapshot = rig.target.snapshot()
    w1 = rig.start(None)
    rig.settle()
    w1.signal(signal.SIGTERM)
    w1.popen.wait(5)
    rig.target.restore(snapshot)
    rig.start(None, recovery=True)
    rig.settle()
    job = rig.view().job(rig.job)
    assert job is not None
    assert job.needs_review
    assert len(rig.effects("unqueryable")) == 1


@MUTANT_OR_CORRECT
def test_lookup_error_is_not_found(rig: Rig, broken: bool) -> None:
    rig.enqueue("plain")
    client = rig.providers["plain"].client
    client.arm(Fault("drop_after_commit", job=rig.job))
    client.arm(Fault("fail_lookup", job=rig.job, status=503))
    rig.start("lookup_error_is_not_found" if broken else None)
    rig.settle()
    outcomes = [r.outcome for r in rig.view().reconciles]
    if broken:
        assert outcomes == ["not_found"]
        assert len(rig.effects("plain")) == 2
    else:
        assert outcomes == ["unavailable", "confirmed"]
        assert len(rig.effects("plain")) == 1


@MUTANT_OR_CORRECT
def test_conflict_409_new_key(rig: Rig, broken: bool) -> None:
    prov = rig.providers["idempotent"]
    fault = prov.client.arm(Fault("hold_before_commit", job=rig.job))
    body = {"job_id": rig.job, "amount": 42, "to": "ops@example.com"}

    def earlier_delivery() -> None:
        # Another delivery of the same job already sent this key; it is still in flight.
        headers = {"Idempotency-Key": f"effect-{rig.job}"}
        httpx.post(f"{prov.url}/v1/effects", json=body, headers=headers, timeout=WAIT_S)

    ghost = threading.Thread(target=earlier_delivery, daemon=True)
    ghost.start()
    prov.client.wait_held(fault, WAIT_S)
    rig.enqueue("idempotent")
    rig.start("conflict_409_new_key" if broken else None)
    rig.wait_for("a 409", lambda: any(a.status == 409 for a in rig.writes("idempotent")))
    if broken:
        rig.wait_for("the retry", lambda: len(rig.writes("idempotent")) >= 3)
    prov.client.release(fault, "commit")
    ghost.join(WAIT_S)
    rig.settle()
    effects = rig.effects("idempotent")
    if broken:
        assert len({e.idempotency_key for e in effects}) == 2
        assert len(effects) == 2
    else:
        assert len(effects) == 1
        assert "confirmed" in [r.outcome for r in rig.view().reconciles]


@MUTANT_OR_CORRECT
def test_timestamp_in_payload(rig: Rig, broken: bool) -> None:
    rig.enqueue("idempotent")
    rig.providers["idempotent"].client.arm(Fault("fail_before_commit", job=rig.job))
    rig.start("timestamp_in_payload" if broken else None)
    rig.settle()
    writes = rig.writes("idempotent")
    assert len(writes) == 2
    fingerprints = {a.fingerprint for a in writes}
    assert len(fingerprints) == (2 if broken else 1)
    assert len(rig.effects("idempotent")) == 1


@MUTANT_OR_CORRECT
def test_uncapped_retries(rig: Rig, broken: bool) -> None:
    rig.enqueue("idempotent")
    rig.providers["idempotent"].client.arm(
        Fault("fail_before_commit", job=rig.job, times=MAX_ATTEMPTS + 1)
    )
    rig.start("uncapped_retries" if broken else None)
    rig.settle()
    job = rig.view().job(rig.job)
    assert job is not None
    if broken:
        assert len(rig.writes("idempotent")) == MAX_ATTEMPTS + 2
        assert job.attempts == MAX_ATTEMPTS + 2
        assert job.delivery_state == "acknowledged"
    else:
        assert len(rig.writes("idempotent")) == MAX_ATTEMPTS
        assert job.attempts == MAX_ATTEMPTS
        assert job.delivery_state == "dead_lettered"


@MUTANT_OR_CORRECT
def test_ack_before_effect(rig: Rig, broken: bool) -> None:
    mutant = "ack_before_effect" if broken else None
    rig.enqueue("idempotent")
    gate = rig.failpoints.hold("before_external_call", job=rig.job)
    w1 = rig.start(mutant)
    gate.wait()
    kill(w1)
    rig.start(mutant)
    rig.settle()
    time.sleep(2 * LEASE_TTL_S)  # give a reclaim every chance to happen
    job = rig.view().job(rig.job)
    assert job is not None
    assert job.delivery_state == "acknowledged"
    assert len(rig.effects("idempotent")) == (0 if broken else 1)
