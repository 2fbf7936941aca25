"""What a request to the Hub is about (repo, revision, path): the one reader of the Hub's URL routes."""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple
from urllib.parse import SplitResult, parse_qs, quote, unquote, urlsplit

from ...request import snapshot_label

Kind = Literal["revision", "info", "tree", "paths-info", "file", "xet-token", "other"]

_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_PREFIXES = {"datasets": "dataset", "spaces": "space"}
#: API routes that name a revision after the repo id: ``/api/models/org/name/<route>/<revision>[/path]``.
_API_ROUTES: dict[str, Kind] = {
    "revision": "revision",
    "tree": "tree",
    "paths-info": "paths-info",
    "xet-read-token": "xet-token",
}


class HubCall(NamedTuple):
    """One request to the Hub, as the routes say: ``kind`` of ``repo_type`` ``repo_id`` at ``revision``."""

    kind: Kind
    repo_type: str
    repo_id: str
    revision: str
    #: The repo path a file or tree request names ("" for none).
    path: str = ""
    #: A tree request for the whole subtree (``recursive=true``), not only the folder's own entries.
    recursive: bool = False

    @property
    def label(self) -> str:
        """``org/name@main``, ``datasets/org/name@main``."""
        return snapshot_label(self.repo_id, self.repo_type, self.revision)


@functools.lru_cache(maxsize=1024)
def parse(url: str, endpoint: str) -> HubCall | None:
    """The Hub call ``url`` makes, or None when it is not a request to ``endpoint`` about a repo.

    Memoized: a session endpoint parses each file's URL on every load a child makes."""
    split = _under(url, endpoint)
    if split is None:
        return None
    parts = split.path.lstrip("/").split("/")
    if parts and parts[0] == "api":
        call = _api_call(parts[1:])
        recursive = parse_qs(split.query).get("recursive", [""])[-1].lower() in ("1", "true")
        return call._replace(recursive=True) if call is not None and recursive else call
    return _file_call(parts)


def refs_of(url: str, endpoint: str) -> tuple[str, str] | None:
    """``(repo_type, repo_id)`` whose branches and tags ``url`` lists (``/api/models/org/name/refs``), or None.

    It names no revision: llama.cpp's ``-hf`` resolves ``main`` with it, where huggingface_hub asks
    ``/revision/main``.
    """
    split = _under(url, endpoint)
    if split is None:
        return None
    parts = split.path.strip("/").split("/")
    if len(parts) not in (4, 5) or parts[0] != "api" or parts[1] not in _TYPES or parts[-1] != "refs":
        return None
    return _TYPES[parts[1]], "/".join(unquote(p) for p in parts[2:-1])


def _under(url: str, endpoint: str) -> SplitResult | None:
    """``url``'s path and query past ``endpoint``, or None when it is not a URL of that endpoint."""
    base = endpoint.rstrip("/")
    if not url.startswith(base + "/"):
        return None
    return urlsplit(url[len(base) :])


def _api_call(parts: list[str]) -> HubCall | None:
    if len(parts) < 2 or parts[0] not in _TYPES:
        return None
    repo_type = _TYPES[parts[0]]
    rest = parts[1:]
    for index, segment in enumerate(rest):
        kind = _API_ROUTES.get(segment)
        if kind is not None and 1 <= index <= 2 and index + 1 < len(rest):
            repo_id = "/".join(rest[:index])
            revision = unquote(rest[index + 1])
            path = "/".join(unquote(p) for p in rest[index + 2 :])
            return HubCall(kind, repo_type, repo_id, revision, path)
    if 1 <= len(rest) <= 2:
        return HubCall("info", repo_type, "/".join(rest), "main")
    return None


def _file_call(parts: list[str]) -> HubCall | None:
    repo_type = "model"
    if parts and parts[0] in _PREFIXES:
        repo_type = _PREFIXES[parts[0]]
        parts = parts[1:]
    try:
        at = parts.index("resolve", 1)
    except ValueError:
        return None
    if at > 2 or len(parts) < at + 3:
        return None
    repo_id = "/".join(parts[:at])
    revision = unquote(parts[at + 1])
    path = "/".join(unquote(p) for p in parts[at + 2 :])
    return HubCall("file", repo_type, repo_id, revision, path)


def with_revision(url: str, call: HubCall, commit: str) -> str:
    """``url`` with its revision segment replaced by ``commit`` (a pinned branch asked at its commit)."""
    quoted = quote(call.revision, safe="")
    parts = urlsplit(url)
    if call.kind == "info":
        return parts._replace(path=parts.path.rstrip("/") + f"/revision/{commit}").geturl()
    marker = {
        "revision": "/revision/",
        "tree": "/tree/",
        "paths-info": "/paths-info/",
        "xet-token": "/xet-read-token/",
        "file": "/resolve/",
    }.get(call.kind)
    if marker is None:
        return url
    path = parts.path
    for spelled in (quoted, call.revision):
        needle = f"/{call.repo_id}{marker}{spelled}"
        at = path.find(needle)
        if at >= 0:
            start = at + len(needle) - len(spelled)
            path = path[:start] + commit + path[start + len(spelled) :]
            return parts._replace(path=path).geturl()
    return url


__all__ = ["HubCall", "Kind", "parse", "refs_of", "with_revision"]
