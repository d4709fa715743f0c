"""``crashpoint init``: what it guesses, what it writes, and what it never overwrites."""

from __future__ import annotations

import io
import os
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness.cli import main
from harness.cli_options import LANGS
from harness.commands.init import init_command, render
from harness.commands.init_plan import PLACEHOLDER, plan, python_client, templates
from harness.targets.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def init(directory: Path, *args: str) -> tuple[int, str]:
    """``crashpoint init ARGS`` run in ``directory``: exit code and all it printed."""
    cwd = Path.cwd()
    os.chdir(directory)
    try:
        result = CliRunner().invoke(main, ["init", *args], prog_name="crashpoint")
    finally:
        os.chdir(cwd)
    return result.exit_code, result.output


@pytest.mark.parametrize("lang", LANGS)
def test_the_written_file_is_a_valid_configuration_for_every_language(
    lang: str, tmp_path: Path
) -> None:
    code, out = init(tmp_path, "--lang", lang)
    assert code == 0, out
    config = load_config(tmp_path / "crashpoint.toml")
    assert config.providers[0].name == "billing"
    assert config.providers[0].kind == "idempotent"
    assert "{job_id}" in config.enqueue
    # Nothing in the directory says how to enqueue: a placeholder, named in the output.
    assert PLACEHOLDER.match(config.enqueue[0])
    assert f"replace {config.enqueue[0]} in target.enqueue" in " ".join(out.split())


def test_every_key_of_the_schema_is_explained(tmp_path: Path) -> None:
    text = render(plan(tmp_path, "node"))
    for key in ("name", "command", "enqueue", "workers", "lease_ttl_s", "max_attempts"):
        assert f"\n{key} = " in text or f"\n# {key} = " in text, key
    assert "# status = " in text
    assert "[target.ledger]" in text
    assert "[[providers]]" in text
    for var in (
        "CRASHPOINT_PROVIDER_BILLING_URL",
        "CRASHPOINT_STATE_DIR",
        "CRASHPOINT_WORKER_ID",
        "CRASHPOINT_FAILPOINTS",
        "CRASHPOINT_LEASE_TTL_S",
        "CRASHPOINT_MAX_ATTEMPTS",
        "CRASHPOINT_RECOVERY",
    ):
        assert var in text, var
    assert "Default: 1.0" in text


def test_guesses_come_from_the_directory(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"name": "billing-agent", "main": "src/main.js"}')
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.js").write_text("// worker\n")
    (tmp_path / "enqueue.js").write_text("// enqueue\n")
    (tmp_path / "status.js").write_text("// status\n")
    (tmp_path / "pay.js").write_text("const url = process.env.CRASHPOINT_PROVIDER_PAYMENTS_URL;\n")
    p = plan(tmp_path, "node")
    assert (p.name, p.command, p.provider) == ("billing-agent", ("node", "src/main.js"), "payments")
    assert p.enqueue == ("node", "enqueue.js", "{job_id}", "{payload_file}")
    assert p.status == ("node", "status.js", "{job_id}")
    assert p.placeholders() == []
    config = tmp_path / "crashpoint.toml"
    config.write_text(render(p))
    assert load_config(config).status == p.status


def test_an_empty_directory_gets_python_and_is_told_so(tmp_path: Path) -> None:
    # It used to stop and ask for --lang: a new user's first command, refused.
    code, out = init(tmp_path)
    assert code == 0, out
    assert out.splitlines()[0].startswith("crashpoint init: nothing here tells the worker's")
    assert "writing for python" in out
    assert (tmp_path / "crashpoint.toml").is_file()
    assert load_config(tmp_path / "crashpoint.toml").command[0].startswith("python")


