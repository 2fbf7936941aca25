"""What the local Hub served: one record per request on every origin, and the counts over them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ._faults import matches

__all__ = ["Entry", "HubCounters", "RequestLog", "ServedRequest"]


@dataclass(frozen=True)
class ServedRequest:
    """One request as the local Hub answered it.

    ``path`` is the request's own percent-decoded path without query. ``aliases`` are the repo
    file paths (``/{prefix}{repo}/resolve/{commit}/{path}``) a CDN or CAS request was for.
    ``origin`` is ``"hub"``, ``"cdn"`` or ``"cas"``; ``body_bytes`` the body bytes written;
    ``at`` when the request arrived (``time.time()``).
    """

    origin: str
    method: str
    path: str
    status: int
    body_bytes: int = 0
    aliases: tuple[str, ...] = ()
    at: float = 0.0

    def matches(self, pattern: str) -> bool:
        """Whether ``pattern`` (``fnmatch.fnmatchcase``) matches the path or one of its aliases."""
        return matches(pattern, (self.path, *self.aliases))


@dataclass(frozen=True)
class HubCounters:
    """A consistent copy of the local Hub's counters at one moment (``LocalHub.counters()``)."""

    records: tuple[ServedRequest, ...] = ()

    @property
    def requests(self) -> list[tuple[str, str, int]]:
        """``(method, path, status)`` per request, in the order they were answered."""
        return [(r.method, r.path, r.status) for r in self.records]

    @property
    def bytes_served(self) -> int:
        """Body bytes written, every origin."""
        return sum(r.body_bytes for r in self.records)

    def request_count(self, pattern: str | None = None, method: str | None = None, status: int | None = None) -> int:
        """How many requests match ``pattern`` (path or alias), ``method`` and ``status``."""
        return sum(
            1
            for r in self.records
            if (pattern is None or r.matches(pattern))
            and (method is None or r.method == method.upper())
            and (status is None or r.status == status)
        )

    def served(self, pattern: str = "*") -> int:
        """Body bytes written for the requests matching ``pattern`` (path or alias)."""
        return sum(r.body_bytes for r in self.records if r.matches(pattern))


@dataclass
class Entry:
    """A request being answered: its body bytes grow as they are written."""

    origin: str
    method: str
    path: str
    status: int
    aliases: tuple[str, ...]
    body_bytes: int = 0
    at: float = 0.0


@dataclass
class RequestLog:
    """The live log the servers append to; body bytes are added as they are written."""

    _entries: list[Entry] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self, origin: str, method: str, path: str, status: int, aliases: tuple[str, ...], at: float = 0.0
    ) -> Entry:
        entry = Entry(origin, method, path, status, aliases, at=at)
        with self._lock:
            self._entries.append(entry)
        return entry

    def add_bytes(self, entry: Entry, nbytes: int) -> None:
        with self._lock:
            entry.body_bytes += nbytes

    def snapshot(self) -> HubCounters:
        with self._lock:
            return HubCounters(
                tuple(
                    ServedRequest(e.origin, e.method, e.path, e.status, e.body_bytes, e.aliases, e.at)
                    for e in self._entries
                )
            )

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
