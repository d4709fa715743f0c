"""``python -m harness`` is ``crashpoint``."""

from harness.cli import main

main(prog_name="crashpoint")
