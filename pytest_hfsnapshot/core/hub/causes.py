"""An error's chain of causes and the attributes of httpx's objects, read without importing an HTTP client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def chain(error: BaseException) -> Iterator[BaseException]:
    """The exception and every cause or context behind it (breadth first), each once."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(link for link in (current.__cause__, current.__context__) if link is not None)


def safe_attr(obj: object, name: str) -> Any:
    """``getattr`` that survives httpx's request/response properties, which raise when unset."""
    try:
        return getattr(obj, name, None)
    except RuntimeError:
        return None


__all__ = ["chain", "safe_attr"]
