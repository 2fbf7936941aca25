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
    """One request per pin entry that records paths: its ``files`` (else its ``missing`` paths) at its
    revision; refusals and entries with neither are left out."""
    out: dict[SnapshotRequest, Pin] = {}
    for pin in pin_file.with_files():
        paths = pin.files or pin.missing
        if pin.refusal is not None or not paths:
            continue
        request = SnapshotRequest.build(
            pin.repo_id,
            revision=pin.revision,
            repo_type=pin.repo_type,
            allow_patterns=[glob_escape(path) for path in paths],
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
        if pin is not None and not pin.files:
            snapshot = _nothing_obtained(pin, Path(cache_dir()))
        else:
            snapshot = fetch(request, warn_unmatched=pin is None)
        if pin is not None:
            finish(pin_file, pin, snapshot, Path(cache_dir()))
        return snapshot

    return fetch_recorded


def _nothing_obtained(pin: Pin, cache_dir: Path) -> Snapshot:
    """The snapshot of an entry that obtained no file: nothing to fetch, its commit is the pin's."""
    assert pin.commit is not None  # a refusal, the one entry without, is no request
    repo = RepoCache(cache_dir, pin.repo_id, pin.repo_type)
    return Snapshot(repo.snapshot_dir(pin.commit), pin.repo_id, pin.repo_type, pin.revision, pin.commit, (), 0, "cache")


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
        repo.mark_absent(snapshot.commit, missing)


__all__ = ["Fetch", "fetcher", "finish", "requests"]
