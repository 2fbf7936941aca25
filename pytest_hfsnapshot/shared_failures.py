"""Former home of :class:`~pytest_hfsnapshot.state.SharedFailures` (our on-disk state lives in :mod:`.state`)."""

from __future__ import annotations

from .state import SharedFailures

__all__ = ["SharedFailures"]
