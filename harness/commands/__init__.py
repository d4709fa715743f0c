"""What each ``crashpoint`` command does, behind the click front end (``harness.cli``).

One module per command (``run``, ``selftest``, ``demo``, ``points``, ``replay``,
``report``, ``doctor``), the matrix plumbing they share (``matrix``) and everything
they print (``console``). The engine never imports this package; it imports the engine
and ``reports``, and never ``harness.cli``.
"""
