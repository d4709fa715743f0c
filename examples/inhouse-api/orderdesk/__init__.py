"""An order job on RQ: create the order at the team's own orders service, once.

``flow.handle`` is the RQ task. The durable truth is a SQLite record in the trial's state
directory (``record``); Redis only carries deliveries, at least once (``delivery``).
"""
