"""The plugin's own Hub work, marked so that the observer of implicit use leaves it out."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_own_lock = threading.Lock()
_own_depth = 0


@contextlib.contextmanager
def own_work() -> Iterator[None]:
    """The plugin's own work runs inside (``materialize`` and its threads): its requests and cache
    reads are no implicit use, in any observer of the process."""
    global _own_depth
    with _own_lock:
        _own_depth += 1
    try:
        yield
    finally:
        with _own_lock:
            _own_depth -= 1


def busy() -> bool:
    """Whether the plugin's own work is running in this process."""
    return _own_depth > 0


__all__ = ["busy", "own_work"]
