"""Failures shared by the processes of one test session, so each failing request is asked of the Hub once.

A failure is a small JSON object in a file of the cache's own folder, one folder per session
(``outcomes/{session}/`` in :mod:`pytest_hfsnapshot.cache`'s layout). Sharing is best effort: a
read-only cache just means each process finds out for itself. The controller removes the
session's folders at the end, those its workers wrote included.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .cache import atomic_write_json, own_dir, read_json
from .errors import HfSnapshotError


class SharedFailures:
    """The failure files of the session ``session_id``, keyed by a short stable name per request."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        #: Every folder written to in this session (this process's and, in the controller, the workers').
        self.folders: set[str] = set()

    def share(self, cache_dir: Path, key: str, failure: Mapping[str, Any]) -> None:
        """Write ``failure`` (plain JSON data) for the other processes; silently skipped when impossible."""
        path = self._path(cache_dir, key)
        try:
            atomic_write_json(path, dict(failure), root=cache_dir)
        except (OSError, HfSnapshotError):
            return
        self.folders.add(str(path.parent))

    def recall(self, cache_dir: Path, key: str) -> dict[str, Any] | None:
        """The failure another process shared under ``key``, or None."""
        data = read_json(self._path(cache_dir, key))
        return data if isinstance(data, dict) else None

    def adopt(self, folders: Iterable[str]) -> None:
        """Take over the cleanup of folders another process wrote to."""
        self.folders.update(folders)

    def remove(self) -> None:
        """Delete every folder of the session (the controller, once every worker is done)."""
        for folder in self.folders:
            shutil.rmtree(folder, ignore_errors=True)

    def _path(self, cache_dir: Path, key: str) -> Path:
        return own_dir(cache_dir) / "outcomes" / self.session_id / f"{key}.json"


__all__ = ["SharedFailures"]
