"""A local Hugging Face Hub double: real HTTP servers with git-like repos, Xet storage and a fault plan.

The unmodified ``huggingface_hub`` client (1.x and 2.x) and hf_xet talk to it for
``snapshot_download``, ``hf_hub_download``, ``HfApi.repo_info``/``model_info``/``dataset_info``/
``space_info``, ``list_repo_tree`` (paginated with ``Link: rel="next"``), ``get_paths_info``,
``list_repo_refs``, ``file_exists``, ``revision_exists`` and ``whoami``. No pytest needed::

    with LocalHub() as hub, hub.configure_client(tmp / "cache"):
        commit = hub.add_repo("org/tiny", {"config.json": "{}", "model.safetensors": b"..."})
        hub.fail("*model.safetensors", 503, times=2)
        snapshot_download("org/tiny")

Storage, as on huggingface.co: with ``xet`` (the default when hf_xet is importable) every LFS
file is Xet-backed. Its bytes are uploaded by hf_xet's own upload code into a ``local://`` CAS
folder the hub owns (removed on ``stop``), so xet hashes, shards and xorbs are real, and three
origins serve: the Hub (127.0.0.1), the CAS (127.0.0.1, another port) and a CDN on another
loopback host (127.0.0.2), as the real CDN is another host. An unpatched client then downloads
LFS files through hf_xet, or over plain HTTP from the CDN when ``HF_HUB_DISABLE_XET=1``. With
``LocalHub(xet=False)`` only the Hub runs and LFS files are served at ``/resolve`` itself.

Hub routes (``{type}`` is ``models``, ``datasets`` or ``spaces``; ``{prefix}`` is empty,
``datasets/`` or ``spaces/``; a revision is a branch, a tag or a 40-hex commit, percent-encoded
when it holds a slash, e.g. ``refs%2Fpr%2F1``):

- ``GET /api/{type}/{repo}`` and ``GET /api/{type}/{repo}/revision/{rev}``: repo info (``sha``,
  ``siblings``, ``private``, ``gated``; ``?blobs=true`` adds sizes and LFS data).
- ``GET /api/{type}/{repo}/tree/{rev}[/{dir}]?recursive=&cursor=``: the listing, ``tree_page_size``
  entries per page; Xet-backed entries carry ``xetHash``.
- ``POST /api/{type}/{repo}/paths-info/{rev}``: listing entries of the given ``paths`` (form or JSON).
- ``GET /api/{type}/{repo}/refs``: branches, tags and ``refs/pr/*`` branches as pull requests.
- ``GET|HEAD /{prefix}{repo}/resolve/{rev}/{path}``: a Xet-backed file answers 302 to its CDN URL
  with ``X-Xet-Hash``, ``ETag``, ``X-Linked-Etag``, ``X-Linked-Size``, ``X-Repo-Commit``,
  ``Location`` and ``Link: <{hub}/api/{type}/{repo}/xet-read-token/{commit}>; rel="xet-auth"``
  (the client reads the metadata from the 302 and does not follow it to another host). Any
  other file is served in place: ``Range`` honoured (206), ``ETag``, ``X-Repo-Commit``, and for
  LFS files ``X-Linked-Etag``/``X-Linked-Size``.
- ``GET /api/{type}/{repo}/xet-read-token/{rev}`` (Xet only): a CAS token for that commit, as
  headers ``X-Xet-Cas-Url``, ``X-Xet-Access-Token``, ``X-Xet-Token-Expiration`` (read by
  huggingface_hub) and as JSON ``{"accessToken", "exp", "casUrl"}`` (read by hf_xet when it
  refreshes). Tokens expire after ``xet_token_ttl`` seconds.
- ``GET /api/whoami-v2``: a user for the hub's token, else 401.
- Anything else (e.g. the telemetry route ``/api/agent-harnesses``): 404.

CDN routes: ``GET|HEAD /cdn/{type}/{repo, percent-encoded}/{commit}/{path}``, the file's bytes
with ``Range`` honoured; "presigned": no token is checked. CAS routes:
``GET /v2/reconstructions/{xet_hash}`` and ``/v1/...`` (``Range`` honoured; ``cas_v2 = False``
makes ``/v2`` answer 404 so the client falls back to ``/v1``), which need a bearer token handed
out by the token route for a repo holding that file (unknown: 401; expired: 401, which hf_xet
does not retry), and ranged ``GET /xorbs/default/{xorb_hash}?sig=...`` with no token.

Access control on the Hub: a request whose ``Authorization`` is not ``Bearer <hub token>`` gets
401 + ``X-Error-Message: Invalid credentials in Authorization header`` on every route, as the
Hub answers an invalid or expired token; without ``Authorization``, an unknown or private repo
answers 401 + ``X-Error-Code: RepoNotFound`` everywhere; a gated repo answers 403 +
``X-Error-Code: GatedRepo`` on ``resolve`` and ``xet-read-token`` (its info and listings stay
public, as on the Hub); an unknown revision 404 ``RevisionNotFound``; an unknown file or folder
404 ``EntryNotFound`` (with ``X-Repo-Commit``, so the client caches the miss).

Fault plan and counters, every origin: a request matches a pattern (``fnmatch.fnmatchcase``) by
its own percent-decoded path without query (the form ``requests`` records), and a CDN request,
a CAS reconstruction or a xorb fetch for a repo file also by that file's
``/{prefix}{repo}/resolve/{commit}/{path}`` (CAS tokens and the key in xorb URLs name the repo
and commit), so ``fail("*model.safetensors", 503)`` fails the file whichever way the client
fetches it. Each request first looks for a ``fail`` entry (HEAD included); one that fails gets
no other fault. Otherwise a 2xx response with a non-empty body (not HEAD, not an error answer)
looks for a ``cut``/``corrupt`` entry. Within each kind the first entry added that matches and
is not used up is used, and counts one use. ``rate_limit`` is looked at before either: a request
it refuses gets a 429 like huggingface.co's and no other fault. ``slow`` paces the bodies of every
origin together. Each record of ``counters()`` carries the time its request arrived (``at``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import secrets
import shutil
import socket
import string
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol
from urllib.parse import parse_qs, parse_qsl, quote, unquote, urlencode, urlsplit

from ._cas import XetStore, import_hf_xet, is_xet_hash
from ._counters import Entry, HubCounters, RequestLog, ServedRequest
from ._faults import Fault, FaultPlan, Pacer, RateLimit

__all__ = [
    "DEFAULT_TREE_PAGE_SIZE",
    "DEFAULT_XET_TOKEN_TTL",
    "LFS_SUFFIXES",
    "LFS_THRESHOLD",
    "ClientPatches",
    "HubCounters",
    "LocalHub",
    "ServedRequest",
    "client_patches",
    "close_client_session",
    "git_blob_sha1",
    "is_lfs",
]

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".h5", ".msgpack", ".ckpt")
"""Files with these suffixes are stored as LFS, whatever their size."""

LFS_THRESHOLD = 1024 * 1024
"""Files of this many bytes or more are stored as LFS."""

DEFAULT_TREE_PAGE_SIZE = 10
"""Tree listing entries per page: small, so that tests exercise pagination (the Hub uses 1000)."""

DEFAULT_XET_TOKEN_TTL = 3600.0
"""Seconds a CAS token handed out by ``xet-read-token`` stays valid."""

REPO_TYPES = ("model", "dataset", "space")
_API_PLURALS = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIXES = {"datasets": "dataset", "spaces": "space"}
_API_ACTIONS = ("revision", "tree", "paths-info", "refs", "xet-read-token")
# The CDN is another loopback host, as the real one is another host: huggingface_hub 1.x follows a
# redirect to the same host on another port, which it never does for huggingface.co's CDN.
_CDN_HOST = "127.0.0.2"
_LOOPBACK_HOSTS = ("127.0.0.1", _CDN_HOST, "localhost")
_INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
_FIRST_COMMIT_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z; each commit one second later


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a blob holding ``data`` (what the Hub calls a small file's oid/ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str, size: int) -> bool:
    """Whether the local Hub stores ``path`` of ``size`` bytes as an LFS file."""
    return path.lower().endswith(LFS_SUFFIXES) or size >= LFS_THRESHOLD


@dataclass(frozen=True)
class _Blob:
    data: bytes
    oid: str  # git sha1 of what git stores: the data, or the LFS pointer
    sha256: str | None  # set for LFS files
    pointer_size: int | None
    xet_hash: str | None = None  # set for LFS files when the hub serves Xet storage

    @classmethod
    def of(cls, path: str, data: bytes) -> _Blob:
        if not is_lfs(path, len(data)):
            return cls(data, git_blob_sha1(data), None, None)
        sha256 = hashlib.sha256(data).hexdigest()
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {len(data)}\n"
        pointer_bytes = pointer.encode()
        return cls(data, git_blob_sha1(pointer_bytes), sha256, len(pointer_bytes))

    @property
    def etag(self) -> str:
        return self.sha256 or self.oid

    def tree_entry(self, path: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.oid, "size": len(self.data), "path": path}
        if self.sha256 is not None:
            entry["lfs"] = {"oid": self.sha256, "size": len(self.data), "pointerSize": self.pointer_size}
        if self.xet_hash is not None:
            entry["xetHash"] = self.xet_hash
        return entry


@dataclass
class _Commit:
    sha: str
    files: dict[str, _Blob]
    dirs: dict[str, str]  # folder path -> git tree oid
    date: str
    # Listing entries served beside the real files (hostile paths for security tests).
    raw: dict[str, tuple[dict[str, Any], bytes]] = field(default_factory=dict)


@dataclass
class _Repo:
    repo_type: str
    repo_id: str
    private: bool
    gated: bool
    created_at: str
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, _Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> _Commit | None:
        sha = self.branches.get(revision) or self.tags.get(revision) or revision
        return self.commits.get(sha)


@dataclass(frozen=True)
class _CasToken:
    """What a CAS token was handed out for, and until when (unix seconds) it is valid."""

    repo_type: str
    repo_id: str
    commit: str
    expires: int


@dataclass
class _Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def _json_reply(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> _Reply:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return _Reply(status, json.dumps(payload).encode(), all_headers)


def _error(status: int, code: str | None, message: str, headers: Mapping[str, str] | None = None) -> _Reply:
    extra = {"X-Error-Message": message, **(headers or {})}
    if code is not None:
        extra["X-Error-Code"] = code
    return _json_reply({"error": message}, status, extra)


def _git_tree_oids(files: Mapping[str, _Blob]) -> tuple[str, dict[str, str]]:
    """Root tree oid and every folder's tree oid, computed the way git does."""
    children: dict[str, dict[str, tuple[bytes, bool]]] = {"": {}}
    for path in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            children.setdefault("/".join(parts[:depth]), {})
    oids: dict[str, str] = {}

    def oid_of(folder: str) -> str:
        entries: list[tuple[str, bytes, bytes]] = []  # (sort key, mode, name+oid)
        prefix = f"{folder}/" if folder else ""
        for path, blob in files.items():
            if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                name = path[len(prefix) :]
                entries.append((name, b"100644", name.encode() + b"\0" + bytes.fromhex(blob.oid)))
        for sub in children:
            if sub and sub.startswith(prefix) and "/" not in sub[len(prefix) :]:
                name = sub[len(prefix) :]
                entries.append((name + "/", b"40000", name.encode() + b"\0" + bytes.fromhex(oid_of(sub))))
        body = b"".join(mode + b" " + rest for _, mode, rest in sorted(entries))
        oid = hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()
        oids[folder] = oid
        return oid

    root = oid_of("")
    del oids[""]
    return root, oids


