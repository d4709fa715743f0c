"""Development sessions for crashpoint. `nox` alone runs the tests."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import nox

nox.options.default_venv_backend = "none"  # use the interpreter crashpoint is installed in
nox.options.sessions = ["tests"]

#: Built from the Go module proxy by `scripts/install-infra.sh actionlint`, pinned there too.
ACTIONLINT_VERSION = "1.7.12"
WORKFLOWS = sorted(str(p) for p in Path("docs/ci").glob("*.yml"))
#: Built the same way by `scripts/install-infra.sh kubeconform`, pinned there too.
KUBECONFORM_VERSION = "0.6.7"
#: The Kubernetes API docs/k8s/ is checked against: the schemas the pinned
#: kubernetes-validate package ships (pyproject's dev extras), read offline.
KUBERNETES_VERSION = "1.33.0"
MANIFESTS = sorted(str(p) for p in Path("docs/k8s").glob("*.yaml"))
SOURCES = [
    "harness",
    "scenarios",
    "fake_providers",
    "reports",
    "tests",
    "benchmarks",
    "examples",
    "noxfile.py",
]


#: Test processes at once: the process tier's tests mostly wait (leases, holds, worker
#: start-ups), so three share two cores well; CRASHPOINT_TEST_WORKERS overrides it.
TEST_WORKERS = os.environ.get("CRASHPOINT_TEST_WORKERS", "3")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the unit and process tiers, TEST_WORKERS at once."""
    session.run(
        "python",
        "-m",
        "pytest",
        "-n",
        TEST_WORKERS,
        "--dist",
        "worksteal",
        "-m",
        "not matrix",
        *session.posargs,
    )


@nox.session(default=False)
def deep(session: nox.Session) -> None:
    """Run the fuzzers and property tests with the deep Hypothesis profile (long)."""
    session.env["HYPOTHESIS_PROFILE"] = "deep"
    session.run(
        "python",
        "-m",
        "pytest",
        "-k",
        "fuzz or propert",
        "tests/unit",
        "tests/process",
        *session.posargs,
    )


@nox.session(default=False)
def examples(session: nox.Session) -> None:
    """Run every example's correct variant through its whole matrix, and the Node example
    in its own image through every non-network cell (several minutes)."""
    session.run(
        "python",
        "-m",
        "pytest",
        "-n",
        "2",
        "-m",
        "matrix",
        "tests/process",
        *session.posargs,
    )


@nox.session(default=False)
def unit(session: nox.Session) -> None:
    """Run only the fast unit tier (no sockets, no sleeps)."""
    session.run("python", "-m", "pytest", "tests/unit", "-m", "not process", *session.posargs)


@nox.session(default=False)
def e2e(session: nox.Session) -> None:
    """Run only the process tier (real processes, signals and servers)."""
    session.run("python", "-m", "pytest", "-m", "process", *session.posargs)


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """Check style with ruff, the package layers with import-linter, the Kubernetes
    manifests (docs/k8s/) with kubeconform, and the GitHub Actions recipe (docs/ci/ and
    action.yml) with actionlint."""
    session.run("python", "-m", "ruff", "check", *SOURCES, *session.posargs)
    session.run("python", "-m", "ruff", "format", "--check", *SOURCES)
    session.run("lint-imports")
    _lint_manifests(session)
    actionlint = _actionlint()
    if actionlint is None:
        session.warn(
            f"actionlint {ACTIONLINT_VERSION} is not built, so docs/ci/ and action.yml are not "
            "checked; `bash scripts/install-infra.sh actionlint` builds it"
        )
        return
    session.run(actionlint, "-no-color", *WORKFLOWS, external=True)
    # actionlint reads action.yml only through a workflow that uses it, and checks its
    # inputs then, not its steps: lint a project holding the action, a workflow that
    # uses it, and its composite steps run as a job of their own.
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _action_project(Path("action.yml"), root)
        with session.chdir(root):
            session.run(actionlint, "-no-color", external=True)


