"""The local Hub's answers: one reply per request on each origin (the Hub, its CDN, the CAS)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode

from ..request import REPO_TYPES, is_commit, repo_type_of_prefix
from ._cas import XetStore, is_xet_hash
from ._repos import Blob, Commit, Repo, Repos, resolve_path

__all__ = ["HubSettings", "Origin", "Reply", "Routes", "carries_file_bytes", "error_reply"]

Origin = Literal["hub", "cdn", "cas"]
_API_PLURALS = {f"{repo_type}s": repo_type for repo_type in REPO_TYPES}  # /api/{models|datasets|spaces}/...
_API_ACTIONS = ("revision", "tree", "paths-info", "refs", "xet-read-token")
_INVALID_CREDENTIALS = "Invalid credentials in Authorization header"


class HubSettings(Protocol):
    """What the routes read of the hub (``LocalHub``'s public attributes), live: tests change them."""

    token: str
    tree_page_size: int
    xet: bool
    xet_token_ttl: float
    cas_v2: bool

    @property
    def url(self) -> str: ...

    @property
    def cas_url(self) -> str: ...

    @property
    def cdn_url(self) -> str: ...


@dataclass(frozen=True)
class _CasToken:
    """What a CAS token was handed out for, and until when (unix seconds) it is valid."""

    repo_type: str
    repo_id: str
    commit: str
    expires: int


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # Where a ``corrupt`` fault flips a byte of ``body`` (None: its middle byte). Asked only then.
    flip_at: Callable[[], int] | None = None

    def corrupted(self) -> Reply:
        """This reply with one byte of its body flipped, same length."""
        at = len(self.body) // 2 if self.flip_at is None else self.flip_at()
        body = self.body[:at] + bytes([self.body[at] ^ 0xFF]) + self.body[at + 1 :]
        return dataclasses.replace(self, body=body, flip_at=None)


def json_reply(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return Reply(status, json.dumps(payload).encode(), all_headers)


def error_reply(status: int, code: str | None, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    extra = {"X-Error-Message": message, **(headers or {})}
    if code is not None:
        extra["X-Error-Code"] = code
    return json_reply({"error": message}, status, extra)


class Routes:
    """Answers requests from the hub's repos and Xet store; keeps the CAS tokens it hands out."""

    def __init__(self, hub: HubSettings, repos: Repos, store: XetStore) -> None:
        self.hub = hub
        self.repos = repos
        self.store = store
        self._cas_tokens: dict[str, _CasToken] = {}
        self._xorb_keys: dict[str, tuple[str, str, str, str]] = {}  # key -> repo type, id, commit, xet hash

    def answer(
        self, origin: Origin, method: str, raw_path: str, query: str, headers: Mapping[str, str], payload: bytes
    ) -> Reply:
        """The reply to one request on ``origin`` (``raw_path`` still percent-encoded, header names lower-case)."""
        if origin == "cdn":
            return self._route_cdn(method, raw_path, headers)
        if origin == "cas":
            return self._route_cas(method, raw_path, query, headers)
        auth = headers.get("authorization")
        if auth is not None and auth != f"Bearer {self.hub.token}":
            return error_reply(401, None, _INVALID_CREDENTIALS)
        authorized = auth is not None
        segments = raw_path.split("/")[1:]
        if segments[:2] == ["api", "whoami-v2"] and len(segments) == 2:
            if not authorized:
                return error_reply(401, None, _INVALID_CREDENTIALS)
            return json_reply({"type": "user", "name": "local-hub-user", "orgs": []})
        if len(segments) >= 3 and segments[0] == "api" and segments[1] in _API_PLURALS:
            repo_type = _API_PLURALS[segments[1]]
            return self._route_api(method, repo_type, segments[2:], query, authorized, payload)
        repo_type = "model"
        prefixed = repo_type_of_prefix(segments[0]) if segments else None
        if prefixed is not None:
            repo_type = prefixed
            segments = segments[1:]
        split = _split_repo(segments, ("resolve",))
        if split is not None and method in ("GET", "HEAD"):
            repo_id, _, rest = split
            return self._resolve(repo_type, repo_id, rest, headers, authorized)
        return error_reply(404, None, "Not Found")

    # -- Xet: the CDN, the token route and the CAS ---------------------------------------

    def aliases(self, origin: Origin, raw_path: str, query: str, headers: Mapping[str, str]) -> tuple[str, ...]:
        """The repo file(s) a CDN or CAS request is for, as ``/{prefix}{repo}/resolve/{commit}/{path}``."""
        if origin == "cdn":
            target = _cdn_target(raw_path)
            return () if target is None else (resolve_path(*target),)
        if origin != "cas":
            return ()
        segments = raw_path.split("/")[1:]
        if len(segments) == 3 and segments[0] in ("v1", "v2") and segments[1] == "reconstructions":
            token = self._cas_tokens.get(_bearer(headers) or "")
            if token is None:
                return ()
            return self.repos.paths_with_xet_hash(token.repo_type, token.repo_id, token.commit, segments[2])
        if len(segments) == 3 and segments[0] == "xorbs":
            scope = self._xorb_keys.get(dict(parse_qsl(query)).get("sig", ""))
            return () if scope is None else self.repos.paths_with_xet_hash(*scope)
        return ()

    def _cdn_location(self, repo_type: str, repo_id: str, commit: str, path: str) -> str:
        """The "presigned" CDN URL of a file: it names repo type, repo, commit and path."""
        return f"{self.hub.cdn_url}/cdn/{repo_type}s/{quote(repo_id, safe='')}/{commit}/{quote(path)}"

    def _route_cdn(self, method: str, raw_path: str, headers: Mapping[str, str]) -> Reply:
        if method not in ("GET", "HEAD"):
            return error_reply(405, None, f"Method {method} not allowed")
        target = _cdn_target(raw_path)
        blob = None if target is None else self.repos.file_at(*target)
        if blob is None:
            return error_reply(404, None, "NoSuchKey: the specified key does not exist")
        base = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", "ETag": f'"{blob.etag}"'}
        return _file_reply(blob.data, headers.get("range"), base)

    def _xet_read_token(self, repo: Repo, commit: Commit) -> Reply:
        token = "xet_" + secrets.token_urlsafe(24)
        # An integer expiry, as the Hub's: the CAS honours a token until that second.
        expires = math.ceil(time.time() + self.hub.xet_token_ttl)
        self._cas_tokens[token] = _CasToken(repo.repo_type, repo.repo_id, commit.sha, expires)
        cas_url = self.hub.cas_url
        headers = {"X-Xet-Cas-Url": cas_url, "X-Xet-Access-Token": token, "X-Xet-Token-Expiration": str(expires)}
        return json_reply({"accessToken": token, "exp": expires, "casUrl": cas_url}, headers=headers)

    def _xet_redirect(self, repo: Repo, commit: Commit, path: str, blob: Blob) -> Reply:
        """What huggingface.co answers on ``/resolve`` for a Xet-backed file: 302 to the CDN, metadata on the 302."""
        assert blob.xet_hash is not None and blob.sha256 is not None
        refresh = f"{self.hub.url}/api/{repo.repo_type}s/{repo.repo_id}/xet-read-token/{commit.sha}"
        reconstruction = f"{self.hub.cas_url}/v1/reconstructions/{blob.xet_hash}"
        headers = {
            "X-Repo-Commit": commit.sha,
            "ETag": f'"{blob.sha256}"',
            "X-Linked-Etag": f'"{blob.sha256}"',
            "X-Linked-Size": str(len(blob.data)),
            "X-Xet-Hash": blob.xet_hash,
            "Link": f'<{refresh}>; rel="xet-auth", <{reconstruction}>; rel="xet-reconstruction-info"',
            "Location": self._cdn_location(repo.repo_type, repo.repo_id, commit.sha, path),
        }
        return Reply(302, b"", headers)

    def _route_cas(self, method: str, raw_path: str, query: str, headers: Mapping[str, str]) -> Reply:
        if method not in ("GET", "HEAD"):
            return error_reply(404, None, "Not Found")
        segments = raw_path.split("/")[1:]
        if len(segments) == 3 and segments[0] in ("v1", "v2") and segments[1] == "reconstructions":
            return self._reconstruction(int(segments[0][1]), segments[2], headers)
        if len(segments) == 3 and segments[:2] == ["xorbs", "default"]:
            return self._xorb(segments[2], headers)
        return error_reply(404, None, "Not Found")

    def _reconstruction(self, version: int, xet_hash: str, headers: Mapping[str, str]) -> Reply:
        token = self._cas_tokens.get(_bearer(headers) or "")
        if token is None:
            return error_reply(401, None, _INVALID_CREDENTIALS)
        if time.time() >= token.expires:
            return error_reply(401, None, "CAS token expired: get a new one from the xet-read-token route")
        if version == 2 and not self.hub.cas_v2:
            return error_reply(404, None, "Not Found")
        known = is_xet_hash(xet_hash) and self.repos.has_xet_hash(token.repo_type, token.repo_id, xet_hash)
        if not known or not self.store.has(xet_hash):
            return error_reply(404, None, f"no file {xet_hash} in {token.repo_type} {token.repo_id}")
        size = self.store.size(xet_hash)
        wanted = headers.get("range")
        span = None if wanted is None else _parse_range(wanted, size)
        if wanted is not None and span is None:
            return error_reply(416, None, f"Range not satisfiable: {wanted}", {"Content-Range": f"bytes */{size}"})
        key = hashlib.sha256("\0".join((token.repo_type, token.repo_id, token.commit, xet_hash)).encode()).hexdigest()
        self._xorb_keys[key[:32]] = (token.repo_type, token.repo_id, token.commit, xet_hash)

        def xorb_url(xorb: str, first: int, last: int) -> str:
            return f"{self.hub.cas_url}/xorbs/default/{xorb}?sig={key[:32]}"

        return json_reply(self.store.reconstruction(xet_hash, span, xorb_url, version))

    def _xorb(self, xorb: str, headers: Mapping[str, str]) -> Reply:
        # The "presigned" xorb URL: no token is checked, as with the real CAS's storage URLs.
        size = self.store.xorb_size(xorb)
        if size is None:
            return error_reply(404, None, "NoSuchKey: the specified key does not exist")
        base = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        wanted = headers.get("range")
        span = (0, size - 1) if wanted is None else _parse_range(wanted, size)
        if span is None:
            return error_reply(416, None, f"Range not satisfiable: {wanted}", {"Content-Range": f"bytes */{size}"})
        data = self.store.read_xorb(xorb, *span)
        # A flipped byte in a chunk's header or in LZ4 control bytes makes hf_xet fail, not keep it.
        flip_at = functools.partial(self.store.flip_offset, xorb, *span)
        if wanted is None:
            return Reply(200, data, base, flip_at)
        return Reply(206, data, {**base, "Content-Range": f"bytes {span[0]}-{span[1]}/{size}"}, flip_at)

    # -- the Hub API -----------------------------------------------------------------------

    def _repo(self, repo_type: str, repo_id: str, authorized: bool) -> Repo | Reply:
        repo = self.repos.get(repo_type, repo_id)
        if repo is None or (repo.private and not authorized):
            return error_reply(401, "RepoNotFound", "Repository not found")
        return repo

    def _route_api(
        self, method: str, repo_type: str, segments: list[str], query: str, authorized: bool, payload: bytes
    ) -> Reply:
        split = _split_repo(segments, _API_ACTIONS)
        if split is None:
            if len(segments) not in (1, 2) or method not in ("GET", "HEAD"):
                return error_reply(404, None, "Not Found")
            split = ("/".join(unquote(s) for s in segments), "revision", ["main"])
        repo_id, action, rest = split
        allowed = ("POST",) if action == "paths-info" else ("GET", "HEAD")
        if method not in allowed:
            return error_reply(405, None, f"Method {method} not allowed")
        with self.repos.lock:
            repo = self._repo(repo_type, repo_id, authorized)
            if isinstance(repo, Reply):
                return repo
            if action == "refs":
                return self._refs(repo)
            if action == "revision":
                revision = "/".join(unquote(s) for s in rest)
                commit = repo.resolve(revision)
                if commit is None:
                    return error_reply(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return self._info(repo, commit, dict(parse_qsl(query)))
            if action == "xet-read-token" and not self.hub.xet:
                return error_reply(404, None, "Not Found")
            if action == "xet-read-token" and repo.gated and not authorized:
                return _gated(repo)
            found = _take_revision(repo, rest)
            if isinstance(found, Reply):
                return found
            commit, rest = found
            if action == "tree":
                return self._tree(repo, commit, "/".join(unquote(s) for s in rest), query)
            if action == "xet-read-token":
                return self._xet_read_token(repo, commit)
            return self._paths_info(commit, payload)

    def _info(self, repo: Repo, commit: Commit, params: Mapping[str, str]) -> Reply:
        blobs = params.get("blobs", "").lower() in ("1", "true")
        siblings: list[dict[str, Any]] = []
        for path in sorted(commit.files):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                blob = commit.files[path]
                sibling.update(size=len(blob.data), blobId=blob.oid)
                if blob.sha256 is not None:
                    lfs = {"sha256": blob.sha256, "size": len(blob.data), "pointerSize": blob.pointer_size}
                    sibling["lfs"] = lfs
            siblings.append(sibling)
        author = repo.repo_id.split("/")[0] if "/" in repo.repo_id else None
        info: dict[str, Any] = {
            "_id": hashlib.sha1(f"{repo.repo_type}/{repo.repo_id}".encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "author": author,
            "sha": commit.sha,
            "lastModified": commit.date,
            "createdAt": repo.created_at,
            "private": repo.private,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
        }
        if repo.repo_type == "model":
            info["modelId"] = repo.repo_id
        elif repo.repo_type == "space":
            info["sdk"] = "static"
        return json_reply(info)

    def _refs(self, repo: Repo) -> Reply:
        def ref(name: str, full: str, sha: str) -> dict[str, str]:
            return {"name": name, "ref": full, "targetCommit": sha}

        branches = sorted(repo.branches.items())
        return json_reply(
            {
                "branches": [ref(n, f"refs/heads/{n}", s) for n, s in branches if not n.startswith("refs/")],
                "converts": [ref(n, n, s) for n, s in branches if n.startswith("refs/convert/")],
                "tags": [ref(n, f"refs/tags/{n}", s) for n, s in sorted(repo.tags.items())],
                "pullRequests": [ref(n, n, s) for n, s in branches if n.startswith("refs/pr/")],
            }
        )

    def _entries(self, commit: Commit) -> dict[str, dict[str, Any]]:
        entries = {path: blob.tree_entry(path) for path, blob in commit.files.items()}
        for path, oid in commit.dirs.items():
            entries[path] = {"type": "directory", "oid": oid, "size": 0, "path": path}
        entries.update({path: dict(raw) for path, (raw, _) in commit.raw.items()})
        return entries

    def _tree(self, repo: Repo, commit: Commit, folder: str, query: str) -> Reply:
        params = parse_qsl(query, keep_blank_values=True)
        options = dict(params)
        recursive = options.get("recursive", "").lower() in ("1", "true")
        if folder and folder not in commit.dirs:
            message = f"{folder} does not exist on {commit.sha}"
            return error_reply(404, "EntryNotFound", message, {"X-Repo-Commit": commit.sha})
        prefix = f"{folder}/" if folder else ""
        listing = []
        for path, entry in sorted(self._entries(commit).items()):
            if path in commit.raw:
                if folder:
                    continue  # hostile entries show at the top level only
            elif not path.startswith(prefix) or (not recursive and "/" in path[len(prefix) :]):
                continue
            listing.append(entry)
        cursor = int(options.get("cursor") or 0)
        page = listing[cursor : cursor + self.hub.tree_page_size]
        headers = {"X-Repo-Commit": commit.sha}
        if cursor + self.hub.tree_page_size < len(listing):
            next_params = [(k, v) for k, v in params if k != "cursor"]
            next_params.append(("cursor", str(cursor + self.hub.tree_page_size)))
            base = "/api/{}s/{}/tree/{}".format(repo.repo_type, repo.repo_id, quote(commit.sha, safe=""))
            if folder:
                base += "/" + quote(folder)
            headers["Link"] = f'<{self.hub.url}{base}?{urlencode(next_params)}>; rel="next"'
        return json_reply(page, headers=headers)

    def _paths_info(self, commit: Commit, payload: bytes) -> Reply:
        paths: list[str]
        try:
            parsed = json.loads(payload) if payload.lstrip().startswith(b"{") else None
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            raw_paths = parsed.get("paths", [])
            paths = [raw_paths] if isinstance(raw_paths, str) else [str(p) for p in raw_paths]
        else:
            paths = parse_qs(payload.decode(errors="replace")).get("paths", [])
        entries = self._entries(commit)
        return json_reply([entries[p] for p in dict.fromkeys(paths) if p in entries])

    def _resolve(
        self, repo_type: str, repo_id: str, rest: list[str], headers: Mapping[str, str], authorized: bool
    ) -> Reply:
        with self.repos.lock:
            repo = self._repo(repo_type, repo_id, authorized)
            if isinstance(repo, Reply):
                return repo
            if repo.gated and not authorized:
                return _gated(repo)
            found = _take_revision(repo, rest)
            if isinstance(found, Reply):
                return found
            commit, rest = found
            path = "/".join(unquote(s) for s in rest)
            blob = commit.files.get(path)
            raw = commit.raw.get(path)
        commit_header = {"X-Repo-Commit": commit.sha}
        if blob is not None and blob.xet_hash is not None:
            return self._xet_redirect(repo, commit, path, blob)
        if blob is not None:
            data, etag, linked = blob.data, blob.etag, blob.sha256 is not None
        elif raw is not None:
            entry, data = raw
            linked = isinstance(entry.get("lfs"), dict)
            etag = str(entry["lfs"].get("oid") if linked else entry.get("oid"))
        else:
            return error_reply(404, "EntryNotFound", f"{path} does not exist on {commit.sha}", commit_header)
        reply_headers = {
            **commit_header,
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{etag}"',
        }
        if linked:
            reply_headers["X-Linked-Etag"] = f'"{etag}"'
            reply_headers["X-Linked-Size"] = str(len(data))
        return _file_reply(data, headers.get("range"), reply_headers)


def carries_file_bytes(origin: Origin, raw_path: str) -> bool:
    """Whether a 2xx body answering ``raw_path`` on ``origin`` is a repo file's bytes, or a range of them.

    Not so for a CAS reconstruction: JSON that says which xorb ranges hold them.
    """
    segments = raw_path.split("/")[1:]
    return not (origin == "cas" and len(segments) == 3 and segments[1] == "reconstructions")


def _file_reply(data: bytes, wanted: str | None, headers: Mapping[str, str]) -> Reply:
    """File bytes, or the ``Range`` of them asked for (206; 416 when unsatisfiable)."""
    if wanted is None:
        return Reply(200, data, dict(headers))
    span = _parse_range(wanted, len(data))
    if span is None:
        unsatisfiable = {"Content-Range": f"bytes */{len(data)}"}
        return error_reply(416, None, f"Range not satisfiable: {wanted}", unsatisfiable)
    first, last = span
    return Reply(206, data[first : last + 1], {**headers, "Content-Range": f"bytes {first}-{last}/{len(data)}"})


def _gated(repo: Repo) -> Reply:
    message = (
        f"Access to {repo.repo_type} {repo.repo_id} is restricted. You must have access to it and be "
        "authenticated to access it. Please log in."
    )
    return error_reply(403, "GatedRepo", message)


def _cdn_target(raw_path: str) -> tuple[str, str, str, str] | None:
    """``(repo_type, repo_id, commit, path)`` named by a CDN path ``/cdn/{type}s/{repo}/{commit}/{path}``.

    The repo id is one encoded segment as :meth:`Routes._cdn_location` writes it, or two when the
    client decoded its ``%2F`` before following the redirect (llama.cpp's HTTP client does).
    """
    segments = raw_path.split("/")[1:]
    if len(segments) < 5 or segments[0] != "cdn" or segments[1] not in _API_PLURALS:
        return None
    at = next((i for i in (3, 4) if i < len(segments) - 1 and is_commit(segments[i].lower())), None)
    if at is None:
        return None
    repo_id = "/".join(unquote(s) for s in segments[2:at])
    return _API_PLURALS[segments[1]], repo_id, segments[at], "/".join(unquote(s) for s in segments[at + 1 :])


def _bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def _split_repo(segments: list[str], actions: tuple[str, ...]) -> tuple[str, str, list[str]] | None:
    """``(repo_id, action, rest)`` from raw path segments ``org/name/action/...`` or ``name/action/...``."""
    if len(segments) >= 3 and segments[2] in actions:
        return f"{unquote(segments[0])}/{unquote(segments[1])}", segments[2], segments[3:]
    if len(segments) >= 2 and segments[1] in actions:
        return unquote(segments[0]), segments[1], segments[2:]
    return None


def _take_revision(repo: Repo, rest: list[str]) -> tuple[Commit, list[str]] | Reply:
    """The commit named by the first raw segment(s) of ``rest`` and what follows it."""
    if not rest or not rest[0]:
        return error_reply(404, "RevisionNotFound", "Invalid rev id: (empty)")
    candidates = [(unquote(rest[0]), 1)]
    if rest[0] == "refs" and len(rest) >= 3:  # an unencoded refs/pr/1 or refs/convert/parquet
        candidates.append(("/".join(unquote(s) for s in rest[:3]), 3))
    for revision, used in candidates:
        commit = repo.resolve(revision)
        if commit is not None:
            return commit, rest[used:]
    return error_reply(404, "RevisionNotFound", f"Invalid rev id: {unquote(rest[0])}")


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """First and last byte of a single ``bytes=`` range, or None if unsatisfiable or malformed."""
    unit, _, spec = header.partition("=")
    if unit.strip() != "bytes" or "," in spec:
        return None
    start_text, _, end_text = spec.strip().partition("-")
    try:
        if not start_text:
            suffix = int(end_text)
            return (max(0, size - suffix), size - 1) if suffix > 0 and size > 0 else None
        start = int(start_text)
        end = int(end_text) if end_text else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return None
    return start, min(end, size - 1)
