"""A billing job on RQ: charge at an idempotent provider, then mail a receipt at a plain one.

``flow.handle`` is the RQ task. The durable truth is a SQLite record in the trial's state
directory (``record``); Redis only carries deliveries, at least once (``delivery``).
"""
