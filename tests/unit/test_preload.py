"""``[target.preload]`` in crashpoint.toml, and the rule that decides which worker starts
a fork from the run's zygote can stand in for (harness/backends/zygote.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_target_config import GOOD, error_line, write

from harness.backends.zygote import cold_reason
from harness.targets.config import load_config

PY = "/usr/bin/python3"


def _with(table: str) -> str:
    return GOOD.replace("[target.ledger]", table + "[target.ledger]")


def test_preloaded_modules_are_read_in_order_without_repeats(tmp_path: Path) -> None:
    text = _with('[target.preload]\nmodules = ["mcp", "httpx2", "mcp", "email.mime"]\n')
    assert load_config(write(tmp_path, text)).preload == ("mcp", "httpx2", "email.mime")
    assert load_config(write(tmp_path, GOOD)).preload == ()


@pytest.mark.parametrize(
    ("table", "says", "fix"),
    [
        ('preload = ["mcp"]\n', "target.preload must be a table", "write [target.preload]"),
        ("[target.preload]\n", "target.preload.modules is missing", "add modules = "),
        ('[target.preload]\nmodule = ["mcp"]\n', "module is not a known key", "allows modules"),
        ("[target.preload]\nmodules = []\n", "must be a non-empty list", "write modules = "),
        ('[target.preload]\nmodules = "mcp"\n', "must be a non-empty list", "write modules = "),
        ('[target.preload]\nmodules = ["mcp", 1]\n', "must be a non-empty list", "modules = "),
        (
            '[target.preload]\nmodules = ["mcp-sdk"]\n',
            '"mcp-sdk", which is not a module',
            "no .py",
        ),
        ('[target.preload]\nmodules = ["./lib/x"]\n', "is not a module name", "as import spells"),
    ],
)
def test_each_preload_mistake_is_one_line(tmp_path: Path, table: str, says: str, fix: str) -> None:
    text = (
        _with(table) if table.startswith("[") else GOOD.replace("[target]\n", f"[target]\n{table}")
    )
    message = error_line(write(tmp_path, text))
    assert str(tmp_path / "crashpoint.toml") in message
    assert says in message
    assert fix in message.split("; ")[-1]


def _reason(argv: list[str], env: dict[str, str] | None = None, **zygote: str) -> str | None:
    base = {"PATH": os.path.dirname(PY), "HOME": "/root"}
    return cold_reason(
        argv,
        {**base, **(env or {})},
        cwd=Path("/srv"),
        interpreter=PY,
        zygote_env={**base, **zygote},
    )


def test_a_script_or_a_module_of_the_same_interpreter_is_forked() -> None:
    assert _reason([PY, "worker.py", "--bug", "x"]) is None
    assert _reason(["python3", "/abs/worker.py"]) is None  # found on the worker's PATH
    assert _reason([PY, "-m", "mcpagent.worker", "-v"]) is None
    # Its own variables may differ: only what the interpreter reads at its start may not.
    assert _reason([PY, "w.py"], {"CRASHPOINT_WORKER_ID": "w2", "HOME": "/tmp"}) is None


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        ([PY], {}, "is not `python script.py`"),
        (["node", "worker.js"], {}, "'node' is not the preloaded interpreter"),
        (["/opt/venv/bin/python3", "w.py"], {}, "is not the preloaded interpreter"),
        ([PY, "-u", "w.py"], {}, "interpreter option '-u'"),
        ([PY, "-c", "print(1)"], {}, "interpreter option '-c'"),
        ([PY, "-X", "importtime", "w.py"], {}, "interpreter option '-X'"),
        ([PY, "-mfoo"], {}, "interpreter option '-mfoo'"),
        ([PY, "-m"], {}, "ends at -m"),
        ([PY, "w.py"], {"PYTHONPATH": "/lib"}, "PYTHONPATH differs"),
        ([PY, "w.py"], {"PYTHONHASHSEED": "0"}, "PYTHONHASHSEED differs"),
        # A clock cell: libfaketime is loaded when the interpreter starts, not at a fork.
        ([PY, "w.py"], {"LD_PRELOAD": "/usr/lib/faketime.so"}, "LD_PRELOAD differs"),
        (
            [PY, "w.py"],
            {"LD_PRELOAD": "/f.so", "FAKETIME_NO_CACHE": "1"},
            "FAKETIME_NO_CACHE, LD_PRELOAD differ from the zygote's",
        ),
        ([PY, "w.py"], {"FAKETIME_TIMESTAMP_FILE": "/tmp/t"}, "FAKETIME_TIMESTAMP_FILE"),
    ],
)
def test_every_other_start_is_cold_and_says_why(
    argv: list[str], env: dict[str, str], says: str
) -> None:
    reason = _reason(argv, env)
    assert reason is not None
    assert says in reason


def test_a_variable_the_zygote_had_and_the_worker_lacks_is_a_difference_too() -> None:
    assert (
        _reason([PY, "w.py"], PYTHONUNBUFFERED="1") == "PYTHONUNBUFFERED differs from the zygote's"
    )