_Origin = Literal["hub", "cdn", "cas"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The default backlog (5) drops the SYNs of a burst of new connections (many workers resuming
    # at once), which the kernel sends again only a second later: requests then arrive late.
    request_queue_size = 128
    hub: LocalHub
    origin: _Origin


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60  # idle keep-alive connections end on their own
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.hub._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.hub._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        hub = self.server.hub
        length = int(self.headers.get("Content-Length") or 0)
        payload = self.rfile.read(length) if length > 0 else b""
        raw_path, _, query = self.path.partition("?")
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply, fault, entry = hub._exchange(self.server.origin, method, raw_path, query, headers, payload)
        body = reply.body
        sends_body = method != "HEAD"
        if fault is not None and fault.kind == "corrupt":
            middle = len(body) // 2
            body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1 :]
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if fault is not None and fault.kind == "cut":
            self.send_header("Connection", "close")
        self.end_headers()
        if not sends_body:
            return
        cut = fault is not None and fault.kind == "cut"
        to_send = body[: fault.after_bytes] if fault is not None and cut else body
        try:
            hub._write(self.wfile.write, entry, to_send)
        except OSError:
            self.close_connection = True
            return
        if cut:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)


@dataclass
class ClientPatches:
    """What points ``huggingface_hub`` at a local Hub: module attributes for this process,
    environment variables for child processes (``None`` means: unset it)."""

    attributes: list[tuple[ModuleType, str, Any]]
    environ: dict[str, str | None]

    def apply(self, patcher: _Patcher) -> None:
        """Apply every patch through ``patcher`` (a ``pytest.MonkeyPatch``), which undoes them later."""
        for module, name, value in self.attributes:
            patcher.setattr(module, name, value)
        for env_name, env_value in self.environ.items():
            if env_value is None:
                patcher.delenv(env_name, raising=False)
            else:
                patcher.setenv(env_name, env_value)


