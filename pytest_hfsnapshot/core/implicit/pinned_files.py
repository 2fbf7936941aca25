"""The implicit uses a pin file records, made ready for offline runs, ``missing`` markers included."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ...errors import InvalidRequestError
from ...request import SnapshotRequest
from ...settings import pytest_command
from ...snapshot import Snapshot
from ..cache.layout import RepoCache
from ..cache.pins import Pin, PinFile
from .file_materialize import glob_escape


def requests(pin_file: PinFile) -> dict[SnapshotRequest, Pin]:
    """One request per pin entry that records paths: its ``files`` at its revision (refusals excepted)."""
    out: dict[SnapshotRequest, Pin] = {}
    for pin in pin_file.with_files():
        if not pin.files:
            continue
        request = SnapshotRequest.build(
            pin.repo_id,
            revision=pin.revision,
            repo_type=pin.repo_type,
            allow_patterns=[glob_escape(path) for path in pin.files],
        )
        out[request] = pin
    return out


class Fetch(Protocol):
    """A prefetch's fetch of one request; ``warn_unmatched=False`` keeps quiet about patterns that select nothing."""

    def __call__(self, request: SnapshotRequest, *, warn_unmatched: bool = True) -> Snapshot: ...


def fetcher(
    pin_file: PinFile, fetch: Fetch, cache_dir: Callable[[], str | os.PathLike[str]]
) -> Callable[[SnapshotRequest], Snapshot]:
    """``fetch`` for the prefetch: a recorded request is checked and its markers written once it is ready
    (a recorded path the commit lacks is the error :func:`finish` raises, not a pattern warning)."""
    recorded = requests(pin_file)

    def fetch_recorded(request: SnapshotRequest) -> Snapshot:
        pin = recorded.get(request)
        snapshot = fetch(request, warn_unmatched=pin is None)
        if pin is not None:
            finish(pin_file, pin, snapshot, Path(cache_dir()))
        return snapshot

    return fetch_recorded


def finish(pin_file: PinFile, pin: Pin, snapshot: Snapshot, cache_dir: Path) -> None:
    """Check that the commit had every recorded path; write the branch's ref and the markers of the ``missing`` ones."""
    lacking = sorted(set(pin.files or ()) - set(snapshot.files))
    if lacking:
        raise InvalidRequestError(
            f"{pin_file.where(pin)}: files names {', '.join(repr(p) for p in lacking[:5])}"
            f"{' and more' if len(lacking) > 5 else ''}, which commit {pin.commit} does not have. Record the "
            f"entry again with `{pytest_command(('pins', pin_file.path), 'update_pins')}`, or remove those "
            "paths from it."
        )
    repo = RepoCache(cache_dir, pin.repo_id, pin.repo_type)
    if pin.moves:
        repo.refs.write(pin.revision, snapshot.commit)  # offline, library code resolves the branch here
    for missing in pin.missing:
        marker = repo.no_exist(snapshot.commit, missing)
        repo.require_inside(marker)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()


__all__ = ["Fetch", "fetcher", "finish", "requests"]
