"""Provider records read back out of their events' fields, at the speed a long history needs.

An arrival or commit event carries every field of its record (:mod:`harness.observe`
copies them) beside the names the report reads. Reading 100,000 of them back was most
of the oracle's time: a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``, and a keyword dict built per record doubles that. A
:class:`Loader` takes the values in one ``itemgetter`` call and fills the new record's
``__dict__``, which makes the same object (equal, hashed and printed alike) for classes
that neither check nor convert their fields; it refuses any other class. An event the
observer made in this process hands over the record it was copied from
(:func:`harness.history.made_from`), which is taken as it is.
"""

from __future__ import annotations

import operator
from dataclasses import MISSING, fields
from typing import Any, Generic, TypeVar

from harness.history import Event, record_of

R = TypeVar("R")


class Loader(Generic[R]):
    """Reads one record class back from events; a stored history from before a field
    was added (one with a default) takes the default."""

    def __init__(self, cls: type[R]) -> None:
        if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
            raise TypeError(
                f"{cls.__name__} checks its fields or has slots: filling its __dict__ would "
                "skip that; read it with its own __init__"
            )
        self.cls = cls
        self.names = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        self.optional = frozenset(
            f.name
            for f in fields(cls)  # type: ignore[arg-type]
            if f.default is not MISSING or f.default_factory is not MISSING
        )
        self._values = operator.itemgetter(*self.names)

    def __call__(self, e: Event, i: int) -> R:
        """The record event ``e`` (number ``i`` in its history) carries."""
        made = record_of(e)
        if type(made) is self.cls:
            return made  # the very record the event was made from, in this process
        try:
            values = self._values(e.fields)
        except KeyError:
            return self._older(e, i)
        record: R = object.__new__(self.cls)
        record.__dict__.update(zip(self.names, values, strict=True))
        return record

    def _older(self, e: Event, i: int) -> R:
        missing = [n for n in self.names if n not in e.fields and n not in self.optional]
        if missing:
            raise ValueError(
                f"event #{i} ({e.kind} from {e.source}) does not carry a whole "
                f"{self.cls.__name__.lower()}: {', '.join(missing)} missing; provider events "
                "are made by harness.observe, which copies every field"
            )
        known: dict[str, Any] = {n: e.fields[n] for n in self.names if n in e.fields}
        return self.cls(**known)
