"""Which process used which snapshot, and how long it took: the summary's and the manifest's data."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..request import SnapshotRequest
from ..snapshot import Snapshot


class SnapshotUse(NamedTuple):
    """One snapshot materialized by one process of the session (the controller or an xdist worker)."""

    request: SnapshotRequest
    snapshot: Snapshot
    #: Wall seconds the plugin spent getting it, lock wait included.
    elapsed: float
    #: xdist worker id (``"gw0"``...), or None for the controller / a run without xdist.
    worker: str | None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (str, int, float, bool, list, dict) that crosses execnet and JSON."""
        snapshot = {field.name: _plain(getattr(self.snapshot, field.name)) for field in dataclasses.fields(Snapshot)}
        request = {
            field.name: _plain(getattr(self.request, field.name)) for field in dataclasses.fields(SnapshotRequest)
        }
        return {"request": request, "snapshot": snapshot, "elapsed": self.elapsed, "worker": self.worker}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SnapshotUse:
        """Inverse of :meth:`to_dict`."""
        snap = dict(data["snapshot"])
        kwargs: dict[str, Any] = {}
        for field in dataclasses.fields(Snapshot):
            if field.name in snap:
                value = snap[field.name]
                kwargs[field.name] = tuple(value) if isinstance(value, list) else value
        kwargs["path"] = Path(snap["path"])
        return cls(
            request=SnapshotRequest.build(**data["request"]),
            snapshot=Snapshot(**kwargs),
            elapsed=float(data["elapsed"]),
            worker=data.get("worker"),
        )


def primary_uses(uses: Iterable[SnapshotUse]) -> list[SnapshotUse]:
    """One use per request: the process that downloaded or repaired it, else the first to ask.

    Ordered by request label, so the result is deterministic whatever the worker timing.
    """
    chosen: dict[SnapshotRequest, SnapshotUse] = {}
    for use in uses:
        current = chosen.get(use.request)
        if current is None or (current.snapshot.source == "cache" and use.snapshot.source != "cache"):
            chosen[use.request] = use
    return sorted(chosen.values(), key=lambda u: (u.request.label, request_key(u.request)))


def request_key(request: SnapshotRequest) -> str:
    """A short stable hash of every field of ``request``, the same in every process."""
    blob = json.dumps([_plain(getattr(request, f.name)) for f in dataclasses.fields(SnapshotRequest)])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _plain(value: object) -> object:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


__all__ = ["SnapshotUse", "primary_uses", "request_key"]
