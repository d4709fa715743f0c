"""What a job calls and how: the seam through which the worker takes another client.

By default a job charges at ``billing`` and mails a receipt through ``mailer`` with this
package's own HTTP calls (``providers.py``). ``worker.py --client PATH`` runs the same
worker (record, lease, deliveries, reconcile-before-retry) with another client instead:
PATH is a package directory or a ``.py`` file, imported by its name with its folder put
on the path, whose ``CLIENT`` is a :class:`Client`::

    CLIENT = Client(calls=Calls, plan=("orders",), kinds={"orders": "idempotent"})

``Calls(worker_id=..., timeout_s=...)`` answers ``write`` with a ``Sent`` and ``lookup``
with a ``Found`` (``providers.py`` says what each outcome means to the worker).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rqbilling import providers
from rqbilling.providers import Found, Sent
from rqbilling.settings import Provider


class Calls(Protocol):
    def write(self, p: Provider, body: dict[str, Any], *, key: str, token: int) -> Sent: ...

    def lookup(self, p: Provider, *, job_id: str, key: str, token: int) -> Found: ...


class MakeCalls(Protocol):
    def __call__(self, *, worker_id: str, timeout_s: float) -> Calls: ...


def stable_key(provider: str, job_id: str, bugs: frozenset[str]) -> str:
    """From the job only, never the attempt: every write and lookup of a call agree."""
    del bugs
    return f"{provider}-{job_id}"


@dataclass(frozen=True)
class Client:
    #: Builds the calls a job makes (once per claim).
    calls: MakeCalls
    #: The providers each job calls, in order.
    plan: tuple[str, ...]
    #: The kind of each provider unless CRASHPOINT_PROVIDER_<NAME>_KIND says otherwise.
    kinds: Mapping[str, str] = field(default_factory=dict)
    #: The client's own deliberate bugs, offered by ``--bug`` beside the worker's.
    bugs: tuple[str, ...] = ()
    #: The idempotency key (or request id, or marker) of a job's call to a provider.
    key: Callable[[str, str, frozenset[str]], str] = stable_key


BILLING = Client(
    calls=providers.Calls,
    plan=("billing", "mailer"),
    kinds={"billing": "idempotent", "mailer": "plain"},
)


class NoClient(Exception):
    """The --client PATH names nothing that holds a Client."""


def load(path: str) -> Client:
    """The ``CLIENT`` of the package directory or ``.py`` file at ``path``."""
    where = Path(path).resolve()
    if not (where.is_dir() and (where / "__init__.py").is_file()) and where.suffix != ".py":
        raise NoClient(f"--client {path}: not a package directory or a .py file")
    if not where.exists():
        raise NoClient(f"--client {path}: no such file")
    if str(where.parent) not in sys.path:
        sys.path.insert(0, str(where.parent))
    try:
        module = importlib.import_module(where.stem)
    except Exception as exc:  # its own import failed: say which, in one line
        raise NoClient(f"--client {path}: cannot import it: {type(exc).__name__}: {exc}") from exc
    client = getattr(module, "CLIENT", None)
    if not isinstance(client, Client):
        raise NoClient(f"--client {path}: it has no CLIENT = rqbilling.client.Client(...)")
    return client
