"""What a session's child processes loaded, read from what they left in the cache.

A model server a test starts loads by repo id where the plugin does not run; its refs, snapshot
links and ``.no_exist`` markers show it."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ...request import is_commit
from .uses import SESSION, ImplicitUse

#: What a scan saw: (repo type, repo id) -> {"refs": {name: commit}, "files": {(commit, path)}, "missing": {...}}.
CacheState = dict[tuple[str, str], dict[str, object]]

_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}


def scan(cache_dir: str | os.PathLike[str]) -> CacheState:
    """The refs, snapshot paths and absence markers of every repo of the cache (no file is read but refs)."""
    state: CacheState = {}
    try:
        entries = list(os.scandir(cache_dir))
    except OSError:
        return state
    for entry in entries:
        kind, _, name = entry.name.partition("--")
        if kind not in _TYPES or not name or not entry.is_dir(follow_symlinks=False):
            continue
        root = Path(entry.path)
        state[(_TYPES[kind], name.replace("--", "/"))] = {
            "refs": _refs(root / "refs"),
            "files": set(_paths(root / "snapshots")),
            "missing": set(_paths(root / ".no_exist")),
        }
    return state


def uses_between(before: CacheState, after: CacheState) -> list[ImplicitUse]:
    """The uses that appeared between two scans, one per repo and revision (a ref's name, else the commit)."""
    uses: dict[tuple[str, str, str], ImplicitUse] = {}
    for repo, seen in after.items():
        old = before.get(repo, {"refs": {}, "files": set(), "missing": set()})
        refs = dict(seen["refs"])  # type: ignore[call-overload]
        by_commit: dict[str, str] = {}
        for name, commit in sorted(refs.items()):
            by_commit.setdefault(commit, name)
        new_files = set(seen["files"]) - set(old["files"])  # type: ignore[call-overload]
        new_missing = set(seen["missing"]) - set(old["missing"])  # type: ignore[call-overload]
        for (commit, path), missing in [*((f, False) for f in new_files), *((m, True) for m in new_missing)]:
            revision = by_commit.get(commit, commit)
            key = (repo[0], repo[1], revision)
            use = uses.get(key)
            if use is None:
                use = uses[key] = ImplicitUse(*key, commit=commit, tests=[SESSION])
            if missing:
                use.missing.add(path)
            else:
                use.files[path] = -1
    return [uses[key] for key in sorted(uses)]


def _refs(folder: Path) -> dict[str, str]:
    refs: dict[str, str] = {}
    for path in _walk(folder):
        try:
            commit = (folder / path).read_text().strip()
        except OSError:
            continue
        if is_commit(commit):
            refs[path] = commit
    return refs


def _paths(folder: Path) -> Iterable[tuple[str, str]]:
    """(commit, path) of every entry under ``folder/<commit>/``."""
    try:
        commits = [e.name for e in os.scandir(folder) if is_commit(e.name)]
    except OSError:
        return
    for commit in commits:
        for path in _walk(folder / commit):
            yield commit, path


def _walk(folder: Path) -> Iterable[str]:
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        rel = os.path.relpath(root, folder)
        for name in sorted(files):
            yield name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")


__all__ = ["CacheState", "scan", "uses_between"]
