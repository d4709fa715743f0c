"""Whether libfaketime can reach a worker's clock at all.

``LD_PRELOAD`` is honoured by the dynamic loader, so it reaches a program that has one
(an ELF file with a ``PT_INTERP`` header: Python, Node, the JVM, anything linked against
libc) and never a statically linked one, whose clock calls go straight to the kernel.
Nor does it step a Go program's clock even when the program is dynamically linked (cgo):
Go's runtime reads the time through the vDSO, never through libc, so the library is
loaded and bypassed. A clock-skew cell on such a worker would step a clock nobody reads
and then hold: a pass that proved nothing. So the program is looked at before the run
(:func:`out_of_reach`: the cell is then not applicable, with the reason), and the
process at the failpoint is looked at during the trial (:func:`loaded_in`), which
catches what the first look cannot see (a shell that starts a static binary, an image
without the library).
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Sequence
from pathlib import Path

_ELF_MAGIC = b"\x7fELF"
#: The header of the build information every Go binary carries (``debug/buildinfo``).
_GO_BUILDINFO = b"\xff Go buildinf:"
_PT_INTERP = 3
#: How many ``#!`` interpreters are followed (a script run by a script run by ...).
_MAX_HOPS = 4


def out_of_reach(argv: Sequence[str], base_dir: Path) -> str | None:
    """Why ``LD_PRELOAD`` can never reach the program ``argv`` starts (resolved as the
    target's commands are: beside its config file, else on ``PATH``), or None when it
    can or when the program cannot be found here (the trial's own look then decides)."""
    program = _resolve(argv[0], base_dir) if argv else None
    for _ in range(_MAX_HOPS):
        if program is None:
            return None
        try:
            with program.open("rb") as f:
                head = f.read(4096)
        except OSError:
            return None
        if head.startswith(b"#!"):
            program = _interpreter(head, base_dir)
            continue
        if head.startswith(_ELF_MAGIC):
            return _elf_out_of_reach(program)
        return None
    return None


def loaded_in(pid: int) -> bool | None:
    """Whether libfaketime is mapped into process ``pid``; None when its memory map
    cannot be read (it exited, or /proc is not ours)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return "libfaketime" in maps


def _resolve(name: str, base_dir: Path) -> Path | None:
    beside = base_dir / name
    if "/" in name or beside.is_file():
        return beside if beside.is_file() else None
    found = shutil.which(name)
    return Path(found) if found else None


def _interpreter(head: bytes, base_dir: Path) -> Path | None:
    """The program a ``#!`` line runs (``/usr/bin/env node`` runs ``node``)."""
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
        return _resolve(words[0], base_dir) if words else None
    return _resolve(words[0], base_dir)


def _elf_out_of_reach(program: Path) -> str | None:
    try:
        data = program.read_bytes()
    except OSError:
        return None
    if _GO_BUILDINFO in data:
        return (
            f"{program} is a Go program: it reads its clock through the vDSO, never libc, "
            "so libfaketime cannot step it"
        )
    if not _has_interp(data):
        return (
            f"{program} is statically linked: LD_PRELOAD never loads libfaketime into "
            "it, so its wall clock cannot be stepped"
        )
    return None


def _has_interp(data: bytes) -> bool:
    """Whether the ELF image has a ``PT_INTERP`` program header (a dynamic loader)."""
    if len(data) < 0x40:
        return True
    wide = data[4] == 2
    order = "<" if data[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 4 > len(data):
            break
        (p_type,) = struct.unpack_from(order + "I", data, at)
        if p_type == _PT_INTERP:
            return True
    return False