class _Patcher(Protocol):
    """The part of ``pytest.MonkeyPatch`` that ClientPatches.apply uses (no pytest import here)."""

    def setattr(self, target: object, name: str, value: object) -> None: ...

    def setenv(self, name: str, value: str) -> None: ...

    def delenv(self, name: str, raising: bool = ...) -> None: ...


def client_patches(url: str, cache_dir: Path, home_dir: Path) -> ClientPatches:
    """The patches that send ``huggingface_hub`` (this process and children) to ``url`` and ``cache_dir``.

    ``home_dir`` stands in for ``HF_HOME``: an empty token file location (so no stored token is
    found), the assets, Xet (``HF_XET_CACHE``: hf_xet's logs and staging) and bookkeeping files.
    ``huggingface_hub`` reads its environment once, at import, into ``constants`` and a few
    module-level copies: all of them are listed here (only those that exist in the installed
    version). Xet stays as the environment has it (``HF_HUB_DISABLE_XET`` is not touched); the
    loopback hosts are added to ``NO_PROXY``.
    """
    import huggingface_hub.constants as constants

    host = urlsplit(url).hostname or "127.0.0.1"
    token_path = str(home_dir / "token")
    cache = str(cache_dir)
    values: dict[str, Any] = {
        "ENDPOINT": url,
        "HUGGINGFACE_CO_URL_TEMPLATE": url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_URL_HOSTS": frozenset(getattr(constants, "HF_URL_HOSTS", frozenset())) | {host},
        "HF_HOME": str(home_dir),
        "HF_HUB_CACHE": cache,
        "HUGGINGFACE_HUB_CACHE": cache,
        "HF_ASSETS_CACHE": str(home_dir / "assets"),
        "HUGGINGFACE_ASSETS_CACHE": str(home_dir / "assets"),
        "HF_XET_CACHE": str(home_dir / "xet"),
        "HF_TOKEN_PATH": token_path,
        "HF_STORED_TOKENS_PATH": str(home_dir / "stored_tokens"),
        "CHECK_FOR_UPDATE_DONE_PATH": str(home_dir / ".check_for_update_done"),
        "CHECK_FOR_SKILL_UPDATE_DONE_PATH": str(home_dir / ".check_for_skill_update_done"),
        "AGENT_HARNESSES_PATH": str(home_dir / ".agent_harnesses.json"),
        "HF_HUB_OFFLINE": False,
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_DISABLE_UPDATE_CHECK": True,
        "_staging_mode": False,
    }
    attributes: list[tuple[ModuleType, str, Any]] = [
        (constants, name, value) for name, value in values.items() if hasattr(constants, name)
    ]
    # Module-level copies taken at import (`from ..constants import X`).
    copies = {
        "huggingface_hub.utils._cache_manager": {"HF_HUB_CACHE": cache},
        "huggingface_hub.utils._cache_assets": {"HF_ASSETS_CACHE": str(home_dir / "assets")},
        "huggingface_hub.utils._git_credential": {"ENDPOINT": url},
        "huggingface_hub.cli.auth": {"ENDPOINT": url},
    }
    for module_name, names in copies.items():
        module = sys.modules.get(module_name)
        for name, value in names.items():
            if module is not None and hasattr(module, name):
                attributes.append((module, name, value))
    http_module = sys.modules.get("huggingface_hub.utils._http")
    if http_module is not None and hasattr(http_module, "_HUB_ORIGINS"):
        origin = http_module._url_origin(url)
        attributes.append((http_module, "_HUB_ORIGINS", frozenset(http_module._HUB_ORIGINS) | {origin}))

    environ: dict[str, str | None] = {
        "HF_ENDPOINT": url,
        "HF_HUB_CACHE": cache,
        "HF_HOME": str(home_dir),
        "HF_XET_CACHE": str(home_dir / "xet"),
        "HF_TOKEN_PATH": token_path,
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_UPDATE_CHECK": "1",
    }
    # The local origins (Hub, CAS, and the CDN on another loopback host) are reached directly,
    # never through an ambient HTTP(S)_PROXY: httpx and hf_xet both read NO_PROXY.
    for no_proxy in ("NO_PROXY", "no_proxy"):
        ambient = [h.strip() for h in os.environ.get(no_proxy, "").split(",") if h.strip()]
        environ[no_proxy] = ",".join(dict.fromkeys([*ambient, host, *_LOOPBACK_HOSTS]))
    for hidden in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_OIDC_RESOURCE",
        "HF_OIDC_ID_TOKEN",
        "HUGGINGFACE_HUB_CACHE",
        "HUGGINGFACE_CO_STAGING",
        "TRANSFORMERS_OFFLINE",
        "HF_ASSETS_CACHE",
    ):
        environ[hidden] = None
    return ClientPatches(attributes, environ)


def close_client_session() -> None:
    """Drop huggingface_hub's per-process HTTP client and cached Xet tokens; the next call makes fresh ones.

    Keeps pooled keep-alive connections to a previous server from outliving it, and a Xet token of
    a previous server from being reused: the client caches tokens by refresh URL, and a new server
    on a recycled port serves the same URL (commit ids are deterministic) with another CAS.
    """
    http_module = sys.modules.get("huggingface_hub.utils._http")
    close = getattr(http_module, "close_session", None)
    if close is not None:
        close()
    xet_module = sys.modules.get("huggingface_hub.utils._xet")
    tokens = getattr(xet_module, "XET_CONNECTION_INFO_CACHE", None)
    if isinstance(tokens, dict):
        tokens.clear()


