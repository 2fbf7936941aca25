"""The :class:`Snapshot` handed out by ``materialize`` and every fixture."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Source = Literal["cache", "download", "repair", "layer"]


@dataclass(frozen=True)
class Snapshot(os.PathLike[str]):
    """A verified snapshot folder of one repo at one commit.

    Behaves like the folder's path: ``os.fspath(snap)``, ``str(snap)`` and ``snap / "config.json"``
    work, so it can be handed straight to ``from_pretrained``.

    Attributes:
        path: the snapshot folder in the cache (``<cache>/models--org--name/snapshots/<commit>``).
        repo_id: ``"org/name"``.
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        revision: the revision as asked (a branch, tag or commit).
        commit: the 40-hex commit it resolved to.
        files: the snapshot's files, relative paths, sorted.
        size: their total size in bytes.
        source: ``"cache"`` (served as cached), ``"download"`` (files were fetched), ``"repair"``
            (damaged files were fetched again) or ``"layer"`` (served from a read-only cache layer
            with no transfer; ``layers`` names it).
        unverified_revision: the Hub could not be reached to confirm what a branch or tag points at.
        seconds: seconds spent materializing, lock wait included.
        lock_wait: seconds spent waiting for the repo lock.
        repaired: the files found damaged in the cache and fetched again.
        rehashed: bytes of this call's downloads hashed after their transfer rather than while
            they arrived (0 for a cached snapshot).
    """

    path: Path
    repo_id: str
    repo_type: str
    revision: str
    commit: str
    files: tuple[str, ...]
    size: int
    source: Source
    #: True when the Hub could not be reached to confirm what a branch or tag points at.
    unverified_revision: bool = False
    #: Seconds spent materializing (lock wait included) and waiting for the repo lock.
    seconds: float = field(default=0.0, compare=False)
    lock_wait: float = field(default=0.0, compare=False)
    #: Files that were found damaged in the cache and fetched again.
    repaired: tuple[str, ...] = field(default=(), compare=False)
    #: Bytes of the files this call downloaded that were hashed after their transfer instead of while
    #: they arrived: files read back in full, and the last writes of the others (0 for a cached snapshot).
    rehashed: int = field(default=0, compare=False)
    #: The read-only cache layers serving some of its files (``source == "layer"`` when nothing was
    #: transferred), in the order they were given.
    layers: tuple[str, ...] = field(default=(), compare=False)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __truediv__(self, other: str | os.PathLike[str]) -> Path:
        return self.path / other
