"""The Markdown CI summary: totals, violated cells with replay, kill matrix, escaping."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.contract.vocabulary import Verdict
from reports import Results, ViolationRow, load_results, markdown_summary
from reports.markdown import md_code, md_text

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"
VIOLATED = (
    "crash_after_external_success.after_external_call.plain.SIGKILL.sqlite.process"
    "@20261130T032000-8b1d"
)


def test_summary_of_a_run_with_violations() -> None:
    text = markdown_summary(load_results(FIXTURES / "run_small.json"))
    assert text.startswith("## ❌ crashpoint: billing\\-agent")
    assert "| 18 | 12 | 3 | 1 | 2 | 1 | 10/17 cells held (59%) |" in text
    assert (
        "| `crash_after_external_success.after_external_call.plain.SIGKILL.sqlite.process"
        "@20261130T032000-8b1d` "
        "| `no_duplicate_effect` (1 job: `j-0001`); `no_retry_while_unknown` (1 job: `j-0001`) "
        "| `crashpoint run -c crashpoint.toml --scenario crash_after_external_success "
        "--point after_external_call --provider plain --signal SIGKILL --ledger sqlite "
        "--backend process --seed 1235` |"
    ) in text
    assert "### Not proven" in text
    assert "Kill matrix" not in text
    # Worker text outside code spans must not become HTML in a CI page.
    assert "<script" not in text.replace("`", "")


def test_summary_of_a_selftest_has_the_kill_matrix() -> None:
    text = markdown_summary(load_results(FIXTURES / "selftest.json"))
    assert "### Kill matrix: 2 of 3 mutants killed" in text
    assert "| `ack_before_effect` | ❌ survived | `nothing_lost` | — |" in text
    assert "Correct worker: 3 trials, 0 violations." in text
    assert "--full" not in text, "a full selftest says nothing of skipped cells"


def test_summary_of_a_selftest_that_stopped_mutants_says_so() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    fast = dataclasses.replace(
        selftest, kill_matrix=dataclasses.replace(selftest.kill_matrix, mode="until_killed")
    )
    assert "`crashpoint selftest --full` runs them all" in markdown_summary(fast)


def test_a_selftest_is_headed_by_its_correct_worker_and_its_survivors() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    assert selftest.kill_matrix is not None
    text = markdown_summary(selftest)
    # The mutants' violations are kills: not in the coverage, not listed as violated cells.
    assert "| 3/3 of the correct worker's cells held (100%) |" in text
    assert "### Violated cells" not in text
    assert text.startswith("## ❌"), "ack_before_effect survived"
    all_killed = dataclasses.replace(
        selftest.kill_matrix,
        mutants=tuple(dataclasses.replace(m, killed=True) for m in selftest.kill_matrix.mutants),
    )
    assert markdown_summary(dataclasses.replace(selftest, kill_matrix=all_killed)).startswith(
        "## ✅"
    )


def test_a_selftest_whose_correct_worker_violated_lists_that_trial() -> None:
    selftest = load_results(FIXTURES / "selftest.json")
    correct = next(t for t in selftest.trials if t.mutant is None)
    broken = dataclasses.replace(correct, verdict=Verdict.VIOLATED)
    trials = tuple(broken if t is correct else t for t in selftest.trials)
    text = markdown_summary(dataclasses.replace(selftest, trials=trials))
    assert text.startswith("## ❌")
    assert "| 2/3 of the correct worker's cells held (67%) |" in text
    violated = text.split("### Violated cells", 1)[1].split("###", 1)[0]
    assert f"| {md_code(broken.key)} |" in violated
    assert "fresh_key_per_attempt." not in violated


def test_md_escaping() -> None:
    assert md_text("a|b <i>x</i> *y*") == "a\\|b &lt;i&gt;x&lt;/i&gt; \\*y\\*"
    assert md_text("line\nbreak") == "line break"
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x") == "`` `x ``"
    assert md_code("p|q") == "`p\\|q`"


def test_summary_of_no_trials_does_not_claim_success() -> None:
    empty = dataclasses.replace(load_results(FIXTURES / "run_small.json"), trials=())
    text = markdown_summary(empty)
    assert "✅" not in text
    assert "No trials ran" in text


def _with_violations(jobs_by_invariant: dict[str, list[str | None]]) -> Results:
    results = load_results(FIXTURES / "run_small.json")
    trial = results.trial(VIOLATED)
    violations = tuple(
        ViolationRow(invariant=inv, job=job)
        for inv, jobs in jobs_by_invariant.items()
        for job in jobs
    )
    changed = dataclasses.replace(trial, violations=violations)
    return dataclasses.replace(
        results, trials=tuple(changed if t is trial else t for t in results.trials)
    )


def test_an_invariant_broken_for_several_jobs_is_named_once() -> None:
    results = _with_violations(
        {"no_duplicate_effect": ["j-0001", "j-0002", "j-0003"], "fenced_writes": ["j-0002"]}
    )
    row = next(line for line in markdown_summary(results).splitlines() if VIOLATED in line)
    assert row.count("no\\_duplicate\\_effect") + row.count("`no_duplicate_effect`") == 1
    assert "`no_duplicate_effect` (3 jobs: `j-0001`, `j-0002`, `j-0003`)" in row
    assert "`fenced_writes` (1 job: `j-0002`)" in row


def test_many_jobs_are_counted_not_all_listed() -> None:
    jobs: list[str | None] = [f"j-{i:04d}" for i in range(1, 9)]
    row = next(
        line
        for line in markdown_summary(_with_violations({"nothing_lost": jobs})).splitlines()
        if VIOLATED in line
    )
    assert "`nothing_lost` (8 jobs: `j-0001`, `j-0002`, `j-0003`, `j-0004`, `j-0005`, " in row
    assert "and 3 more)" in row
    assert "j-0006" not in row
    no_job = _with_violations({"bounded_retries": [None, None]})
    line = next(x for x in markdown_summary(no_job).splitlines() if VIOLATED in x)
    assert line.count("`bounded_retries`") == 1
