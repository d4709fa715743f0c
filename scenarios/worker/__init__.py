"""The reference target worker (``python -m scenarios.worker``), configured by environment.

``loop`` claims and supervises attempts, ``attempt`` walks one attempt through the
protocol, ``calls`` talks to providers, ``reconcile`` resolves unknowns, ``lease`` keeps
the lease alive, ``config`` reads the environment.
"""
