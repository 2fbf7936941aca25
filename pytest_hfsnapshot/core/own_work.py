"""The plugin's own Hub work, marked so that observing implicit use leaves it out.

The engine runs ``materialize`` inside :func:`own_work`; the observer of implicit use asks
:func:`busy` before counting a request or a cache read as library code's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

#: How deep in the plugin's own work each thread is (see :func:`own_work`).
_own = threading.local()


@contextlib.contextmanager
def own_work() -> Iterator[None]:
    """The plugin's own work runs inside (``materialize``): its requests and cache reads in this thread
    are no implicit use, in any observer of the process. Other threads' loads still are (a session
    endpoint's handler runs library code while another handler runs the engine)."""
    _own.depth = getattr(_own, "depth", 0) + 1
    try:
        yield
    finally:
        _own.depth -= 1


def own_thread() -> None:
    """A thread pool's ``initializer``: every task of the plugin's own worker threads is its own work."""
    _own.depth = getattr(_own, "depth", 0) + 1


def busy() -> bool:
    """Whether this thread is doing the plugin's own work."""
    return getattr(_own, "depth", 0) > 0


__all__ = ["busy", "own_thread", "own_work"]
