"""Files the engine made ready for loads by repo id (``manage``), known verified until they change."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable
from pathlib import Path

from ...request import is_commit
from ...settings import Settings
from ..cache.layout import RepoCache
from ..cache.pins import Pin
from ..hub.credentials import sent_token
from ..own_work import own_work
from .uses import Prepared, Preparer

#: A file's identity (inode, size, mtime), the link followed; None when it is missing.
Identity = tuple[int, int, int] | None


class ReadyFiles:
    """The engine's preparation of single files (``preparer``, None: nothing is prepared), the pins it
    follows (``pin``: a branch's pin, or None) and the files it verified at a commit."""

    def __init__(
        self, preparer: Preparer | None, settings: Callable[[], Settings], pin: Callable[[str, str, str], Pin | None]
    ) -> None:
        self._preparer = preparer
        self._settings = settings
        self._pin = pin
        self._verified: dict[tuple[str, ...], tuple[Prepared, Identity]] = {}

    def target(self, repo_type: str, repo_id: str, revision: str) -> str:
        """The commit a pinned branch means, else ``revision``: a warm pinned load is known verified by commit."""
        pin = None if is_commit(revision) else self._pin(repo_type, repo_id, revision)
        return pin.commit if pin is not None and pin.commit is not None else revision

    def known(self, cache_dir: Path, repo_type: str, repo_id: str, commit: str, path: str) -> tuple[str, int] | None:
        """The snapshot file of ``path`` at ``commit`` and its size, when it was verified here and is
        unchanged since."""
        snapshot_file = snapshot_path(cache_dir, repo_type, repo_id, commit, path)
        known = self._unchanged((str(cache_dir), repo_type, repo_id, commit, path), snapshot_file)
        return (snapshot_file, known[1]) if known is not None else None

    def prepare(self, cache_dir: Path, repo_type: str, repo_id: str, revision: str, path: str) -> Prepared | None:
        """``path`` made ready in ``cache_dir`` by the engine (with the token a child sent, if any)."""
        if self._preparer is None:
            return None
        key = (str(cache_dir), repo_type, repo_id, revision, path)
        snapshot_file = snapshot_path(cache_dir, repo_type, repo_id, revision, path)
        known = self._unchanged(key, snapshot_file)
        if known is not None:
            return known[0]._replace(fetched=0)
        settings = dataclasses.replace(self._settings(), cache_dir=cache_dir)
        token = sent_token()
        if token is not None:
            # On a child process's behalf (the session endpoint): with the token it sent, or none.
            settings = dataclasses.replace(settings, token=token)
        with own_work():
            prepared = self._preparer(repo_type, repo_id, revision, path, settings)
        if prepared is not None and prepared.present and is_commit(revision):
            self._verified[key] = (prepared, identity(snapshot_file))
        return prepared

    def _unchanged(self, key: tuple[str, ...], snapshot_file: str) -> tuple[Prepared, int] | None:
        """What was verified of ``snapshot_file`` here and its size, when the file is there unchanged since."""
        known = self._verified.get(key)
        if known is None or known[1] is None or known[1] != identity(snapshot_file):
            return None
        return known[0], known[1][1]


def snapshot_path(cache_dir: Path, repo_type: str, repo_id: str, commit: str, path: str) -> str:
    return os.path.join(repo_root(str(cache_dir), repo_id, repo_type), "snapshots", commit, path)


@functools.lru_cache(maxsize=256)
def repo_root(cache_dir: str, repo_id: str, repo_type: str) -> str:
    return str(RepoCache(Path(cache_dir), repo_id, repo_type).root)


def identity(path: str) -> Identity:
    """What changes when a file is rewritten, truncated or replaced (the link followed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


__all__ = ["ReadyFiles", "identity", "repo_root", "snapshot_path"]
