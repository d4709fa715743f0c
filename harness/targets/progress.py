"""What a command target's harness sees of its jobs between status reads: new arrivals
at the trial's providers, and the job-end events its workers send through the failpoint
socket (``job_end``, docs/failpoints.md).

A job counts as ended when its worker announced its end after everything that could
reopen it: its last enqueue, its last arrival at a provider (by the provider's own
clock, so an arrival read late is still placed before an end sent after it), a restore
of the state directory. A worker that sends no job-end events leaves every job open
here, and the status command decides, as it always did.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from harness.observe import ProviderLog

#: Where the job-end events come from: ``(job, when)`` pairs, on the monotonic clock.
EndSource = Callable[[], Sequence[tuple[str, float]]]


class Activity:
    """New arrivals at the trial's providers, which jobs have reached one, and when."""

    def __init__(self) -> None:
        self.providers: list[ProviderLog] = []
        self._last: list[int] = []
        self.touched: set[str] = set()
        #: Each job's latest arrival, by the provider's monotonic clock.
        self.last_at: dict[str, float] = {}

    def attach(self, providers: Sequence[ProviderLog]) -> None:
        self.providers = list(providers)
        self._last = [0] * len(self.providers)

    def arrived(self) -> bool:
        """Whether any request reached a provider since the last call."""
        any_new = False
        for i, provider in enumerate(self.providers):
            new = provider.arrivals(after=self._last[i])
            if new:
                any_new = True
                self._last[i] = max(a.id for a in new)
                for a in new:
                    if a.job_id is not None:
                        self.touched.add(a.job_id)
                        self.last_at[a.job_id] = max(self.last_at.get(a.job_id, 0.0), a.t_mono)
        return any_new


class JobEnds:
    """The workers' job-end events, against what reopens a job."""

    def __init__(self, activity: Activity) -> None:
        self._activity = activity
        self._source: EndSource | None = None
        #: When each job was last enqueued, and when the state directory was last restored.
        self._enqueued_at: dict[str, float] = {}
        self._restored_at = 0.0

    def hear(self, source: EndSource) -> None:
        self._source = source

    def enqueued(self, job: str) -> None:
        self._enqueued_at[job] = time.monotonic()

    def restored(self) -> None:
        self._restored_at = time.monotonic()

    def heard_any(self) -> bool:
        """Whether the workers send job-end events at all (one has arrived)."""
        return self._source is not None and bool(self._source())

    def ended(self, jobs: Iterable[str]) -> set[str]:
        """The jobs in ``jobs`` whose end was announced after they were last reopened."""
        if self._source is None:
            return set()
        latest: dict[str, float] = {}
        for job, t in self._source():
            latest[job] = max(latest.get(job, 0.0), t)
        out = set()
        for job in jobs:
            reopened = max(
                self._enqueued_at.get(job, 0.0),
                self._activity.last_at.get(job, 0.0),
                self._restored_at,
            )
            if latest.get(job, -1.0) > reopened:
                out.add(job)
        return out
