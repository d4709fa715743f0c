"""The run's verdict in one word: the Markdown summary's icon, the HTML logo and favicon.

One judgement read by every renderer, so the summary cannot say ✅ while the page shows
a red cross beside the logo (or the other way round).
"""

from __future__ import annotations

from typing import Literal

from reports.model import SEVERITY, CellStatus, Results

#: ``empty``: no trials ran, so nothing was proven (never shown as held).
RunStatus = CellStatus | Literal["empty"]


def run_status(results: Results) -> RunStatus:
    """The worst status of the run's trials; ``violated`` when a selftest mutant survived.

    In a selftest a mutant's violation is a kill, the outcome wanted: only the correct
    worker's trials count, and a surviving mutant makes the run violated.
    """
    km = results.kill_matrix
    own = [t for t in results.trials if km is None or t.mutant is None]
    if not own:
        return "empty"
    if km is not None and km.killed < len(km.mutants):
        return "violated"
    # Skipped trials leave the headline be: a run without Toxiproxy is no worse for it
    # (--strict makes them fail the run instead).
    statuses: set[CellStatus] = {t.status for t in own} - {"skipped"}
    worst: CellStatus = max(statuses, key=SEVERITY.__getitem__, default="held")
    return worst