def test_the_language_is_guessed_from_the_files_here(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module example.com/team/biller\n")
    init_command(tmp_path, lang=None, force=False, pyproject=False, console=_quiet())
    config = load_config(tmp_path / "crashpoint.toml")
    assert (config.name, config.command) == ("biller", ("./worker",))
    assert (tmp_path / "failpoint" / "failpoint.go").is_file()


def test_nothing_is_overwritten_without_force(tmp_path: Path) -> None:
    (tmp_path / "crashpoint.toml").write_text("# mine\n")
    code, out = init(tmp_path, "--lang", "python")
    assert code == 2
    assert out.strip().count("\n") == 0, out  # one line
    assert "already exists; pass --force" in out
    assert (tmp_path / "crashpoint.toml").read_text() == "# mine\n"
    assert not (tmp_path / "failpoint.py").exists()  # nothing half-written either
    code, out = init(tmp_path, "--lang", "python", "--force")
    assert code == 0, out
    assert "[target]" in (tmp_path / "crashpoint.toml").read_text()


def test_an_existing_client_is_not_overwritten_either(tmp_path: Path) -> None:
    (tmp_path / "failpoint.js").write_text("// mine\n")
    code, out = init(tmp_path, "--lang", "node")
    assert code == 2
    assert "failpoint.js: already exists" in out
    assert not (tmp_path / "crashpoint.toml").exists()


PYPROJECT = """\
[project]
name = "billing-worker"   # a comment that must survive
version = "1.0"

[tool.ruff]
line-length = 100
"""


def test_pyproject_gets_a_table_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "worker.py").write_text("print('hi')\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    code, out = init(tmp_path, "--pyproject")
    assert code == 0, out
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(PYPROJECT)
    config = load_config(tmp_path / "pyproject.toml")
    assert (config.name, config.command) == ("billing-worker", ("python3", "worker.py"))
    assert "-c pyproject.toml" in out
    assert not (tmp_path / "crashpoint.toml").exists()

    code, out = init(tmp_path, "--pyproject")
    assert code == 2
    assert "already has a [tool.crashpoint] table" in out
    edited = text.replace("lease_ttl_s = 1.0", "lease_ttl_s = 3.0")
    (tmp_path / "pyproject.toml").write_text(edited + "\n[tool.mypy]\nstrict = true\n")
    (tmp_path / "failpoint.py").unlink()
    code, out = init(tmp_path, "--pyproject", "--force")
    assert code == 0, out
    again = (tmp_path / "pyproject.toml").read_text()
    assert again.count("[tool.crashpoint.target]") == 1
    doc = tomllib.loads(again)
    assert doc["tool"]["mypy"] == {"strict": True}
    assert doc["tool"]["ruff"]["line-length"] == 100
    assert doc["tool"]["crashpoint"]["target"]["lease_ttl_s"] == 1.0
    assert "a comment that must survive" in again


def test_pyproject_must_exist_for_pyproject(tmp_path: Path) -> None:
    code, out = init(tmp_path, "--lang", "python", "--pyproject")
    assert code == 2
    assert "drop --pyproject" in out


def test_next_steps_name_the_commands_to_run(tmp_path: Path) -> None:
    (tmp_path / "worker.js").write_text("// worker\n")
    code, out = init(tmp_path)
    assert code == 0, out
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("crashpoint ")]
    assert commands == [
        "crashpoint check-config -c crashpoint.toml",
        "crashpoint run -c crashpoint.toml --scenario crash_before_external_call",
        "crashpoint run -c crashpoint.toml",
    ]
    assert "require('./failpoint')" in out


def test_an_es_module_package_gets_a_commonjs_client(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"type": "module"}')
    p = plan(tmp_path, "node")
    assert p.client[0] == "failpoint.cjs"
    assert "from './failpoint.cjs'" in p.usage[0]


@pytest.mark.parametrize("name", ["failpoint.js", "failpoint.go", "failpoint.sh"])
def test_the_shipped_clients_are_the_examples(name: str) -> None:
    # One source: examples/failpoint-clients/ links to what the wheel ships.
    shipped = (templates() / name).read_text(encoding="utf-8")
    example = ROOT / "examples" / "failpoint-clients" / name
    assert example.read_text(encoding="utf-8") == shipped


def test_the_python_client_runs_without_crashpoint(tmp_path: Path) -> None:
    source = python_client()
    assert "import harness" not in source
    assert "from harness" not in source
    namespace: dict[str, object] = {"__name__": "failpoint"}
    exec(compile(source, "failpoint.py", "exec"), namespace)  # noqa: S102 (our own client)
    assert namespace["FAILPOINTS"] == "CRASHPOINT_FAILPOINTS"
    failpoint = namespace["failpoint"]
    assert callable(failpoint)
    if not os.environ.get("CRASHPOINT_FAILPOINTS"):
        assert failpoint("after_claim", "j-1", 1) == "continue"


def _quiet() -> Console:
    return Console(file=io.StringIO())
