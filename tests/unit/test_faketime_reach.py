"""Whether libfaketime can reach a worker's clock: read from the program's own bytes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from harness.faketime_reach import loaded_in, out_of_reach

PT_LOAD, PT_INTERP = 1, 3


def elf(path: Path, *, interp: bool, go: bool = False, wide: bool = True) -> Path:
    """A minimal ELF executable whose program headers are PT_LOAD (and PT_INTERP)."""
    types = [PT_LOAD, PT_INTERP] if interp else [PT_LOAD]
    if wide:
        header = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
        header += struct.pack(
            "<HHIQQQIHHHHHH", 2, 62, 1, 0, 0x40, 0, 0, 64, 56, len(types), 0, 0, 0
        )
        entries = b"".join(struct.pack("<II", t, 0) + bytes(48) for t in types)
    else:
        header = b"\x7fELF" + bytes([1, 1, 1]) + bytes(9)
        header += struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0, 0x34, 0, 0, 52, 32, len(types), 0, 0, 0)
        entries = b"".join(struct.pack("<I", t) + bytes(28) for t in types)
    path.write_bytes(header + entries + (b"\xff Go buildinf:" + bytes(18) if go else b""))
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("wide", [True, False], ids=["64-bit", "32-bit"])
def test_a_static_program_is_out_of_reach_and_a_dynamic_one_is_not(
    tmp_path: Path, wide: bool
) -> None:
    static = elf(tmp_path / "static", interp=False, wide=wide)
    dynamic = elf(tmp_path / "dynamic", interp=True, wide=wide)
    assert out_of_reach([str(static)], tmp_path) == (
        f"{static} is statically linked: LD_PRELOAD never loads libfaketime into it, so its "
        "wall clock cannot be stepped"
    )
    assert out_of_reach([str(dynamic)], tmp_path) is None


def test_a_go_program_is_out_of_reach_even_when_dynamically_linked(tmp_path: Path) -> None:
    go = elf(tmp_path / "server", interp=True, go=True)
    assert (out_of_reach([str(go)], tmp_path) or "").startswith(f"{go} is a Go program")


def test_a_script_is_judged_by_its_interpreter_found_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    elf(bin_dir / "staticrun", interp=False)
    elf(bin_dir / "dynrun", interp=True)
    monkeypatch.setenv("PATH", str(bin_dir))
    (tmp_path / "worker.sh").write_text("#!/usr/bin/env -S staticrun -q\necho\n")
    (tmp_path / "ok.sh").write_text(f"#!{bin_dir / 'dynrun'}\necho\n")
    # Relative names resolve beside the config file, as the target's commands do.
    assert "staticrun is statically linked" in (out_of_reach(["worker.sh"], tmp_path) or "")
    assert out_of_reach(["ok.sh"], tmp_path) is None
    assert "staticrun is statically linked" in (out_of_reach(["staticrun", "x"], tmp_path) or "")


def test_a_program_that_cannot_be_found_is_left_to_the_trial(tmp_path: Path) -> None:
    assert out_of_reach(["no-such-program-here"], tmp_path) is None
    assert out_of_reach([], tmp_path) is None
    (tmp_path / "data").write_text("not a program")
    assert out_of_reach(["./data"], tmp_path) is None


def test_the_look_at_a_process_reads_its_memory_map() -> None:
    # This test process never loads libfaketime; a pid that is gone has no map at all.
    assert loaded_in(os.getpid()) is False
    assert loaded_in(2**22 + 1) is None
