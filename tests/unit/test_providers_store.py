"""The idempotency-key state machine and the effect log, against the store alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_providers.store import ArrivalIn, Store


class Clock:
    """A wall clock the test moves by hand, so TTLs are tested without sleeping."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> Iterator[Store]:
    s = Store(tmp_path / "p.db", provider="billing", key_ttl_s=60.0, wall=clock)
    yield s
    s.close()


def _commit(store: Store, key: str | None, job: str = "j-1", fp: str = "fp") -> int:
    arrival = store.record_arrival(ArrivalIn(kind="write", method="POST", path="/v1/effects"))
    effect_id, _, _ = store.commit_effect(
        arrival_id=arrival,
        job_id=job,
        fingerprint=fp,
        key=key,
        respond=lambda e: (201, f'{{"id":{e["id"]}}}'.encode()),
    )
    return effect_id


def test_new_key_is_reserved_in_flight(store: Store) -> None:
    assert store.reserve_key("k", "fp").outcome == "new"
    state = store.key_state("k")
    assert state is not None
    assert state.state == "in_flight"
    assert store.reserve_key("k", "fp").outcome == "in_flight"


def test_completed_key_replays_the_stored_bytes(store: Store) -> None:
    store.reserve_key("k", "fp")
    effect_id = _commit(store, "k")
    decision = store.reserve_key("k", "fp")
    assert decision.outcome == "replay"
    assert decision.status == 201
    assert decision.body == f'{{"id":{effect_id}}}'.encode()
    assert len(store.effects()) == 1


def test_same_key_different_payload_is_a_mismatch(store: Store) -> None:
    store.reserve_key("k", "fp")
    assert store.reserve_key("k", "other").outcome == "mismatch"
    _commit(store, "k")
    assert store.reserve_key("k", "other").outcome == "mismatch"


def test_stored_error_is_replayed(store: Store) -> None:
    store.reserve_key("k", "fp")
    store.complete_key("k", 422, b'{"status":422}')
    decision = store.reserve_key("k", "fp")
    assert (decision.outcome, decision.status, decision.body) == ("replay", 422, b'{"status":422}')


def test_key_expires_after_ttl(store: Store, clock: Clock) -> None:
    store.reserve_key("k", "fp")
    _commit(store, "k")
    clock.now += 59.9
    assert store.reserve_key("k", "fp").outcome == "replay"
    clock.now += 0.1
    assert store.key_state("k") is None
    # After expiry the key is new again, even with a different payload.
    assert store.reserve_key("k", "other").outcome == "new"


def test_released_key_is_new_again(store: Store) -> None:
    store.reserve_key("k", "fp")
    store.release_key("k")
    assert store.key_state("k") is None
    assert store.reserve_key("k", "fp").outcome == "new"


def test_release_never_forgets_a_completed_key(store: Store) -> None:
    store.reserve_key("k", "fp")
    _commit(store, "k")
    store.release_key("k")
    assert store.reserve_key("k", "fp").outcome == "replay"


def test_reopening_frees_keys_left_in_flight(tmp_path: Path, clock: Clock) -> None:
    first = Store(tmp_path / "p.db", provider="billing", wall=clock)
    first.reserve_key("held", "fp")
    first.reserve_key("done", "fp")
    _commit(first, "done")
    first.close()
    again = Store(tmp_path / "p.db", provider="billing", wall=clock)
    assert again.reserve_key("held", "fp").outcome == "new"
    assert again.reserve_key("done", "fp").outcome == "replay"
    again.close()


def test_commit_marks_the_arrival(store: Store) -> None:
    effect_id = _commit(store, None, job="j-7")
    [arrival] = store.arrivals()
    assert arrival["committed"] is True
    assert arrival["effect_id"] == effect_id
    [effect] = store.effects()
    assert effect["job_id"] == "j-7"
    assert effect["arrival_id"] == arrival["id"]


def test_failed_response_builder_rolls_the_commit_back(store: Store) -> None:
    store.reserve_key("k", "fp")
    arrival = store.record_arrival(ArrivalIn(kind="write", method="POST", path="/v1/effects"))

    def broken(effect: dict[str, object]) -> tuple[int, bytes]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        store.commit_effect(
            arrival_id=arrival, job_id="j", fingerprint="fp", key="k", respond=broken
        )
    assert store.effects() == []
    assert store.arrivals()[0]["committed"] is False


def test_effects_by_marker(store: Store) -> None:
    arrival = store.record_arrival(ArrivalIn(kind="write", method="POST", path="/v1/sends"))
    for marker in ("m-1", "m-2", "m-1"):
        store.commit_effect(
            arrival_id=arrival,
            job_id="j",
            fingerprint="fp",
            marker=marker,
            respond=lambda e: (201, b"{}"),
        )
    assert [e["client_marker"] for e in store.effects(marker="m-1")] == ["m-1", "m-1"]
    assert store.effects(marker="none") == []


def test_lookup_job_comes_from_the_first_write(store: Store) -> None:
    store.record_arrival(
        ArrivalIn(kind="write", method="POST", path="/v1/sends", job_id="j-3", client_marker="m")
    )
    assert store.job_of("client_marker", "m") == "j-3"
    assert store.job_of("client_marker", "other") is None
    with pytest.raises(ValueError, match="column="):
        store.job_of("job_id; DROP TABLE effects", "x")


def test_effect_log_is_wal_and_full_sync_after_bookkeeping(store: Store) -> None:
    store.record_arrival(ArrivalIn(kind="write", method="POST", path="/v1/effects"))
    store.reserve_key("k", "fp")
    db = store._db  # the durability settings are the point of this test
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
