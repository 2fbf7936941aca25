"""The Hub's answers for snapshots the pin file records, made from the cache with no network.

An offline run keeps every request off the network, even where library code switches the client
back online (PEFT's ``hub_online_once``); what the pin file does not record is refused."""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs

from ...request import is_commit
from ..cache.layout import RepoCache
from ..cache.pins import PinFile
from ..hub.hub_calls import HubCall

_REFUSED_STATUS = {"RepoNotFound": 401, "GatedRepo": 403, "RevisionNotFound": 404}
_REFUSED_MESSAGE = {
    "RepoNotFound": "Repository not found",
    "GatedRepo": "Access to this repo is restricted (gated).",
    "RevisionNotFound": "Invalid rev id",
}


class Answer(NamedTuple):
    """An HTTP answer: status, headers and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes = b""


def answer(call: HubCall, method: str, pin_file: PinFile | None, cache_dir: Path, body: bytes = b"") -> Answer | None:
    """What the Hub would answer to ``call`` for a snapshot the pin file records; None when unknown.

    A revision is answered by its pinned commit, a file present in the cache by its metadata and
    bytes, a recorded ``missing`` path by the Hub's 404 ``EntryNotFound``, a recorded refusal by
    its error, a tree or paths-info request (``body``: the paths it asks about) from the listing
    the cache keeps, folders included, as ``HfFileSystem`` lists them.
    """
    pin = pin_file.pin_for(call.repo_type, call.repo_id, call.revision) if pin_file is not None else None
    if pin is None or (pin.files is None and pin.refused is None):
        return None
    if pin.refusal is not None:
        return refusal(pin.refusal, pin.commit)
    commit = pin.commit
    if commit is None:  # only a refusal names none
        return None
    repo = RepoCache(cache_dir, call.repo_id, call.repo_type)
    if call.kind in ("revision", "info"):
        info = {"id": call.repo_id, "sha": commit, "siblings": [{"rfilename": p} for p in pin.files or ()]}
        return _json(info, commit)
    if call.kind == "file":
        if call.path in pin.missing:
            return missing(commit)
        return _file(repo, commit, call.path, with_body=method.upper() == "GET")
    if call.kind in ("tree", "paths-info"):
        listing = repo.listings.read(commit)
        if listing is None:
            return None
        entries = {path: _tree_entry(path, info) for path, info in listing.items()}
        for folder in {parent for path in listing for parent in _parents(path)}:
            entries[folder] = {"type": "directory", "path": folder, "oid": "", "size": 0}
        if call.kind == "paths-info":
            return _json([entries[p] for p in dict.fromkeys(_asked_paths(body)) if p in entries], commit)
        folder = call.path.strip("/")
        if folder and entries.get(folder, {}).get("type") != "directory":
            return missing(commit)
        prefix = f"{folder}/" if folder else ""
        inside = [path for path in entries if path.startswith(prefix)]
        return _json([entries[p] for p in sorted(inside) if call.recursive or "/" not in p[len(prefix) :]], commit)
    return None


def refs(pin_file: PinFile | None, repo_type: str, repo_id: str) -> Answer | None:
    """The Hub's list of a repo's refs, each branch or tag the pin file records at its pinned commit; None
    when it records none (a commit id is no ref; a refusal names no commit)."""
    pinned = [
        pin
        for pin in (pin_file.pins.values() if pin_file is not None else ())
        if (pin.repo_type, pin.repo_id) == (repo_type, repo_id)
        and pin.commit is not None
        and pin.refusal is None
        and not is_commit(pin.revision)
    ]
    if not pinned:
        return None
    branches = [
        {"name": pin.revision, "ref": f"refs/heads/{pin.revision}", "targetCommit": pin.commit}
        for pin in sorted(pinned, key=lambda pin: pin.revision)
    ]
    body = json.dumps({"branches": branches, "converts": [], "tags": [], "pullRequests": []}).encode()
    return Answer(200, {"Content-Type": "application/json"}, body)


def refusal(code: str, commit: str | None = None) -> Answer:
    """The Hub's answer for a refused repo or revision, as it sends it (``X-Error-Code``)."""
    headers = {"X-Error-Code": code, "X-Error-Message": _REFUSED_MESSAGE.get(code, code)}
    if commit is not None and code != "RevisionNotFound":
        headers["X-Repo-Commit"] = commit
    return Answer(_REFUSED_STATUS.get(code, 404), headers)


def missing(commit: str) -> Answer:
    """The Hub's 404 for a path the commit does not have."""
    return Answer(
        404,
        {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found", "X-Repo-Commit": commit},
    )


def _json(data: Any, commit: str) -> Answer:
    body = json.dumps(data).encode()
    return Answer(200, {"Content-Type": "application/json", "X-Repo-Commit": commit}, body)


def _file(repo: RepoCache, commit: str, path: str, *, with_body: bool) -> Answer | None:
    found = file_headers(repo, commit, path)
    if found is None:
        return None
    headers, size = found
    body = Path(repo.link(commit, path)).read_bytes() if with_body else b""
    return Answer(200, {**headers, "Content-Length": str(size)}, body)


def file_headers(repo: RepoCache, commit: str, path: str, link: str | None = None) -> tuple[dict[str, str], int] | None:
    """The Hub's headers for a file the cache holds at ``commit`` (``X-Repo-Commit``, the ``ETag`` that
    names its blob, ``X-Linked-Etag`` and ``X-Linked-Size`` for an LFS file) and its size; None when
    the cache does not have it. ``link``: its snapshot file's path, where the caller has it already."""
    if link is None:
        link = str(repo.link(commit, path))
    try:
        blob: str | None = os.path.basename(os.readlink(link))
    except OSError:
        blob = None  # not a link (the stat below says whether it is there at all)
    try:
        size = os.stat(link).st_size
    except OSError:
        return None
    if blob is None:
        # A cache without symlinks: the blob's name is the one the client's listing gives.
        listed = (repo.listings.read(commit) or {}).get(path) or {}
        blob = listed.get("lfs_sha256") or listed.get("blob_id")
    headers = {"X-Repo-Commit": commit}
    if isinstance(blob, str) and len(blob) == 64:
        headers.update({"X-Linked-Etag": f'"{blob}"', "X-Linked-Size": str(size), "ETag": f'"{blob}"'})
    elif isinstance(blob, str):
        headers["ETag"] = f'"{blob}"'
    return headers, size


def _parents(path: str) -> list[str]:
    """``a/b/c.txt`` -> ``["a/b", "a"]``."""
    out = []
    while "/" in path:
        path = posixpath.dirname(path)
        out.append(path)
    return out


def _asked_paths(body: bytes) -> list[str]:
    """The paths a paths-info request asks about: a form (``paths=a&paths=b``) or a JSON object."""
    text = body.decode(errors="replace")
    if text.lstrip().startswith("{"):
        try:
            asked = json.loads(text).get("paths", [])
        except (ValueError, AttributeError):
            return []
        return [asked] if isinstance(asked, str) else [str(p) for p in asked]
    return parse_qs(text).get("paths", [])


def _tree_entry(path: str, info: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "path": path, "size": info.get("size"), "oid": info.get("blob_id")}
    if info.get("lfs_sha256"):
        entry["lfs"] = {"oid": info["lfs_sha256"], "size": info.get("lfs_size", info.get("size")), "pointerSize": 0}
    if info.get("xet_hash"):
        entry["xetHash"] = info["xet_hash"]
    return entry


__all__ = ["Answer", "answer", "file_headers", "missing", "refusal"]
