"""The Redis the examples use as their broker, as the process tier sees it."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

#: Where the examples' broker is unless REDIS_URL says otherwise.
DEFAULT_URL = "redis://127.0.0.1:6379/0"
#: Redis has databases 0-15; 0 is the one anyone else would use, so tests take 1-15.
TEST_DBS = 15


def url() -> str:
    """Read per call: the process tier gives each test a database of its own."""
    return os.environ.get("REDIS_URL") or DEFAULT_URL


def private_url(xdist_worker: str) -> str:
    """REDIS_URL pointed at the database of this xdist worker (``gw3``), 1 when there is none,
    so two workers' tests never share one."""
    number = xdist_worker.removeprefix("gw")
    db = 1 + (int(number) if number.isdigit() else 0) % TEST_DBS
    return urlunsplit(urlsplit(url())._replace(path=f"/{db}"))


def empty_db(db_url: str) -> None:
    import redis

    client = redis.Redis.from_url(db_url, socket_connect_timeout=1.0, socket_timeout=5.0)
    try:
        client.flushdb()
    except redis.exceptions.ConnectionError:
        pass  # no server there: nothing can have been written to it
    finally:
        client.close()
