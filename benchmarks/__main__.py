"""Run every ``benchmarks/bench_*.py`` module's ``main()``, or the ones named on the command line.

``python -m benchmarks`` runs all; ``python -m benchmarks providers`` runs ``bench_providers``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks


def main(argv: list[str]) -> int:
    names = sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name.startswith("bench_")
    )
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
