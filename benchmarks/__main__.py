"""Run every ``benchmarks/bench_*.py`` module's ``main()``, or the ones named on the command line.

``python -m benchmarks`` runs all; ``python -m benchmarks providers`` runs ``bench_providers``;
``python -m benchmarks --help`` lists them with what each measures.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
import textwrap
from pathlib import Path

import benchmarks


def summary(name: str) -> str:
    """The first paragraph of a benchmark's docstring, read without importing it (some
    import the harness's heaviest modules)."""
    path = Path(benchmarks.__path__[0]) / f"bench_{name}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def usage(names: list[str]) -> str:
    lines = ["usage: python -m benchmarks [NAME ...]", "", "Runs the named benchmarks, or all:"]
    for name in names:
        wrapped = textwrap.wrap(summary(name), width=72)
        lines.append(f"  {name}")
        lines.extend(f"      {line}" for line in wrapped)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    names = sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name.startswith("bench_")
    )
    if any(a in ("-h", "--help") for a in argv):
        print(usage(names))
        return 0
    wanted = argv or names
    unknown = [w for w in wanted if w not in names]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(names)}", file=sys.stderr)
        return 2
    for name in wanted:
        print(f"== {name}", flush=True)
        importlib.import_module(f"benchmarks.bench_{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
