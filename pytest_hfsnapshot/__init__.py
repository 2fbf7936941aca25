"""pytest-hfsnapshot: verified, xdist-safe Hugging Face Hub snapshots for test suites and CI.

The core (``materialize``, ``Snapshot``, the errors) imports no pytest, so scripts and CI
steps can use it; ``snapshot_fixture`` is the conftest entry point of the pytest plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    AuthError,
    EntryNotFoundError,
    HfSnapshotError,
    InvalidRequestError,
    LockTimeoutError,
    OfflineMissingError,
    RevisionNotFoundError,
    TransientError,
    UnsafeCacheError,
    UnverifiedRevisionError,
    VerificationError,
)
from .materialize import materialize
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .plugin import snapshot_fixture

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The fixture factory needs pytest; importing it lazily keeps `materialize` pytest-free.
    if name == "snapshot_fixture":
        from .plugin import snapshot_fixture

        return snapshot_fixture
    raise AttributeError(f"module 'pytest_hfsnapshot' has no attribute {name!r}")


__all__ = [
    "AuthError",
    "EntryNotFoundError",
    "HfSnapshotError",
    "InvalidRequestError",
    "LockTimeoutError",
    "OfflineMissingError",
    "RevisionNotFoundError",
    "Snapshot",
    "TransientError",
    "UnsafeCacheError",
    "UnverifiedRevisionError",
    "VerificationError",
    "materialize",
    "snapshot_fixture",
]
