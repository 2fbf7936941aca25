"""The record step: a snapshot's record, trusted once its files check and written once it is verified."""

from __future__ import annotations

import os
import time

from ...snapshot import Snapshot, Source
from ..cache import state, usage
from ..cache.verify import ExpectedFile, all_fine, hash_mismatches
from .call import Call
from .resolve import known_commit


def recorded(call: Call, commit: str | None) -> Snapshot | None:
    """The snapshot the record of ``commit`` vouches for, if its files still check; else None."""
    if commit is None:
        return None
    repo = call.repo
    files = state.read_record(repo, call.request, commit)
    if files is None or not call.repair.folders(commit, files)[0]:
        return None
    if not all_fine(repo, str(repo.snapshot_dir(commit)), files, call.layers.roots):
        return None
    if repo.incomplete.any():
        return None  # an orphan to clean up (or a download in flight): the slow path decides
    if call.hash_all and hash_mismatches(call.repair.blob_pairs(commit, files)):
        return None
    return snapshot(call, commit, files, "cache")


def write(call: Call, commit: str, files: list[ExpectedFile], adopted: dict[str, ExpectedFile]) -> None:
    """Record ``files`` as verified, each under the blob name it was ``adopted`` under where it was."""
    state.write_record(call.repo, call.request, commit, [adopted.get(f.path, f) for f in files])


def snapshot(
    call: Call,
    commit: str,
    files: list[ExpectedFile],
    source: Source,
    *,
    repaired: tuple[str, ...] = (),
    rehashed: int = 0,
    transferred: bool = False,
) -> Snapshot:
    """The Snapshot handed out; ``source`` becomes ``"layer"`` when a layer serves a file and
    nothing was ``transferred``. ``rehashed``: bytes of downloaded files hashed after their transfer."""
    request, repo = call.request, call.repo
    usage.record_use(repo.cache_dir, request.repo_type, request.repo_id, commit)
    layers = call.layers.serving(repo, files) if call.layers else ()
    if layers and not transferred:
        source = "layer"
    return Snapshot(
        path=repo.snapshot_dir(commit),
        repo_id=request.repo_id,
        repo_type=request.repo_type,
        revision=request.revision,
        commit=commit,
        files=tuple(sorted(f.path for f in files)),
        size=sum(f.size for f in files),
        source=source,
        seconds=time.monotonic() - call.started,
        lock_wait=0.0,
        repaired=repaired,
        rehashed=rehashed,
        layers=layers,
    )


class Awaited:
    """While waiting for the repo lock: the snapshot the holder just recorded, if that is what it did.

    One stat while the record is absent; the full checks only once it appears. The commit the
    holder works on, once known, does not change: it and its record's path are kept from then on.
    """

    def __init__(self, call: Call) -> None:
        self.call = call
        self.target: tuple[str, str] | None = None

    def __call__(self) -> Snapshot | None:
        if self.target is None:
            commit = known_commit(self.call)
            if commit is None:
                return None
            self.target = (commit, os.fspath(state.record_path(self.call.repo, self.call.request, commit)))
        commit, path = self.target
        if not os.path.exists(path):
            return None
        return recorded(self.call, commit)


__all__ = ["Awaited", "recorded", "snapshot", "write"]
