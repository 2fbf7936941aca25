"""A local Hugging Face Hub: real HTTP servers that the unmodified client and hf_xet talk to.

One public class, :class:`LocalHub`, in front of one private module per job; it needs no pytest."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import string
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..request import is_commit
from ._cas import XetStore, import_hf_xet
from ._client import ClientPatches, client_patches, close_client_session
from ._counters import HubCounters, RequestLog, ServedRequest
from ._faults import Fault, FaultPlan, Pacer, RateLimit
from ._repos import LFS_SUFFIXES, LFS_THRESHOLD, Blob, Repos, check_repo, git_blob_sha1, is_lfs
from ._routes import Routes
from ._server import CDN_HOST, Exchange, Servers

# The kit's modules, one job each: _repos (repos, commits, trees, LFS), _routes (the reply to each
# request on each origin), _server (HTTP, fault plan, counters, pacing), _faults, _counters, _cas
# (the Xet CAS), _client (pointing huggingface_hub at a Hub). This module: LocalHub, their front.
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

DEFAULT_TREE_PAGE_SIZE = 10
"""Tree listing entries per page: small, so that tests exercise pagination (the Hub uses 1000)."""

DEFAULT_XET_TOKEN_TTL = 3600.0
"""Seconds a CAS token handed out by ``xet-read-token`` stays valid."""


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
        port: the Hub's port on 127.0.0.1 (0, the default: any free port; the CAS and the CDN
            always take free ports).
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
        port: int = 0,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be between 0 (any free port) and 65535, got {port}")
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
        self.port = port
        self.cache_dir: Path | None = None
        self._repos = Repos()
        self._faults = FaultPlan()
        self._log = RequestLog()
        self._pacer = Pacer()
        self._store = XetStore()
        self._servers = Servers(Exchange(Routes(self, self._repos, self._store), self._faults, self._log, self._pacer))

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> LocalHub:
        """Bind free ports and serve in daemon threads: the Hub, and with Xet the CAS and the CDN."""
        if self._servers.running:
            return self
        try:
            self._servers.bind("hub", "127.0.0.1", port=self.port)
            if self.xet:
                self._servers.bind("cas", "127.0.0.1")
                try:
                    self._servers.bind("cdn", CDN_HOST)
                except OSError:  # 127.0.0.2 is not configured (macOS): another host name for 127.0.0.1
                    self._servers.bind("cdn", "127.0.0.1", url_host="localhost")
                # After a stop() the CAS folder is gone: put the Xet-backed files back.
                self._store.upload(self._repos.xet_contents())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop serving, close every open connection and remove the CAS folder."""
        self._servers.stop()
        self._store.close()

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return self._servers.url("hub")

    @property
    def cas_url(self) -> str:
        """The CAS origin (``http://127.0.0.1:<port>``); ``RuntimeError`` without Xet."""
        return self._servers.url("cas")

    @property
    def cdn_url(self) -> str:
        """The CDN origin (``http://127.0.0.2:<port>``); ``RuntimeError`` without Xet."""
        return self._servers.url("cdn")

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
        try:
            with client_patches(self.url, cache, home).applied():
                self.cache_dir = cache
                yield cache
        finally:
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
        check_repo(repo_id, repo_type)
        if not branch or branch.startswith("/") or is_commit(branch.lower()):
            raise ValueError(f"invalid branch name {branch!r}")
        blobs: dict[str, Blob] = {}
        for path, content in files.items():
            if not path or path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
                raise ValueError(f"invalid file path {path!r} (use add_raw_tree_entry for hostile paths)")
            data = content.encode() if isinstance(content, str) else bytes(content)
            blobs[path] = Blob.of(path, data)
        if self.xet:
            xet_hashes = self._store.upload({b.sha256: b.data for b in blobs.values() if b.sha256 is not None})
            for path, blob in blobs.items():
                if blob.sha256 is not None:
                    blobs[path] = dataclasses.replace(blob, xet_hash=xet_hashes[blob.sha256])
        return self._repos.commit(repo_type, repo_id, blobs, private=private, gated=gated, branch=branch, tag=tag)

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
        served = {**Blob.of(path, data).tree_entry(path), **(entry or {})}
        self._repos.add_raw(repo_type, repo_id, revision, path, served, data)
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

        A body of ``after_bytes`` or fewer is sent but for its last byte: every use cuts a body
        short. Counts only 2xx responses with a body (not HEAD); the bytes sent count in
        ``bytes_served``.
        For a Xet-backed file the responses are its xorb ranges, which hf_xet fetches again
        itself; a reconstruction is cut only by a pattern that matches its own path.
        """
        if after_bytes < 0:
            raise ValueError(f"after_bytes must be >= 0, got {after_bytes}")
        self._faults.add(Fault("cut", pattern, times, after_bytes=after_bytes))

    def corrupt(self, pattern: str, times: int = 1) -> None:
        """Flip one byte of the body, same length; counts like ``cut``.

        The client ends with one wrong byte in the file: the body's middle byte for a file served
        by HTTP; for a Xet-backed file, a byte of one of its xorb ranges that hf_xet decodes to
        one wrong byte (it checks lengths only). Any other body: its middle byte.
        """
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

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Return once no origin is answering a request, nor has one waiting to be read.

        Call it before comparing counters after a client was killed or timed out: the server may
        still be writing (and counting) that client's response. ``TimeoutError`` after
        ``timeout`` seconds names what is still in progress.
        """
        deadline = time.monotonic() + timeout
        while self._servers.busy():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the local Hub was still answering a request after {timeout}s: a client is still "
                    "downloading (a paced body with slow() takes its time), or a connection is held open"
                )
            time.sleep(0.002)

    def request_count(self, pattern: str | None = None, method: str | None = None, status: int | None = None) -> int:
        """How many requests match ``pattern`` (path or alias, as the fault plan), ``method`` and ``status``."""
        return self._log.snapshot().request_count(pattern, method, status)

    def served(self, pattern: str = "*") -> int:
        """Body bytes written for the requests matching ``pattern`` (path or alias)."""
        return self._log.snapshot().served(pattern)


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