def _lint_manifests(session: nox.Session) -> None:
    cache = Path(os.environ.get("CRASHPOINT_CACHE", Path.home() / ".cache" / "crashpoint"))
    kubeconform = cache / f"kubeconform-{KUBECONFORM_VERSION}" / "kubeconform"
    if not kubeconform.is_file():
        session.warn(
            f"kubeconform {KUBECONFORM_VERSION} is not built, so docs/k8s/ is not checked; "
            "`bash scripts/install-infra.sh kubeconform` builds it"
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        location = _kubernetes_schemas(Path(tmp))
        session.run(
            str(kubeconform),
            *("-strict", "-summary", "-kubernetes-version", KUBERNETES_VERSION),
            *("-schema-location", location),
            *MANIFESTS,
            external=True,
        )


def _kubernetes_schemas(root: Path) -> str:
    """kubernetes-validate's strict schemas of KUBERNETES_VERSION laid out for
    kubeconform; the ``-schema-location`` template that finds them.

    Their ``$ref``s name ``/api/_definitions.json``, a path only that package resolves:
    each is pointed at the copy of ``_definitions.json`` beside it, by absolute URI,
    which kubeconform follows offline.
    """
    from importlib.resources import files

    source = files("kubernetes_validate") / "kubernetes-json-schema"
    source = source / f"v{KUBERNETES_VERSION}-local-strict"
    target = root / f"v{KUBERNETES_VERSION}-standalone-strict"
    target.mkdir(parents=True)
    definitions = (target / "_definitions.json").as_uri()
    for schema in source.iterdir():
        if schema.name.endswith(".json"):
            text = schema.read_text(encoding="utf-8")
            text = text.replace('"/api/_definitions.json#', f'"{definitions}#')
            (target / schema.name).write_text(text, encoding="utf-8")
    each = "{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
    return f"{root}/{each}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json"


def _actionlint() -> str | None:
    cache = Path(os.environ.get("CRASHPOINT_CACHE", Path.home() / ".cache" / "crashpoint"))
    built = cache / f"actionlint-{ACTIONLINT_VERSION}" / "actionlint"
    return str(built) if built.is_file() else None


def _action_project(action_file: Path, root: Path) -> None:
    import yaml

    text = action_file.read_text()
    action = yaml.safe_load(text)
    (root / "action.yml").write_text(text)
    (root / ".git").mkdir()  # how actionlint finds a project's root
    workflows = root / ".github" / "workflows"
    workflows.mkdir(parents=True)
    inputs = {
        name: {"type": "string", "required": False, "default": spec.get("default", "")}
        for name, spec in action["inputs"].items()
    }
    with_ = {name: spec.get("default") or "1/3" for name, spec in action["inputs"].items()}
    docs: dict[str, Any] = {
        "uses-the-action.yml": {
            "name": "uses the action",
            "on": "push",
            "jobs": {
                "shard": {
                    "runs-on": "ubuntu-latest",
                    "steps": [{"uses": "actions/checkout@v4"}, {"uses": "./", "with": with_}],
                }
            },
        },
        "action-steps.yml": {
            "name": "the action's steps",
            "on": {"workflow_call": {"inputs": inputs}},
            "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
        },
    }
    for name, doc in docs.items():
        (workflows / name).write_text(yaml.safe_dump(doc, sort_keys=False))


@nox.session(default=False)
def typecheck(session: nox.Session) -> None:
    """Check types with mypy in strict mode."""
    session.run("python", "-m", "mypy", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Measure the speed targets, the heavy target (0.5 s of CPU per process start,
    one-shot and served) and trials to first detection per mutant (matrix, explore,
    random): writes bench.json and prints the tables (about 45 minutes).

    ``nox -s bench -- NAME ...`` runs other benchmarks instead (``python -m benchmarks
    --help`` lists them and what each measures); ``BENCH_RUNS=5`` repeats each matrix for
    medians; ``DETECTION_BUDGET`` and ``DETECTION_MUTANTS`` bound the detection run
    (benchmarks/bench_detection.py); ``HEAVY_RUNS`` (default 3) repeats the heavy target's
    matrices; ``HEAVY_FORMS`` picks them.
    """
    default = ["speed", "heavy", "detection"]
    session.run("python", "-m", "benchmarks", *(session.posargs or default))


@nox.session(default=False)
def demo(session: nox.Session) -> None:
    """Run `crashpoint demo` on the embedded default."""
    session.run("python", "-m", "harness", "demo", *session.posargs)
