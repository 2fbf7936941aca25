"""The local Hub's fault plan and pacing, matched on a request's path and the repo file it is for."""

from __future__ import annotations

import fnmatch
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Fault", "FaultPlan", "Pacer", "RateLimit", "matches"]

FaultKind = Literal["fail", "cut", "corrupt"]


def matches(pattern: str, paths: Sequence[str]) -> bool:
    """Whether ``pattern`` (``fnmatch.fnmatchcase``) matches any of ``paths``."""
    return any(fnmatch.fnmatchcase(path, pattern) for path in paths)


@dataclass
class Fault:
    """One entry of the fault plan; ``remaining`` counts down as requests use it."""

    kind: FaultKind
    pattern: str
    remaining: int
    status: int = 0
    retry_after: int | None = None
    error_code: str | None = None
    method: str | None = None
    after_bytes: int = 0


@dataclass
class RateLimit:
    """A fixed-window rate limit: ``limit`` requests matching ``pattern`` per ``window`` seconds.

    A window opens at the first matching request after the previous one closed, as each
    client's own window does on huggingface.co; refused requests count too.
    """

    pattern: str
    limit: int
    window: float
    resource: str = "api"
    opened: float = -math.inf
    used: int = 0

    def admit(self, now: float) -> int | None:
        """Count one matching request; None when admitted, else the whole seconds until the window resets."""
        if now >= self.opened + self.window:
            self.opened, self.used = now, 0
        self.used += 1
        if self.used <= self.limit:
            return None
        return max(1, math.ceil(self.opened + self.window - now))

    def headers(self, reset: int) -> dict[str, str]:
        """The headers huggingface.co puts on a 429."""
        return {
            "RateLimit": f'"{self.resource}";r=0;t={reset}',
            "RateLimit-Policy": f'"fixed window";"{self.resource}";q={self.limit};w={self.window:g}',
            "Retry-After": str(reset),
        }


class FaultPlan:
    """Fault entries in the order added; each request uses the first one that matches and is not used up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._limits: list[RateLimit] = []

    def add_rate_limit(self, limit: RateLimit) -> None:
        if limit.limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit.limit}")
        if not limit.window > 0:
            raise ValueError(f"window must be positive, got {limit.window}")
        with self._lock:
            self._limits.append(limit)

    def rate_limited(self, paths: Sequence[str]) -> dict[str, str] | None:
        """Count the request against every rate limit it matches: the 429's headers if one refuses it."""
        refusal: dict[str, str] | None = None
        with self._lock:
            now = time.monotonic()
            for limit in self._limits:
                if matches(limit.pattern, paths):
                    reset = limit.admit(now)
                    if reset is not None and refusal is None:
                        refusal = limit.headers(reset)
        return refusal

    def add(self, fault: Fault) -> None:
        if fault.remaining < 1:
            raise ValueError(f"times must be at least 1, got {fault.remaining}")
        with self._lock:
            self._faults.append(fault)

    def take(self, method: str, paths: Sequence[str], *, with_body: bool) -> Fault | None:
        """Use one ``fail`` entry (``with_body=False``) or one ``cut``/``corrupt`` entry matching the request."""
        kinds = ("cut", "corrupt") if with_body else ("fail",)
        with self._lock:
            for fault in self._faults:
                if (
                    fault.remaining > 0
                    and fault.kind in kinds
                    and fault.method in (None, method)
                    and matches(fault.pattern, paths)
                ):
                    fault.remaining -= 1
                    return fault
        return None

    def pending(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return [(f.kind, f.pattern, f.remaining) for f in self._faults if f.remaining > 0]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
            self._limits.clear()


class Pacer:
    """Body pacing: one byte budget shared by every body (``slow``) and a cap on each body (``slow_each``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rate: float | None = None
        self._each: float | None = None
        self._next = 0.0

    def set_rate(self, bytes_per_second: float | None) -> None:
        with self._lock:
            self._rate = bytes_per_second
            self._next = time.monotonic()

    def set_each(self, bytes_per_second: float | None) -> None:
        with self._lock:
            self._each = bytes_per_second

    def chunk_size(self) -> int:
        """Bytes per write: small enough that pacing is smooth (about 20 writes per second)."""
        rates = [r for r in (self._rate, self._each) if r is not None]
        return 64 * 1024 if not rates else max(1, min(64 * 1024, int(min(rates) / 20)))

    def wait(self, nbytes: int, *, started: float, sent: int) -> None:
        """Sleep until the shared budget and this body's cap allow ``nbytes`` more.

        ``started`` is when this body's first write began (``time.monotonic()``), ``sent`` how
        many of its bytes went out since.
        """
        with self._lock:
            now = time.monotonic()
            delay = 0.0
            if self._rate is not None:
                self._next = max(now, self._next) + nbytes / self._rate
                delay = self._next - now
            if self._each is not None:
                delay = max(delay, started + (sent + nbytes) / self._each - now)
        if delay > 0:
            time.sleep(delay)
