"""The state directory of a trial that did not hold, kept for whoever debugs it
(``crashpoint run --keep-state``): the worker's ledger or queue, its files, the payloads
the harness handed it, as they were when the trial ended."""

from __future__ import annotations

import shutil
import stat
import sys
from pathlib import Path


def keep_copy(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` (created, parents too), regular files, directories and
    symbolic links only: the failpoint socket and any FIFO mean nothing once the trial is
    over and cannot be copied. A copy that fails says so on stderr; the trial's verdict
    stands either way."""

    def special(directory: str, names: list[str]) -> list[str]:
        out = []
        for name in names:
            mode = Path(directory, name).lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                out.append(name)
        return out

    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dest, symlinks=True, ignore=special, dirs_exist_ok=True)
    except (OSError, shutil.Error) as exc:
        print(f"crashpoint: could not keep the state of {src} in {dest}: {exc}", file=sys.stderr)
