"""pytest-hfsnapshot: verified, xdist-safe Hugging Face Hub snapshots for test suites and CI.

``materialize``, ``Snapshot`` and the errors import no pytest, so scripts and CI steps can use
them; ``snapshot_fixture`` is the conftest entry point of the pytest plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    AuthError,
    DiskError,
    EntryNotFoundError,
    HfSnapshotError,
    HfSnapshotWarning,
    InvalidRequestError,
    LockLostError,
    LockTimeoutError,
    OfflineMissingError,
    RateLimitError,
    RevisionNotFoundError,
    TransientError,
    UnsafeCacheError,
    UnverifiedRevisionError,
    VerificationError,
)
from .snapshot import Snapshot

if TYPE_CHECKING:
    from .core.engine.engine import materialize
    from .plugin.declarations import snapshot_fixture

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Both are imported on first use: the fixture factory needs pytest (the core must not), and
    # the engine needs huggingface_hub's HTTP stack (a pytest start-up must not pay for it).
    if name == "snapshot_fixture":
        from .plugin.declarations import snapshot_fixture

        return snapshot_fixture
    if name == "materialize":
        from .core.engine.engine import materialize

        return materialize
    raise AttributeError(f"module 'pytest_hfsnapshot' has no attribute {name!r}")


__all__ = [
    "AuthError",
    "DiskError",
    "EntryNotFoundError",
    "HfSnapshotError",
    "HfSnapshotWarning",
    "InvalidRequestError",
    "LockLostError",
    "LockTimeoutError",
    "OfflineMissingError",
    "RateLimitError",
    "RevisionNotFoundError",
    "Snapshot",
    "TransientError",
    "UnsafeCacheError",
    "UnverifiedRevisionError",
    "VerificationError",
    "materialize",
    "snapshot_fixture",
]
