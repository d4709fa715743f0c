"""The contract every part of crashpoint may import: no imports of its own.

``errors`` is the one exception tree, ``failpoint`` the worker-side client of the
failpoint protocol with its wire constants, ``env`` the ``CRASHPOINT_*`` names a worker
reads, and ``vocabulary`` the words the parts agree on (invariants, provider kinds,
verdicts, exit codes, event kinds, schema names). A worker process imports this package
only, so its start-up pays nothing for the engine.
"""