class LocalHub:
    """A Hub-compatible HTTP server on 127.0.0.1 with git-like repos, Xet storage and a fault plan.

    Start it with ``with LocalHub() as hub:`` or ``start()``/``stop()``. Repos, faults and
    counters can be changed while it serves.

    ``xet``: None (the default) serves LFS files from Xet storage when hf_xet is importable,
    as huggingface.co does; True insists (``ImportError`` without hf_xet); False serves them by
    plain HTTP at ``/resolve`` only. With Xet, two more origins run: a CAS on 127.0.0.1 (its own
    port) and a CDN on 127.0.0.2 (``localhost`` where that address cannot be bound).

    Attributes:
        token: the token that opens private and gated repos (``Authorization: Bearer <token>``).
        tree_page_size: entries per tree listing page (``Link: rel="next"`` beyond).
        xet: whether LFS files are Xet-backed.
        xet_token_ttl: seconds a CAS token stays valid (the CAS answers 401 after).
        cas_v2: set to False to make the CAS answer 404 on ``/v2/reconstructions/...``, so the
            client falls back to ``/v1/...``.
        cache_dir: the cache set by ``configure_client`` (or the ``local_hub`` fixture), else None.
    """

    def __init__(
        self,
        *,
        tree_page_size: int = DEFAULT_TREE_PAGE_SIZE,
        token: str | None = None,
        xet: bool | None = None,
        xet_token_ttl: float = DEFAULT_XET_TOKEN_TTL,
    ) -> None:
        if tree_page_size < 1:
            raise ValueError(f"tree_page_size must be at least 1, got {tree_page_size}")
        if not xet_token_ttl > 0:
            raise ValueError(f"xet_token_ttl must be positive, got {xet_token_ttl}")
        if xet is None:
            xet = _hf_xet_importable()
        elif xet:
            import_hf_xet()
        self.tree_page_size = tree_page_size
        self.token = token or "hf_" + "".join(secrets.choice(string.ascii_letters) for _ in range(34))
        self.xet = xet
        self.xet_token_ttl = xet_token_ttl
        self.cas_v2 = True
        self.cache_dir: Path | None = None
        self._repos: dict[tuple[str, str], _Repo] = {}
        self._faults = FaultPlan()
        self._log = RequestLog()
        self._lock = threading.RLock()
        self._pacer = Pacer()
        self._commit_count = 0
        self._store = XetStore()
        self._cas_tokens: dict[str, _CasToken] = {}
        self._xorb_keys: dict[str, tuple[str, str, str, str]] = {}  # key -> repo type, id, commit, xet hash
        self._servers: dict[_Origin, _Server] = {}
        self._threads: list[threading.Thread] = []
        self._cdn_host = _CDN_HOST
        self._connections: set[socket.socket] = set()

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> LocalHub:
        """Bind free ports and serve in daemon threads: the Hub, and with Xet the CAS and the CDN."""
        if self._servers:
            return self
        try:
            self._bind("hub", "127.0.0.1")
            if self.xet:
                self._bind("cas", "127.0.0.1")
                try:
                    self._bind("cdn", _CDN_HOST)
                except OSError:  # 127.0.0.2 is not configured (macOS): another host name for 127.0.0.1
                    self._cdn_host = "localhost"
                    self._bind("cdn", "127.0.0.1")
                # After a stop() the CAS folder is gone: put the Xet-backed files back.
                self._store.upload(self._xet_contents())
        except BaseException:
            self.stop()
            raise
        return self

    def _bind(self, origin: _Origin, host: str) -> None:
        server = _Server((host, 0), _Handler)
        server.hub = self
        server.origin = origin
        self._servers[origin] = server
        # A short poll keeps stop() (and so each test's teardown) quick.
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=f"local-hub-{origin}", daemon=True
        )
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Stop serving, close every open connection and remove the CAS folder."""
        servers, self._servers = list(self._servers.values()), {}
        threads, self._threads = self._threads, []
        for server in servers:
            server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for server in servers:
            server.server_close()
        for thread in threads:
            thread.join(timeout=5)
        self._store.close()

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _origin_url(self, origin: _Origin) -> str:
        server = self._servers.get(origin)
        if server is None:
            if self._servers:
                raise RuntimeError(f"the local Hub has no {origin.upper()}: it serves LFS files without Xet")
            raise RuntimeError("the local Hub is not running: call start() or use it as a context manager")
        host, port = server.server_address[:2]
        return f"http://{self._cdn_host if origin == 'cdn' else host!s}:{port}"

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return self._origin_url("hub")

    @property
    def cas_url(self) -> str:
        """The CAS origin (``http://127.0.0.1:<port>``); ``RuntimeError`` without Xet."""
        return self._origin_url("cas")

    @property
    def cdn_url(self) -> str:
        """The CDN origin (``http://127.0.0.2:<port>``); ``RuntimeError`` without Xet."""
        return self._origin_url("cdn")

    @contextlib.contextmanager
    def configure_client(self, cache_dir: str | os.PathLike[str]) -> Iterator[Path]:
        """Point ``huggingface_hub`` at this server and ``cache_dir`` until the block ends.

        Patches ``huggingface_hub.constants`` (and its module-level copies) for this process and
        sets ``HF_ENDPOINT``/``HF_HUB_CACHE``/... for child processes; offline mode and telemetry
        off; ``HF_TOKEN`` and any stored token hidden. Everything is restored on exit. Yields the
        resolved cache folder (created if missing), also kept as ``self.cache_dir``.
        """
        cache = Path(cache_dir).expanduser().resolve()
        cache.mkdir(parents=True, exist_ok=True)
        home = Path(tempfile.mkdtemp(prefix="hfsnapshot-home-"))
        patches = client_patches(self.url, cache, home)
        saved_attributes = [(module, name, getattr(module, name)) for module, name, _ in patches.attributes]
        saved_environ = {name: os.environ.get(name) for name in patches.environ}
        try:
            for module, name, value in patches.attributes:
                setattr(module, name, value)
            for name, env_value in patches.environ.items():
                _set_env(name, env_value)
            close_client_session()
            self.cache_dir = cache
            yield cache
        finally:
            for module, name, value in reversed(saved_attributes):
                setattr(module, name, value)
            for name, env_value in saved_environ.items():
                _set_env(name, env_value)
            close_client_session()
            shutil.rmtree(home, ignore_errors=True)

    # -- repos ---------------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str],
        repo_type: str = "model",
        gated: bool = False,
        private: bool = False,
        branch: str = "main",
        tag: str | None = None,
    ) -> str:
        """Commit ``files`` (the whole tree) on ``branch`` of ``repo_id``; return the 40-hex commit.

        Creates the repo on first use. ``gated``/``private`` apply to the repo from this call on;
        ``tag`` is pointed at the new commit. A new branch starts from ``main``'s head. Weight
        files (``LFS_SUFFIXES``) and files of ``LFS_THRESHOLD`` bytes or more are LFS; with
        ``xet`` their bytes are uploaded to the CAS by hf_xet (once per content, whatever the
        number of repos holding it).
        """
        _check_repo(repo_id, repo_type)
        if not branch or branch.startswith("/") or (len(branch) == 40 and _is_hex(branch)):
            raise ValueError(f"invalid branch name {branch!r}")
        blobs: dict[str, _Blob] = {}
        for path, content in files.items():
            if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
                raise ValueError(f"invalid file path {path!r} (use add_raw_tree_entry for hostile paths)")
            data = content.encode() if isinstance(content, str) else bytes(content)
            blobs[path] = _Blob.of(path, data)
        if self.xet:
            xet_hashes = self._store.upload({b.sha256: b.data for b in blobs.values() if b.sha256 is not None})
            for path, blob in blobs.items():
                if blob.sha256 is not None:
                    blobs[path] = dataclasses.replace(blob, xet_hash=xet_hashes[blob.sha256])
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            self._commit_count += 1
            timestamp = _FIRST_COMMIT_TIME + self._commit_count
            date = datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            if repo is None:
                repo = _Repo(repo_type, repo_id, private, gated, date)
                self._repos[(repo_type, repo_id)] = repo
            repo.private, repo.gated = private, gated
            parent = repo.branches.get(branch) or repo.branches.get("main")
            root, dirs = _git_tree_oids(blobs)
            header = f"tree {root}\n" + (f"parent {parent}\n" if parent else "")
            who = f"local-hub <local-hub@localhost> {timestamp} +0000"
            text = f"{header}author {who}\ncommitter {who}\n\nUpload {len(blobs)} files to {repo_id}\n"
            sha = hashlib.sha1(b"commit %d\0" % len(text.encode()) + text.encode()).hexdigest()
            repo.commits[sha] = _Commit(sha, blobs, dirs, date)
            repo.branches[branch] = sha
            if tag is not None:
                repo.tags[tag] = sha
        return sha

    def add_raw_tree_entry(
        self,
        repo_id: str,
        path: str,
        content: bytes | str = b"",
        *,
        repo_type: str = "model",
        revision: str = "main",
        entry: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Serve an extra listing entry, unchecked, in the commit ``revision`` resolves to now.

        For security tests: ``path`` may be anything (``"../x"``, ``"/abs"``, ``"a/../../b"``).
        The entry is computed from ``content`` like a real file's, then updated with ``entry``
        (to lie about ``size``, ``oid``, ``lfs``, ``type``...). It appears in tree listings
        (top level and recursive) and ``paths-info``, and ``resolve`` serves ``content`` if a
        request path reaches it. The commit id does not change. Returns the served entry.
        """
        data = content.encode() if isinstance(content, str) else bytes(content)
        served = {**_Blob.of(path, data).tree_entry(path), **(entry or {})}
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            commit = repo.resolve(revision) if repo is not None else None
            if commit is None:
                raise KeyError(f"no {repo_type} repo {repo_id!r} at revision {revision!r}")
            commit.raw[path] = (served, data)
        return dict(served)

    # -- fault plan ----------------------------------------------------------------------

    def fail(
        self,
        pattern: str,
        status: int,
        times: int = 1,
        retry_after: int | None = None,
        *,
        error_code: str | None = None,
        method: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``pattern`` with ``status``, on any origin.

        A request matches by its own path or, for a CDN or CAS request for a repo file, by that
        file's ``/{prefix}{repo}/resolve/{commit}/{path}``. HEAD requests count. Such a request
        gets no other fault. ``retry_after`` adds a ``Retry-After`` header (seconds);
        ``error_code`` an ``X-Error-Code`` header (e.g. ``"GatedRepo"``) so the client maps the
        error like the Hub's; ``method`` (e.g. ``"GET"``) restricts the entry to that method.
        """
        fault = Fault("fail", pattern, times, status, retry_after, error_code, method and method.upper())
        self._faults.add(fault)

    def cut(self, pattern: str, after_bytes: int, times: int = 1) -> None:
        """Send the full ``Content-Length``, then ``after_bytes`` of the body, then close the connection.

        Counts only 2xx responses with a body (not HEAD); the cut bytes count in ``bytes_served``.
        """
        if after_bytes < 0:
            raise ValueError(f"after_bytes must be >= 0, got {after_bytes}")
        self._faults.add(Fault("cut", pattern, times, after_bytes=after_bytes))

    def corrupt(self, pattern: str, times: int = 1) -> None:
        """Flip one byte (the middle one) of the body, same length; counts like ``cut``."""
        self._faults.add(Fault("corrupt", pattern, times))

    def slow(self, bytes_per_second: float | None) -> None:
        """Pace all bodies of every origin together at ``bytes_per_second``; ``None`` turns it off."""
        self._pacer.set_rate(_rate(bytes_per_second))

    def slow_each(self, bytes_per_second: float | None) -> None:
        """Cap each body on its own at ``bytes_per_second``, as a real link limits each stream; ``None``: off."""
        self._pacer.set_each(_rate(bytes_per_second))

    def rate_limit(self, limit: int, window: float, pattern: str = "*", *, resource: str = "api") -> None:
        """Refuse requests matching ``pattern`` beyond ``limit`` per fixed ``window`` of seconds, as the Hub does.

        A window opens at the first matching request (after the last one closed); every matching
        request counts, refused ones too. A refused request gets 429 with
        ``RateLimit: "{resource}";r=0;t=<seconds to the reset>``,
        ``RateLimit-Policy: "fixed window";"{resource}";q={limit};w={window}`` and
        ``Retry-After`` (the same seconds), and no other fault. Matching as for ``fail``; several
        limits may apply to one request. ``clear_faults`` lifts them.
        """
        self._faults.add_rate_limit(RateLimit(pattern, limit, window, resource))

    def clear_faults(self) -> None:
        """Forget every pending fail/cut/corrupt entry and rate limit, and turn pacing (``slow``, ``slow_each``) off."""
        self._faults.clear()
        self._pacer.set_rate(None)
        self._pacer.set_each(None)

    def pending_faults(self) -> list[tuple[str, str, int]]:
        """``(kind, pattern, remaining)`` of the fault entries not used up yet, in order."""
        return self._faults.pending()

    # -- counters ------------------------------------------------------------------------

    @property
    def requests(self) -> list[tuple[str, str, int]]:
        """``(method, path, status)`` per request on every origin, failed ones included, in order.

        ``path`` is the request's own path, percent-decoded, without query.
        """
        return self._log.snapshot().requests

    @property
    def bytes_served(self) -> int:
        """Body bytes written to the sockets, every origin (cut bodies count what was sent)."""
        return self._log.snapshot().bytes_served

    def counters(self) -> HubCounters:
        """A consistent copy of the counters: requests, their origin, aliases and body bytes."""
        return self._log.snapshot()

    def reset_counters(self) -> None:
        """Empty ``requests`` and ``bytes_served``."""
        self._log.clear()

    def request_count(self, pattern: str | None = None, method: str | None = None, status: int | None = None) -> int:
        """How many requests match ``pattern`` (path or alias, as the fault plan), ``method`` and ``status``."""
        return self._log.snapshot().request_count(pattern, method, status)

    def served(self, pattern: str = "*") -> int:
        """Body bytes written for the requests matching ``pattern`` (path or alias)."""
        return self._log.snapshot().served(pattern)

    # -- internals -----------------------------------------------------------------------

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _write(self, write: Callable[[bytes], object], entry: Entry, body: bytes) -> None:
        step = self._pacer.chunk_size()
        started, sent = time.monotonic(), 0
        for start in range(0, len(body), step):
            chunk = body[start : start + step]
            self._pacer.wait(len(chunk), started=started, sent=sent)
            # Counted before the write so a client that has read the bytes never sees a stale
            # counter; taken back if the socket refuses them.
            self._log.add_bytes(entry, len(chunk))
            try:
                write(chunk)
            except OSError:
                self._log.add_bytes(entry, -len(chunk))
                raise
            sent += len(chunk)

    def _exchange(
        self, origin: _Origin, method: str, raw_path: str, query: str, headers: Mapping[str, str], payload: bytes
    ) -> tuple[_Reply, Fault | None, Entry]:
        """The reply to one request, the body fault to apply to it, and its counter entry."""
        arrived = time.time()
        path = unquote(raw_path)
        aliases = self._aliases(origin, raw_path, query, headers)
        refusal = self._faults.rate_limited((path, *aliases))
        fault = None if refusal is not None else self._faults.take(method, (path, *aliases), with_body=False)
        if refusal is not None:
            reply = _error(429, None, f"local Hub: rate limit reached for {path}", refusal)
        elif fault is not None:
            extra = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            message = f"local Hub: injected {fault.status} for {path}"
            reply = _error(fault.status, fault.error_code, message, extra)
            fault = None
        else:
            try:
                reply = self._route(origin, method, raw_path, query, headers, payload)
            except Exception as exc:  # a bug here must reach the client as a 500, not a hung socket
                reply = _error(500, None, f"local Hub error: {exc!r}")
            if method != "HEAD" and reply.body and 200 <= reply.status < 300:
                fault = self._faults.take(method, (path, *aliases), with_body=True)
        entry = self._log.record(origin, method, path, reply.status, aliases, at=arrived)
        return reply, fault, entry

    def _route(
        self, origin: _Origin, method: str, raw_path: str, query: str, headers: Mapping[str, str], payload: bytes
    ) -> _Reply:
        if origin == "cdn":
            return self._route_cdn(method, raw_path, headers)
        if origin == "cas":
            return self._route_cas(method, raw_path, query, headers)
        auth = headers.get("authorization")
        if auth is not None and auth != f"Bearer {self.token}":
            return _error(401, None, _INVALID_CREDENTIALS)
        authorized = auth is not None
        segments = raw_path.split("/")[1:]
        if segments[:2] == ["api", "whoami-v2"] and len(segments) == 2:
            if not authorized:
                return _error(401, None, _INVALID_CREDENTIALS)
            return _json_reply({"type": "user", "name": "local-hub-user", "orgs": []})
        if len(segments) >= 3 and segments[0] == "api" and segments[1] in _API_PLURALS:
            repo_type = _API_PLURALS[segments[1]]
            return self._route_api(method, repo_type, segments[2:], query, authorized, payload)
        repo_type = "model"
        if segments and segments[0] in _URL_PREFIXES:
            repo_type = _URL_PREFIXES[segments[0]]
            segments = segments[1:]
        split = _split_repo(segments, ("resolve",))
        if split is not None and method in ("GET", "HEAD"):
            repo_id, _, rest = split
            return self._resolve(repo_type, repo_id, rest, headers, authorized)
        return _error(404, None, "Not Found")

    # -- Xet: the CDN, the token route and the CAS ---------------------------------------

    def _xet_contents(self) -> dict[str, bytes]:
        with self._lock:
            return {
                blob.sha256: blob.data
                for repo in self._repos.values()
                for commit in repo.commits.values()
                for blob in commit.files.values()
                if blob.sha256 is not None and blob.xet_hash is not None
            }

    def _file_at(self, repo_type: str, repo_id: str, commit: str, path: str) -> _Blob | None:
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            found = repo.commits.get(commit) if repo is not None else None
            return found.files.get(path) if found is not None else None

    def _paths_with_xet_hash(self, repo_type: str, repo_id: str, commit: str, xet_hash: str) -> tuple[str, ...]:
        """The resolve paths of the files of ``commit`` whose xet hash is ``xet_hash`` (the aliases)."""
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            found = repo.commits.get(commit) if repo is not None else None
            files = found.files.items() if found is not None else ()
            return tuple(_resolve_path(repo_type, repo_id, commit, p) for p, b in files if b.xet_hash == xet_hash)

    def _repo_has_xet_hash(self, repo_type: str, repo_id: str, xet_hash: str) -> bool:
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            commits = repo.commits.values() if repo is not None else ()
            return any(b.xet_hash == xet_hash for c in commits for b in c.files.values())

    def _aliases(self, origin: _Origin, raw_path: str, query: str, headers: Mapping[str, str]) -> tuple[str, ...]:
        """The repo file(s) a CDN or CAS request is for, as ``/{prefix}{repo}/resolve/{commit}/{path}``."""
        if origin == "cdn":
            target = _cdn_target(raw_path)
            return () if target is None else (_resolve_path(*target),)
        if origin != "cas":
            return ()
        segments = raw_path.split("/")[1:]
        if len(segments) == 3 and segments[0] in ("v1", "v2") and segments[1] == "reconstructions":
            token = self._cas_tokens.get(_bearer(headers) or "")
            if token is None:
                return ()
            return self._paths_with_xet_hash(token.repo_type, token.repo_id, token.commit, segments[2])
        if len(segments) == 3 and segments[0] == "xorbs":
            scope = self._xorb_keys.get(dict(parse_qsl(query)).get("sig", ""))
            return () if scope is None else self._paths_with_xet_hash(*scope)
        return ()

    def _cdn_location(self, repo_type: str, repo_id: str, commit: str, path: str) -> str:
        """The "presigned" CDN URL of a file: it names repo type, repo, commit and path."""
        return f"{self.cdn_url}/cdn/{repo_type}s/{quote(repo_id, safe='')}/{commit}/{quote(path)}"

    def _route_cdn(self, method: str, raw_path: str, headers: Mapping[str, str]) -> _Reply:
        if method not in ("GET", "HEAD"):
            return _error(405, None, f"Method {method} not allowed")
        target = _cdn_target(raw_path)
        blob = None if target is None else self._file_at(*target)
        if blob is None:
            return _error(404, None, "NoSuchKey: the specified key does not exist")
        base = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes", "ETag": f'"{blob.etag}"'}
        return _file_reply(blob.data, headers.get("range"), base)

    def _xet_read_token(self, repo: _Repo, commit: _Commit) -> _Reply:
        token = "xet_" + secrets.token_urlsafe(24)
        # An integer expiry, as the Hub's: the CAS honours a token until that second.
        expires = math.ceil(time.time() + self.xet_token_ttl)
        self._cas_tokens[token] = _CasToken(repo.repo_type, repo.repo_id, commit.sha, expires)
        cas_url = self.cas_url
        headers = {"X-Xet-Cas-Url": cas_url, "X-Xet-Access-Token": token, "X-Xet-Token-Expiration": str(expires)}
        return _json_reply({"accessToken": token, "exp": expires, "casUrl": cas_url}, headers=headers)

    def _xet_redirect(self, repo: _Repo, commit: _Commit, path: str, blob: _Blob) -> _Reply:
        """What huggingface.co answers on ``/resolve`` for a Xet-backed file: 302 to the CDN, metadata on the 302."""
        assert blob.xet_hash is not None and blob.sha256 is not None
        refresh = f"{self.url}/api/{repo.repo_type}s/{repo.repo_id}/xet-read-token/{commit.sha}"
        reconstruction = f"{self.cas_url}/v1/reconstructions/{blob.xet_hash}"
        headers = {
            "X-Repo-Commit": commit.sha,
            "ETag": f'"{blob.sha256}"',
            "X-Linked-Etag": f'"{blob.sha256}"',
            "X-Linked-Size": str(len(blob.data)),
            "X-Xet-Hash": blob.xet_hash,
            "Link": f'<{refresh}>; rel="xet-auth", <{reconstruction}>; rel="xet-reconstruction-info"',
            "Location": self._cdn_location(repo.repo_type, repo.repo_id, commit.sha, path),
        }
        return _Reply(302, b"", headers)

    def _route_cas(self, method: str, raw_path: str, query: str, headers: Mapping[str, str]) -> _Reply:
        if method not in ("GET", "HEAD"):
            return _error(404, None, "Not Found")
        segments = raw_path.split("/")[1:]
        if len(segments) == 3 and segments[0] in ("v1", "v2") and segments[1] == "reconstructions":
            return self._reconstruction(int(segments[0][1]), segments[2], headers)
        if len(segments) == 3 and segments[:2] == ["xorbs", "default"]:
            return self._xorb(segments[2], headers)
        return _error(404, None, "Not Found")

    def _reconstruction(self, version: int, xet_hash: str, headers: Mapping[str, str]) -> _Reply:
        token = self._cas_tokens.get(_bearer(headers) or "")
        if token is None:
            return _error(401, None, _INVALID_CREDENTIALS)
        if time.time() >= token.expires:
            return _error(401, None, "CAS token expired: get a new one from the xet-read-token route")
        if version == 2 and not self.cas_v2:
            return _error(404, None, "Not Found")
        known = is_xet_hash(xet_hash) and self._repo_has_xet_hash(token.repo_type, token.repo_id, xet_hash)
        if not known or not self._store.has(xet_hash):
            return _error(404, None, f"no file {xet_hash} in {token.repo_type} {token.repo_id}")
        size = self._store.size(xet_hash)
        wanted = headers.get("range")
        span = None if wanted is None else _parse_range(wanted, size)
        if wanted is not None and span is None:
            return _error(416, None, f"Range not satisfiable: {wanted}", {"Content-Range": f"bytes */{size}"})
        key = hashlib.sha256("\0".join((token.repo_type, token.repo_id, token.commit, xet_hash)).encode()).hexdigest()
        self._xorb_keys[key[:32]] = (token.repo_type, token.repo_id, token.commit, xet_hash)

        def xorb_url(xorb: str, first: int, last: int) -> str:
            return f"{self.cas_url}/xorbs/default/{xorb}?sig={key[:32]}"

        return _json_reply(self._store.reconstruction(xet_hash, span, xorb_url, version))

    def _xorb(self, xorb: str, headers: Mapping[str, str]) -> _Reply:
        # The "presigned" xorb URL: no token is checked, as with the real CAS's storage URLs.
        size = self._store.xorb_size(xorb)
        if size is None:
            return _error(404, None, "NoSuchKey: the specified key does not exist")
        base = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        wanted = headers.get("range")
        span = (0, size - 1) if wanted is None else _parse_range(wanted, size)
        if span is None:
            return _error(416, None, f"Range not satisfiable: {wanted}", {"Content-Range": f"bytes */{size}"})
        data = self._store.read_xorb(xorb, *span)
        if wanted is None:
            return _Reply(200, data, base)
        return _Reply(206, data, {**base, "Content-Range": f"bytes {span[0]}-{span[1]}/{size}"})

    # -- the Hub API -----------------------------------------------------------------------

    def _repo(self, repo_type: str, repo_id: str, authorized: bool) -> _Repo | _Reply:
        repo = self._repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not authorized):
            return _error(401, "RepoNotFound", "Repository not found")
        return repo

    def _route_api(
        self, method: str, repo_type: str, segments: list[str], query: str, authorized: bool, payload: bytes
    ) -> _Reply:
        split = _split_repo(segments, _API_ACTIONS)
        if split is None:
            if len(segments) not in (1, 2) or method not in ("GET", "HEAD"):
                return _error(404, None, "Not Found")
            split = ("/".join(unquote(s) for s in segments), "revision", ["main"])
        repo_id, action, rest = split
        allowed = ("POST",) if action == "paths-info" else ("GET", "HEAD")
        if method not in allowed:
            return _error(405, None, f"Method {method} not allowed")
        with self._lock:
            repo = self._repo(repo_type, repo_id, authorized)
            if isinstance(repo, _Reply):
                return repo
            if action == "refs":
                return self._refs(repo)
            if action == "revision":
                revision = "/".join(unquote(s) for s in rest)
                commit = repo.resolve(revision)
                if commit is None:
                    return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return self._info(repo, commit, dict(parse_qsl(query)))
            if action == "xet-read-token" and not self.xet:
                return _error(404, None, "Not Found")
            if action == "xet-read-token" and repo.gated and not authorized:
                return _gated(repo)
            found = _take_revision(repo, rest)
            if isinstance(found, _Reply):
                return found
            commit, rest = found
            if action == "tree":
                return self._tree(repo, commit, "/".join(unquote(s) for s in rest), query)
            if action == "xet-read-token":
                return self._xet_read_token(repo, commit)
            return self._paths_info(commit, payload)

    def _info(self, repo: _Repo, commit: _Commit, params: Mapping[str, str]) -> _Reply:
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
        return _json_reply(info)

    def _refs(self, repo: _Repo) -> _Reply:
        def ref(name: str, full: str, sha: str) -> dict[str, str]:
            return {"name": name, "ref": full, "targetCommit": sha}

        branches = sorted(repo.branches.items())
        return _json_reply(
            {
                "branches": [ref(n, f"refs/heads/{n}", s) for n, s in branches if not n.startswith("refs/")],
                "converts": [ref(n, n, s) for n, s in branches if n.startswith("refs/convert/")],
                "tags": [ref(n, f"refs/tags/{n}", s) for n, s in sorted(repo.tags.items())],
                "pullRequests": [ref(n, n, s) for n, s in branches if n.startswith("refs/pr/")],
            }
        )

    def _entries(self, commit: _Commit) -> dict[str, dict[str, Any]]:
        entries = {path: blob.tree_entry(path) for path, blob in commit.files.items()}
        for path, oid in commit.dirs.items():
            entries[path] = {"type": "directory", "oid": oid, "size": 0, "path": path}
        entries.update({path: dict(raw) for path, (raw, _) in commit.raw.items()})
        return entries

    def _tree(self, repo: _Repo, commit: _Commit, folder: str, query: str) -> _Reply:
        params = parse_qsl(query, keep_blank_values=True)
        options = dict(params)
        recursive = options.get("recursive", "").lower() in ("1", "true")
        if folder and folder not in commit.dirs:
            message = f"{folder} does not exist on {commit.sha}"
            return _error(404, "EntryNotFound", message, {"X-Repo-Commit": commit.sha})
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
        page = listing[cursor : cursor + self.tree_page_size]
        headers = {"X-Repo-Commit": commit.sha}
        if cursor + self.tree_page_size < len(listing):
            next_params = [(k, v) for k, v in params if k != "cursor"]
            next_params.append(("cursor", str(cursor + self.tree_page_size)))
            base = "/api/{}s/{}/tree/{}".format(repo.repo_type, repo.repo_id, quote(commit.sha, safe=""))
            if folder:
                base += "/" + quote(folder)
            headers["Link"] = f'<{self.url}{base}?{urlencode(next_params)}>; rel="next"'
        return _json_reply(page, headers=headers)

    def _paths_info(self, commit: _Commit, payload: bytes) -> _Reply:
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
        return _json_reply([entries[p] for p in dict.fromkeys(paths) if p in entries])

    def _resolve(
        self, repo_type: str, repo_id: str, rest: list[str], headers: Mapping[str, str], authorized: bool
    ) -> _Reply:
        with self._lock:
            repo = self._repo(repo_type, repo_id, authorized)
            if isinstance(repo, _Reply):
                return repo
            if repo.gated and not authorized:
                return _gated(repo)
            found = _take_revision(repo, rest)
            if isinstance(found, _Reply):
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
            return _error(404, "EntryNotFound", f"{path} does not exist on {commit.sha}", commit_header)
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


