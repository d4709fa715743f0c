"""A finding as a pytest regression test the user commits.

The exported file holds the shrunk schedule as JSON and plays it through the pytest
plugin's ``crashpoint`` fixture (a custom trial of the session's target, judged by the
same oracle): it fails while the bug is there and passes once the worker is fixed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from harness.contract.errors import ConfigError, CrashpointError
from harness.drivers.scheduled import Player
from harness.scenario_api import ScenarioTrial, ScenarioVerdict
from harness.schedule import Schedule


def play_in(
    crashpoint: ScenarioTrial, schedule: Schedule, *, mutant: str | None = None
) -> ScenarioVerdict:
    """Play ``schedule`` on the fixture's started trial and judge it; ``mutant`` plants
    that bug in the reference worker (an exported test reads it from CRASHPOINT_MUTANT)."""
    trial = crashpoint.trial
    if trial.cell.provider != schedule.provider:
        raise ConfigError(
            f"the schedule needs a {schedule.provider} provider and the trial has "
            f"{trial.cell.provider}; mark the test @pytest.mark.crashpoint"
            f"(provider={schedule.provider!r})"
        )
    if mutant:
        trial.cell = dataclasses.replace(trial.cell, mutant=mutant)
    try:
        Player(trial, schedule).play()
    except CrashpointError as exc:
        crashpoint.error = crashpoint.error or str(exc)
    return crashpoint.check()


_TEMPLATE = '''"""Regression test exported by `crashpoint explore`: {title}.

Found {found}; the schedule broke {invariants} (reproduced {rate}).
It fails while the bug is there and passes once the worker is fixed:

    pytest {filename} -p no:cacheprovider --crashpoint-config {config}{mutant_hint}
"""

import os

import pytest

from harness.exploration.regression import play_in
from harness.schedule import loads

SCHEDULE = loads(
    """
{schedule}""",
    source=__file__,
)


@pytest.mark.crashpoint(provider={provider!r}{network})
def {test_name}(crashpoint):
    """{describe}"""
    verdict = play_in(crashpoint, SCHEDULE, mutant=os.environ.get("CRASHPOINT_MUTANT") or None)
    verdict.assert_held()
'''


def regression_test(
    schedule: Schedule,
    *,
    filename: str,
    invariants: Sequence[str],
    rate: str,
    seed: int,
    config: str = "reference",
) -> str:
    """The text of a pytest file that replays ``schedule`` as a regression test."""
    against = schedule.target + (f" with mutant {schedule.mutant}" if schedule.mutant else "")
    stem = re.sub(r"\W+", "_", filename.removesuffix(".py")).strip("_")
    name = stem if stem.startswith("test_") else f"test_{stem}"
    hint = (
        f"\n    (the bug: CRASHPOINT_MUTANT={schedule.mutant} in front)" if schedule.mutant else ""
    )
    network = ", network=True" if any(f.action == "toxic" for f in schedule.faults) else ""
    return _TEMPLATE.format(
        title=schedule.describe().replace('"', "'"),
        found=f"against {against} with --seed {seed}",
        invariants=", ".join(invariants) or "an invariant",
        rate=rate,
        filename=filename,
        config=config,
        mutant_hint=hint,
        schedule=schedule.dumps().replace("\\", "\\\\"),
        provider=schedule.provider,
        network=network,
        test_name=name,
        describe=schedule.describe().replace('"', "'"),
    )
