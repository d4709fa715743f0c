"""Did the run's PostgreSQL stay up under a trial?

A PostgreSQL restart cuts every connection, the workers' and the harness's: the workers
then wait out leases that nobody renews, and what the trial saw is the harness's doing,
not the worker's. The server's start time (``pg_postmaster_start_time()``) is read as the
trial opens and again as it is judged; a change, or a server that does not answer, makes
the trial inconclusive naming PostgreSQL, as a Toxiproxy server that died does.
"""

from __future__ import annotations

from datetime import datetime

from harness.probes import first_line

#: Short: the reading is taken twice per trial, and a restarting server answers at once
#: with a refusal rather than hanging.
CONNECT_TIMEOUT_S = 2


def started_at(dsn: str) -> datetime:
    """When the PostgreSQL server at ``dsn`` last started; raises when it does not answer."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None, "pg_postmaster_start_time() always returns a row"
    started: datetime = row[0]
    return started


class LedgerServerWatch:
    """The ledger server's start time as a trial opened; :meth:`failure` compares."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.started: datetime | None = None
        self.unreachable: str | None = None
        try:
            self.started = started_at(dsn)
        except Exception as exc:  # psycopg.Error, OSError: the server is not answering
            self.unreachable = first_line(exc)

    def failure(self) -> str | None:
        """Why the trial's ledger server failed under it, or None when it stayed up."""
        if self.unreachable is not None:
            return f"PostgreSQL did not answer as the trial began ({self.unreachable})"
        try:
            now = started_at(self.dsn)
        except Exception as exc:
            return f"PostgreSQL stopped answering mid-trial ({first_line(exc)})"
        if now != self.started:
            return f"PostgreSQL restarted mid-trial (up again at {now:%H:%M:%S})"
        return None
