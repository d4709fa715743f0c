"""Properties over random concurrent request sequences against real providers."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_providers import ProviderProcess, start_provider

pytestmark = pytest.mark.process

THREADS = 6
PROPERTY = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_examples = itertools.count()

#: One request: (job index, payload variant). Few jobs and variants, so keys collide often.
requests = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1)), min_size=1, max_size=14)


@pytest.fixture(scope="module")
def idempotent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    p = start_provider("idempotent", state_path=tmp_path_factory.mktemp("idem") / "s.db")
    yield p
    p.close()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProviderProcess]:
    p = start_provider("plain", state_path=tmp_path_factory.mktemp("plain") / "s.db")
    yield p
    p.close()


@pytest.fixture(scope="module")
def http(idempotent: ProviderProcess) -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0, limits=httpx.Limits(max_connections=THREADS)) as c:
        yield c


@PROPERTY
@given(requests)
def test_idempotent_one_effect_per_key_and_replays_are_identical(
    idempotent: ProviderProcess, http: httpx.Client, reqs: list[tuple[int, int]]
) -> None:
    run = f"e{next(_examples)}"  # the provider is shared: each example uses fresh keys

    def send(req: tuple[int, int]) -> tuple[str, int, httpx.Response]:
        job, variant = req
        key = f"{run}-k{job}"
        body = {"job_id": f"{run}-j{job}", "variant": variant}
        r = http.post(f"{idempotent.url}/v1/effects", json=body, headers={"Idempotency-Key": key})
        return key, variant, r

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(send, reqs))

    effects = defaultdict(list)
    for e in idempotent.client.effects():
        if e.idempotency_key and e.idempotency_key.startswith(f"{run}-"):
            effects[e.idempotency_key].append(e)
    by_key = defaultdict(list)
    for key, variant, r in results:
        by_key[key].append((variant, r))
    for key, answers in by_key.items():
        assert len(effects[key]) <= 1, f"key {key} committed {len(effects[key])} effects"
        created = [r for _, r in answers if r.status_code == 201]
        assert {r.status_code for _, r in answers} <= {201, 409, 422}
        # The first request of a key always executes, so the key committed exactly once.
        assert len(effects[key]) == 1
        assert len({r.content for r in created}) <= 1, "replays differ from the first response"
        assert sum(r.headers.get("Idempotent-Replayed") != "true" for r in created) <= 1
        winner = effects[key][0]
        for variant, r in answers:
            body = {"job_id": f"{run}-j{key.rsplit('k', 1)[1]}", "variant": variant}
            same_payload = _fp(body) == winner.fingerprint
            if r.status_code == 422:
                assert not same_payload
            else:
                assert same_payload or r.status_code == 409


@PROPERTY
@given(requests)
def test_plain_commits_one_effect_per_post(
    plain: ProviderProcess, http: httpx.Client, reqs: list[tuple[int, int]]
) -> None:
    run = f"p{next(_examples)}"

    def send(n_req: tuple[int, tuple[int, int]]) -> httpx.Response:
        n, (job, variant) = n_req
        body = {"job_id": f"{run}-j{job}", "variant": variant, "client_marker": f"{run}-m{n}"}
        return http.post(f"{plain.url}/v1/sends", json=body)

    with ThreadPoolExecutor(THREADS) as pool:
        responses = list(pool.map(send, enumerate(reqs)))

    assert [r.status_code for r in responses] == [201] * len(reqs)
    mine = [e for e in plain.client.effects() if (e.job_id or "").startswith(f"{run}-")]
    assert len(mine) == len(reqs)
    assert sorted(e.client_marker or "" for e in mine) == sorted(
        f"{run}-m{n}" for n in range(len(reqs))
    )


def _fp(body: dict[str, object]) -> str:
    from fake_providers.fingerprint import fingerprint

    return fingerprint(body, kind="idempotent")
