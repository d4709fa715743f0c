"""Writing a finished run's record where the user asked, or, when that fails (a full
disk, a read-only mount), somewhere it can still be read: the trials already ran, and
losing their record to a disk error would throw away the only evidence of what they did.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.commands.console import console
from harness.contract.errors import InfrastructureError
from reports import write_run


def keep_run(doc: Mapping[str, Any], out: Path) -> tuple[Path, bool]:
    """Write ``doc`` and its reports to ``out``; ``(where, True)`` on success.

    On a disk error the record goes to a fresh temp directory instead, one line says
    where, and ``(that directory, False)`` tells the caller to exit as an
    infrastructure failure (the run itself was not at fault, its outputs were).
    """
    try:
        write_run(doc, out)
        return out, True
    except OSError as exc:
        why = exc.strerror or str(exc)
    fallback = Path(tempfile.mkdtemp(prefix="crashpoint-results-"))
    try:
        write_run(doc, fallback)
    except OSError as again:
        raise InfrastructureError(
            f"cannot write the results to {out} ({why}) nor to {fallback} "
            f"({again.strerror or again}); free some disk space and run again"
        ) from None
    console.print(
        f"crashpoint: cannot write the results to {out} ({why}); "
        f"kept them in {fallback / 'results.json'} instead",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return fallback, False