def _file_reply(data: bytes, wanted: str | None, headers: Mapping[str, str]) -> _Reply:
    """File bytes, or the ``Range`` of them asked for (206; 416 when unsatisfiable)."""
    if wanted is None:
        return _Reply(200, data, dict(headers))
    span = _parse_range(wanted, len(data))
    if span is None:
        unsatisfiable = {"Content-Range": f"bytes */{len(data)}"}
        return _error(416, None, f"Range not satisfiable: {wanted}", unsatisfiable)
    first, last = span
    return _Reply(206, data[first : last + 1], {**headers, "Content-Range": f"bytes {first}-{last}/{len(data)}"})


def _gated(repo: _Repo) -> _Reply:
    message = (
        f"Access to {repo.repo_type} {repo.repo_id} is restricted. You must have access to it and be "
        "authenticated to access it. Please log in."
    )
    return _error(403, "GatedRepo", message)


def _resolve_path(repo_type: str, repo_id: str, commit: str, path: str) -> str:
    """``/{prefix}{repo}/resolve/{commit}/{path}``: the form a repo file's requests match as."""
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return f"/{prefix}{repo_id}/resolve/{commit}/{path}"


def _cdn_target(raw_path: str) -> tuple[str, str, str, str] | None:
    """``(repo_type, repo_id, commit, path)`` named by a CDN path ``/cdn/{type}s/{repo}/{commit}/{path}``."""
    segments = raw_path.split("/")[1:]
    if len(segments) < 5 or segments[0] != "cdn" or segments[1] not in _API_PLURALS:
        return None
    commit, path = segments[3], "/".join(unquote(s) for s in segments[4:])
    if len(commit) != 40 or not _is_hex(commit) or not path:
        return None
    return _API_PLURALS[segments[1]], unquote(segments[2]), commit, path


