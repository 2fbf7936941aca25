"""The snapshot manifest: what a run used, as deterministic JSON (CI keys its cache on it)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...request import SnapshotRequest
from ...snapshot import Snapshot
from ..cache.layout import atomic_write_text

#: The keys of every manifest entry, in the order the docs list them (the file sorts them).
KEYS = ("repo_id", "repo_type", "revision", "commit", "files", "size")


def entries(snapshots: Iterable[tuple[SnapshotRequest, Snapshot]]) -> list[dict[str, Any]]:
    """The manifest's objects for ``(request, snapshot)`` pairs, deduplicated and in manifest order.

    Each object has exactly :data:`KEYS` (``revision`` as asked, ``files`` sorted, ``size`` in
    bytes); they are sorted by repo type, repo id, revision and selection, and two selections
    that pick the same files are listed once.
    """
    keyed: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    for request, snapshot in snapshots:
        entry: dict[str, Any] = {
            "repo_id": request.repo_id,
            "repo_type": request.repo_type,
            "revision": request.revision,
            "commit": snapshot.commit,
            "files": sorted(snapshot.files),
            "size": snapshot.size,
        }
        text = json.dumps(entry, sort_keys=True)
        order = (request.repo_type, request.repo_id, request.revision, *_selection(request), text)
        known = keyed.get(text)
        if known is None or order < known[0]:
            keyed[text] = (order, entry)
    return [entry for _, entry in sorted(keyed.values(), key=lambda pair: pair[0])]


def render(snapshots: Iterable[tuple[SnapshotRequest, Snapshot]]) -> str:
    """The manifest file's text: stable formatting, trailing newline."""
    return json.dumps(entries(snapshots), indent=2, sort_keys=True) + "\n"


def write(path: str | os.PathLike[str], snapshots: Iterable[tuple[SnapshotRequest, Snapshot]]) -> Path:
    """Write the manifest atomically (readers see the old file or the whole new one); returns the path.

    Missing parent folders are created. Raises OSError when the file cannot be written.
    """
    target = Path(path)
    text = render(snapshots)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)  # the umask's mode, as any file the user's own tools write
    return target


def _selection(request: SnapshotRequest) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    # Requests differing only in their selection sort by it (the full snapshot first), so the order
    # never depends on which test or worker asked first.
    return (request.allow_patterns or (), request.ignore_patterns or (), request.metadata_only)


__all__ = ["KEYS", "entries", "render", "write"]