def _bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def _rate(bytes_per_second: float | None) -> float | None:
    if bytes_per_second is not None and bytes_per_second <= 0:
        raise ValueError(f"bytes_per_second must be positive or None, got {bytes_per_second}")
    return bytes_per_second


def _hf_xet_importable() -> bool:
    try:
        import_hf_xet()
    except ImportError:
        return False
    return True


def _set_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _is_hex(text: str) -> bool:
    return all(c in string.hexdigits for c in text)


def _check_repo(repo_id: str, repo_type: str) -> None:
    if repo_type not in REPO_TYPES:
        raise ValueError(f"repo_type must be one of {REPO_TYPES}, got {repo_type!r}")
    parts = repo_id.split("/")
    allowed = set(string.ascii_letters + string.digits + "-_.")
    if len(parts) > 2 or any(not p or p in (".", "..") or not set(p) <= allowed for p in parts):
        raise ValueError(f"invalid repo id {repo_id!r}: expected 'name' or 'org/name'")


def _split_repo(segments: list[str], actions: tuple[str, ...]) -> tuple[str, str, list[str]] | None:
    """``(repo_id, action, rest)`` from raw path segments ``org/name/action/...`` or ``name/action/...``."""
    if len(segments) >= 3 and segments[2] in actions:
        return f"{unquote(segments[0])}/{unquote(segments[1])}", segments[2], segments[3:]
    if len(segments) >= 2 and segments[1] in actions:
        return unquote(segments[0]), segments[1], segments[2:]
    return None


def _take_revision(repo: _Repo, rest: list[str]) -> tuple[_Commit, list[str]] | _Reply:
    """The commit named by the first raw segment(s) of ``rest`` and what follows it."""
    if not rest or not rest[0]:
        return _error(404, "RevisionNotFound", "Invalid rev id: (empty)")
    candidates = [(unquote(rest[0]), 1)]
    if rest[0] == "refs" and len(rest) >= 3:  # an unencoded refs/pr/1 or refs/convert/parquet
        candidates.append(("/".join(unquote(s) for s in rest[:3]), 3))
    for revision, used in candidates:
        commit = repo.resolve(revision)
        if commit is not None:
            return commit, rest[used:]
    return _error(404, "RevisionNotFound", f"Invalid rev id: {unquote(rest[0])}")


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
