"""``materialize()``: one verified snapshot per cache, under a cross-process lock.

The order of work, cheapest first:

1. **Fast path**, no lock and no network: the revision is a commit (or a branch this test
   session already resolved), our completeness record for that commit and selection exists,
   and cheap checks pass (links point at their blobs, sizes match, nothing ``.incomplete``).
2. Otherwise, under the repo lock: check the record again (another process may just have
   written it), resolve a branch once, take the Hub's listing (the client's cached
   ``trees/<commit>.json`` when present), inspect what is cached, remove exactly what is
   damaged, let ``snapshot_download`` fetch what is missing, hash what it fetched, retry
   transient failures, and write the record atomically.

Transfers are delegated to huggingface_hub; this module decides what to trust.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from filelock import FileLock, Timeout
from huggingface_hub import HfApi, constants, snapshot_download
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import filter_repo_objects  # type: ignore[attr-defined]

from . import retry
from .cache import XET_HASH_RE, RepoCache, atomic_write_json, read_json
from .errors import (
    AuthError,
    EntryNotFoundError,
    HfSnapshotError,
    InvalidRequestError,
    OfflineMissingError,
    RevisionNotFoundError,
    TransientError,
    UnsafeCacheError,
    UnverifiedRevisionError,
    VerificationError,
)
from .hashing import ArrivalHasher
from .locking import RepoLock
from .request import SnapshotRequest
from .snapshot import Snapshot, Source
from .verify import ExpectedFile, check_file, hash_mismatches, linked_blob_name

log = logging.getLogger("pytest_hfsnapshot")

#: At least one of these must be in a full snapshot (README.md counts for datasets and spaces).
METADATA_MARKERS = (
    "config.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "model_index.json",
)
RECORD_VERSION = 2
#: Wall-clock bound on one call's transient-failure handling, the client's own retries included.
RETRY_DEADLINE = 300.0
_SESSION_MAX_AGE = 3 * 24 * 3600
# Branch resolutions made by this process when no test session shares them.
_resolved_here: dict[tuple[str, str, str, str], str] = {}


def materialize(
    repo_id: str,
    *,
    revision: str = "main",
    allow_patterns: str | Iterable[str] | None = None,
    ignore_patterns: str | Iterable[str] | None = None,
    repo_type: str = "model",
    metadata_only: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    verify: Literal["size", "sha256"] = "size",
    retries: int = 5,
    lock_timeout: float = 900.0,
    offline: bool | None = None,
    strict: bool = False,
    session: str | None = None,
    token: str | bool | None = None,
) -> Snapshot:
    """Return a verified :class:`Snapshot` of ``repo_id`` at ``revision``, downloading at most once per cache.

    Args:
        repo_id: ``"org/name"``.
        revision: branch, tag or 40-hex commit.
        allow_patterns / ignore_patterns: globs selecting files, as in ``snapshot_download``.
        repo_type: ``"model"``, ``"dataset"`` or ``"space"``.
        metadata_only: everything but weight files (see ``request.WEIGHT_PATTERNS``).
        cache_dir: the huggingface_hub cache; default ``huggingface_hub.constants.HF_HUB_CACHE``.
        verify: how cached files are re-checked: ``"size"`` (stat) or ``"sha256"`` (rehash all).
            Files this call downloads are always hashed.
        retries: extra attempts for transient failures (5xx, 429, resets, timeouts, cut bodies).
        lock_timeout: seconds to wait for another process's lock before raising LockTimeoutError.
        offline: no network at all; default ``huggingface_hub.constants.HF_HUB_OFFLINE``.
        strict: fail instead of serving a cached branch the Hub could not confirm.
        session: an id shared by the processes of one test session; a branch or tag is then
            resolved once per session per cache.
        token: passed to huggingface_hub (default: its own lookup).

    Raises:
        AuthError, RevisionNotFoundError, EntryNotFoundError, TransientError, OfflineMissingError,
        UnverifiedRevisionError, VerificationError, UnsafeCacheError, LockTimeoutError,
        InvalidRequestError: see :mod:`pytest_hfsnapshot.errors`.
    """
    request = SnapshotRequest.build(
        repo_id,
        revision=revision,
        allow_patterns=allow_patterns,
        ignore_patterns=ignore_patterns,
        repo_type=repo_type,
        metadata_only=metadata_only,
    )
    return materialize_request(
        request,
        cache_dir=cache_dir,
        verify=verify,
        retries=retries,
        lock_timeout=lock_timeout,
        offline=offline,
        strict=strict,
        session=session,
        token=token,
    )


def materialize_request(
    request: SnapshotRequest,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    verify: Literal["size", "sha256"] = "size",
    retries: int = 5,
    lock_timeout: float = 900.0,
    offline: bool | None = None,
    strict: bool = False,
    session: str | None = None,
    token: str | bool | None = None,
) -> Snapshot:
    """:func:`materialize` for an already validated :class:`~pytest_hfsnapshot.request.SnapshotRequest`."""
    repo_id = request.repo_id
    if verify not in ("size", "sha256"):
        raise InvalidRequestError(f"verify={verify!r} is not valid: use 'size' or 'sha256'.", repo_id=repo_id)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InvalidRequestError(f"retries={retries!r} is not valid: give a whole number >= 0.", repo_id=repo_id)
    if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float) or not lock_timeout > 0:
        raise InvalidRequestError(
            f"lock_timeout={lock_timeout!r} is not valid: give a number of seconds > 0.", repo_id=repo_id
        )
    if session is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", session):
        raise InvalidRequestError(f"session={session!r} is not valid: use letters, digits, '_', '.', '-'.")
    engine = _Engine(
        request,
        cache_dir=cache_dir if cache_dir is not None else constants.HF_HUB_CACHE,
        verify=verify,
        retries=retries,
        lock_timeout=float(lock_timeout),
        offline=constants.HF_HUB_OFFLINE if offline is None else offline,
        strict=strict,
        session=session,
        token=token,
    )
    return engine.run()


class _Engine:
    def __init__(
        self,
        request: SnapshotRequest,
        *,
        cache_dir: str | os.PathLike[str],
        verify: str,
        retries: int,
        lock_timeout: float,
        offline: bool,
        strict: bool,
        session: str | None,
        token: str | bool | None,
    ) -> None:
        self.request = request
        self.repo = RepoCache(cache_dir, request.repo_id, request.repo_type)
        self.verify = verify
        self.retries = retries
        self.lock_timeout = lock_timeout
        self.offline = offline
        self.strict = strict
        self.session = session
        self.token = token
        self.started = time.monotonic()
        self.lock_wait = 0.0
        self.backoff = retry.Backoff(retries=retries, deadline=self.started + RETRY_DEADLINE)
        self.planted = False
        #: Files whose blob the client named after a server ETag other than the listing's hash.
        self.adopted: dict[str, ExpectedFile] = {}
        #: Bytes of downloaded files hashed after their transfer (not while they arrived).
        self.rehashed = 0

    # --- entry --------------------------------------------------------------------------------
    def run(self) -> Snapshot:
        commit = self._known_commit()
        if commit is not None:
            snap = self._from_record(commit)
            if snap is not None:
                return snap
        try:
            self.repo.cache_dir.mkdir(parents=True, exist_ok=True)
            with RepoLock(self.repo, timeout=self.lock_timeout, done=self._finished_elsewhere) as lock:
                self.lock_wait = lock.wait
                if isinstance(lock.early, Snapshot):
                    return dataclasses.replace(lock.early, lock_wait=lock.wait, seconds=time.monotonic() - self.started)
                return self._locked()
        except PermissionError as error:
            raise HfSnapshotError(
                f"Cannot write to the cache for {self.request.label}: {error.strerror} ({error.filename}). "
                "Make the cache folder writable, or point --hf-cache-dir / HF_HUB_CACHE at a writable one.",
                repo_id=self.request.repo_id,
                revision=self.request.revision,
            ) from error

    def _finished_elsewhere(self) -> Snapshot | None:
        """While waiting for the lock: the snapshot the holder just recorded, if that is what it did.

        One stat while the record is absent; the full checks only once it appears.
        """
        commit = self._known_commit()
        if commit is None or not self._record_path(commit).exists():
            return None
        return self._from_record(commit)

    def _locked(self) -> Snapshot:
        commit = self._known_commit()
        if commit is not None:
            snap = self._from_record(commit)
            if snap is not None:
                return snap
        if self.offline:
            try:
                return self._offline(commit)
            except OfflineMissingError as missing:
                raise self._refused_before() or missing from None
        try:
            return self._online_locked(commit)
        except AuthError as refused:
            # Remembered so that an offline run after a tokenless prefetch skips like this one; a
            # cache where that cannot be written must still report the refusal itself.
            with contextlib.suppress(OSError, HfSnapshotError):
                atomic_write_json(
                    self.repo.refusal_path,
                    {"reason": refused.reason, "message": str(refused), "at": time.time()},
                    root=self.repo.cache_dir,
                    repo_id=self.repo.repo_id,
                )
            raise

    def _refused_before(self) -> AuthError | None:
        """The Hub's recorded refusal of this repo, as the error an online run would have raised."""
        data = read_json(self.repo.refusal_path)
        if not isinstance(data, dict) or data.get("reason") not in ("gated", "unauthorized", "not_found_or_private"):
            return None
        return AuthError(
            f"{data.get('message', '')} (The Hub refused it during an earlier online run, and this run is offline.)",
            reason=str(data["reason"]),
            repo_id=self.request.repo_id,
            revision=self.request.revision,
        )

    def _online_locked(self, commit: str | None) -> Snapshot:
        unverified = False
        if commit is None:
            commit, unverified = self._resolve()
        if unverified:
            if self.strict:
                raise UnverifiedRevisionError(
                    f"The Hub could not be reached to confirm what {self.request.label} points at, and "
                    f"--hf-strict is on. The cache has commit {commit[:12]}; pin that commit or retry "
                    "when the Hub is reachable.",
                    repo_id=self.request.repo_id,
                    revision=self.request.revision,
                )
            return self._cached_only(commit, unverified=True)
        return self._online(commit)

    # --- what we already know ---------------------------------------------------------------
    def _memo_key(self) -> tuple[str, str, str, str]:
        return (str(self.repo.cache_dir), self.request.repo_type, self.request.repo_id, self.request.revision)

    def _known_commit(self) -> str | None:
        if self.request.pinned:
            return self.request.revision
        if self.session is not None:
            data = read_json(self.repo.resolution_path(self.session, self.request.revision))
            commit = data.get("commit") if isinstance(data, dict) else None
            if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit):
                return commit
        elif self._memo_key() in _resolved_here:
            return _resolved_here[self._memo_key()]
        if self.offline:
            return self.repo.read_ref(self.request.revision)
        return None

    def _remember(self, commit: str) -> None:
        if self.session is None:
            _resolved_here[self._memo_key()] = commit
            return
        path = self.repo.resolution_path(self.session, self.request.revision)
        if not path.parent.exists():
            _prune_sessions(self.repo.make_folders(path.parent.parent))
        atomic_write_json(
            path,
            {"commit": commit, "revision": self.request.revision, "at": time.time()},
            root=self.repo.cache_dir,
            repo_id=self.repo.repo_id,
        )

    def _record_path(self, commit: str) -> Path:
        return self.repo.record_path(commit, self.request.selection_key())

    def _from_record(self, commit: str) -> Snapshot | None:
        data = read_json(self._record_path(commit))
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION or data.get("commit") != commit:
            return None
        try:
            files = [ExpectedFile.from_json(raw) for raw in data["files"]]
        except (KeyError, TypeError, ValueError):
            return None
        if not self._dirs_safe(commit, files):
            return None
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        if any(check_file(self.repo, snapshot_dir, f) is not None for f in files):
            return None
        if self.repo.incomplete_blobs():
            return None  # an orphan to clean up (or a download in flight): the slow path decides
        if self.verify == "sha256" and hash_mismatches(self._blob_pairs(commit, files)):
            return None
        return self._snapshot(commit, files, "cache")

    # --- resolution ---------------------------------------------------------------------------
    def _api(self) -> HfApi:
        return HfApi(token=self.token)

    def _resolve(self) -> tuple[str, bool]:
        """The commit a branch or tag points at now, or (cached commit, True) when the Hub is unreachable."""
        try:
            info = self._with_retries(
                lambda: self._api().repo_info(
                    self.request.repo_id, repo_type=self.request.repo_type, revision=self.request.revision
                ),
                what="the revision",
            )
        except TransientError:
            cached = self.repo.read_ref(self.request.revision)
            if cached is None:
                raise
            log.warning(
                "hfsnapshot: the Hub is unreachable; using the cached %s at %s (unverified revision)",
                self.request.label,
                cached[:12],
            )
            return cached, True
        commit = getattr(info, "sha", None)
        if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
            raise VerificationError(
                f"The Hub answered for {self.request.label} without a commit id; check HF_ENDPOINT.",
                repo_id=self.request.repo_id,
                revision=self.request.revision,
            )
        self._remember(commit)
        return commit, False

    def _with_retries(self, call: Any, *, what: str, filename: str | None = None, retried: bool = True) -> Any:
        """Run ``call``, retrying transient failures; ``retried=False`` when the client retries it already."""
        backoff = self.backoff
        while True:
            try:
                return call()
            except HfSnapshotError:
                raise
            except Exception as error:
                kind = retry.classify(error)
                if kind.kind != "transient":
                    raise self._typed(error, kind) from error
                if not retried or kind.client_retried:
                    backoff.attempts += 1
                    raise self._exhausted(error, kind, backoff.attempts, what, filename) from error
                if not backoff.wait(kind.retry_after):
                    raise self._exhausted(error, kind, backoff.attempts, what, filename) from error
                log.info("hfsnapshot: retrying %s of %s after %s", what, self.request.label, _cause(kind))

    def _typed(self, error: BaseException, kind: retry.Classification) -> HfSnapshotError:
        label, repo_id, rev = self.request.label, self.request.repo_id, self.request.revision
        prefix = "" if self.request.repo_type == "model" else f"{self.request.repo_type}s/"
        page = f"{constants.ENDPOINT.rstrip('/')}/{prefix}"
        if kind.kind == "auth":
            if kind.auth_reason == "gated":
                hint = (
                    f"{repo_id!r} is gated: accept its conditions at {page}{repo_id} with your account, "
                    "then set HF_TOKEN to a token of that account."
                )
            elif kind.auth_reason == "unauthorized":
                hint = f"The Hub refused the token for {repo_id!r}: set HF_TOKEN to a token that can read it."
            else:
                hint = (
                    f"{repo_id!r} does not exist or is private: check the name, or set HF_TOKEN to a token "
                    "that can read it."
                )
            return AuthError(hint, reason=kind.auth_reason or "unauthorized", repo_id=repo_id, revision=rev)
        if kind.kind == "revision_not_found":
            return RevisionNotFoundError(
                f"Revision {rev!r} does not exist in {self.request.repo_type} {repo_id!r}: "
                "check the branch, tag or commit id.",
                repo_id=repo_id,
                revision=rev,
            )
        if kind.kind == "entry_not_found":
            return EntryNotFoundError(
                f"A file of {label} is not on the Hub ({_failed_file(error) or 'unknown file'}).",
                repo_id=repo_id,
                revision=rev,
            )
        return HfSnapshotError(
            f"Materializing {label} failed: {_cause(kind)}.",
            repo_id=repo_id,
            revision=rev,
        )

    def _exhausted(
        self, error: BaseException, kind: retry.Classification, attempts: int, what: str, filename: str | None
    ) -> TransientError:
        filename = filename or _failed_file(error)
        where = f", file {filename!r}" if filename else ""
        retrier = "hf_xet" if retry.is_xet_transfer(kind.decisive) else "huggingface_hub"
        client = f" ({retrier} had already retried it with its own backoff)" if kind.client_retried else ""
        tries = f"{attempts} attempt{'' if attempts == 1 else 's'}"
        return TransientError(
            f"Gave up on {what} of {self.request.label}{where} after {tries}{client}: last cause "
            f"{_cause(kind)}. The Hub or the network is failing; retry later"
            + ("." if kind.client_retried else " or raise --hf-retries."),
            attempts=attempts,
            filename=filename,
            repo_id=self.request.repo_id,
            revision=self.request.revision,
        )

    # --- listing ------------------------------------------------------------------------------
    def _listing(self, commit: str, *, network: bool) -> dict[str, ExpectedFile] | None:
        raw = self.repo.read_tree_cache(commit)
        if raw is not None:
            try:
                return self._parse_listing(raw)
            except (KeyError, TypeError, ValueError):
                raw = None
        if not network:
            return None

        def fetch() -> dict[str, dict[str, Any]]:
            out: dict[str, dict[str, Any]] = {}
            for item in self._api().list_repo_tree(
                self.request.repo_id, recursive=True, revision=commit, repo_type=self.request.repo_type
            ):
                if not isinstance(item, RepoFile):
                    continue  # a folder
                entry: dict[str, Any] = {"size": item.size, "blob_id": item.blob_id}
                if item.lfs is not None:
                    entry["lfs_sha256"] = item.lfs.sha256
                    entry["lfs_size"] = item.lfs.size
                xet_hash = getattr(item, "xet_hash", None)
                if xet_hash:
                    entry["xet_hash"] = xet_hash
                out[item.path] = entry
            return out

        raw = self._with_retries(fetch, what="the file listing", retried=not retry.client_retries_listings())
        listing = self._parse_listing(raw)
        self.repo.write_tree_cache(commit, raw)
        return listing

    def _parse_listing(self, raw: dict[str, dict[str, Any]]) -> dict[str, ExpectedFile]:
        listing: dict[str, ExpectedFile] = {}
        for path, info in raw.items():
            self.repo.safe_relpath(path)
            lfs = info.get("lfs_sha256")
            size = int(info["lfs_size"] if lfs else info["size"])
            etag = str(lfs or info["blob_id"])
            if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", etag):
                raise ValueError(f"bad blob id {etag!r}")
            xet = str(info.get("xet_hash") or "")
            if xet and not XET_HASH_RE.fullmatch(xet):
                raise ValueError(f"bad xet hash {xet!r}")
            listing[path] = ExpectedFile(path, size, etag, bool(lfs), xet=xet)
        return listing

    def _select(self, listing: dict[str, ExpectedFile], commit: str) -> list[ExpectedFile]:
        request = self.request
        paths = list(
            filter_repo_objects(
                items=sorted(listing),
                allow_patterns=list(request.allow_patterns) if request.allow_patterns else None,
                ignore_patterns=list(request.effective_ignore) if request.effective_ignore else None,
            )
        )
        if not paths:
            raise InvalidRequestError(
                f"No file of {request.label} (commit {commit[:12]}) matches allow_patterns="
                f"{list(request.allow_patterns or [])} ignore_patterns={list(request.effective_ignore or [])}. "
                f"The repo has: {', '.join(sorted(listing)[:10]) or 'no files'}.",
                repo_id=request.repo_id,
                revision=request.revision,
            )
        if request.full:
            markers = METADATA_MARKERS + (("README.md",) if request.repo_type != "model" else ())
            if not any(p in markers for p in paths):
                raise VerificationError(
                    f"{request.label} has none of the metadata files {', '.join(markers)}; a full snapshot "
                    "without them is not a loadable repo. Select files with allow_patterns if this is expected.",
                    repo_id=request.repo_id,
                    revision=request.revision,
                )
        return [listing[p] for p in paths]

    # --- offline and unverified ---------------------------------------------------------------
    def _offline(self, commit: str | None) -> Snapshot:
        if commit is None:
            raise OfflineMissingError(
                f"Offline, and the cache has no usable refs/{self.request.revision} for {self.request.label} "
                f"in {self.repo.cache_dir}. Run `pytest --hf-prefetch-only` online first, or pin a cached commit.",
                missing=(f"refs/{self.request.revision}",),
                repo_id=self.request.repo_id,
                revision=self.request.revision,
            )
        return self._cached_only(commit, unverified=False)

    def _cached_only(self, commit: str, *, unverified: bool) -> Snapshot:
        """Serve what the cache holds for ``commit`` without any network, or say what is missing."""
        snap = self._from_record(commit)
        if snap is None:
            listing = self._listing(commit, network=False)
            what = "Offline" if self.offline else "The Hub is unreachable"
            if listing is None:
                raise OfflineMissingError(
                    f"{what}, and the cache has no file listing for {self.request.label} (commit {commit[:12]}) "
                    f"in {self.repo.cache_dir}. Run `pytest --hf-prefetch-only` online first.",
                    missing=(f"trees/{commit}.json",),
                    repo_id=self.request.repo_id,
                    revision=self.request.revision,
                )
            files = self._select(listing, commit)
            problems = self._inspect(commit, files, hash_all=self.verify == "sha256")
            if problems:
                listed = ", ".join(f"{p} ({why})" for p, why in sorted(problems.items())[:5])
                more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
                raise OfflineMissingError(
                    f"{what}, and {len(problems)} file(s) of {self.request.label} are missing or damaged in "
                    f"{self.repo.cache_dir}: {listed}{more}. Run `pytest --hf-prefetch-only` online first.",
                    missing=tuple(sorted(problems)),
                    repo_id=self.request.repo_id,
                    revision=self.request.revision,
                )
            # Orphans of killed downloads need no network to go, and a verified snapshot has none.
            self._remove_orphans()
            self._write_record(commit, files)
            snap = self._snapshot(commit, files, "cache")
        if unverified:
            snap = dataclasses.replace(snap, unverified_revision=True)
        return snap

    # --- online: inspect, repair, download, verify ---------------------------------------------
    def _online(self, commit: str) -> Snapshot:
        listing = self._listing(commit, network=True)
        assert listing is not None
        files = self._select(listing, commit)
        damaged = False
        if not self.request.pinned:
            # An empty or garbage ref is damage; a branch that moved on is not.
            ref = self.repo.ref(self.request.revision)
            damaged = ref.is_file() and self.repo.read_ref(self.request.revision) is None
            self.repo.write_ref(self.request.revision, commit)
        problems = self._inspect(commit, files, hash_all=self.verify == "sha256")
        blobs_before = _blob_names(self.repo.blobs)
        orphans = self.repo.incomplete_blobs()
        interrupted = {p.name.split(".", 1)[0] for p in orphans}
        repaired: list[str] = []
        for f in files:
            why = problems.get(f.path)
            if why is None:
                continue
            if why == "missing" and f.blob_name not in blobs_before and f.blob_name not in interrupted:
                continue  # simply not downloaded yet
            repaired.append(f.path)
            self._remove(commit, f, blob=why not in ("missing",) and not why.startswith("link points"))
        damaged = damaged or bool(repaired) or bool(orphans) or self.planted
        blobs_before = _blob_names(self.repo.blobs)
        needed = [f for f in files if f.path in problems]
        fetched = False
        if needed:
            self._download(commit, needed, blobs_before)
            fetched = True
        self._remove_orphans()
        self._write_record(commit, files)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.repo.refusal_path)
        source: Source = "repair" if damaged else ("download" if fetched else "cache")
        if repaired:
            log.info("hfsnapshot: repaired %s: %s", self.request.label, ", ".join(repaired))
        return self._snapshot(commit, files, source, repaired=tuple(sorted(repaired)))

    def _download(self, commit: str, needed: list[ExpectedFile], blobs_before: set[str]) -> None:
        request = self.request
        backoff = self.backoff
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        while True:
            failure: BaseException | None = None
            arrivals = ArrivalHasher(self.repo.blobs, needed)
            try:
                arrivals.run(
                    snapshot_download,
                    request.repo_id,
                    repo_type=request.repo_type,
                    revision=commit,
                    cache_dir=str(self.repo.cache_dir),
                    allow_patterns=list(request.allow_patterns) if request.allow_patterns else None,
                    ignore_patterns=list(request.effective_ignore) if request.effective_ignore else None,
                    token=self.token,
                )
            except HfSnapshotError:
                raise
            except Exception as error:
                failure = error
            still: list[ExpectedFile] = []
            fresh: list[ExpectedFile] = []
            for f in needed:
                why = check_file(self.repo, snapshot_dir, f)
                if why is None:
                    fresh.append(f)
                elif why.startswith("link points") and self._adopt(commit, f):
                    continue  # hashed and found right under the name the server's ETag gave it
                elif why != "missing":
                    self._remove(commit, f, blob=not why.startswith("link points"))
                    still.append(f)
                else:
                    still.append(f)
            new = [f for f in fresh if f.blob_name not in blobs_before or self.verify == "sha256"]
            corrupt = set(arrivals.mismatches(self._blob_pairs(commit, new)))
            self.rehashed += arrivals.rehashed
            for f in fresh:
                if f.path in corrupt:
                    self._remove(commit, f, blob=True)
                    still.append(f)
            if not still:
                return
            if failure is None:
                failure = retry.ContentMismatch(
                    f"{len(still)} file(s) arrived with the wrong size or hash: "
                    + ", ".join(sorted(f.path for f in still)[:5])
                )
            kind = retry.classify(failure)
            if kind.kind != "transient":
                raise self._typed(failure, kind) from failure
            filename = _failed_file(failure) or sorted(f.path for f in still)[0]
            if kind.client_retried:
                # The client has just retried this request with its own backoff: another round of
                # ours on top would multiply the two layers.
                backoff.attempts += 1
                raise self._exhausted(failure, kind, backoff.attempts, "the download", filename) from failure
            if not backoff.wait(kind.retry_after):
                raise self._exhausted(failure, kind, backoff.attempts, "the download", filename) from failure
            log.info(
                "hfsnapshot: retrying the download of %s (%d file(s) left) after %s",
                request.label,
                len(still),
                _cause(kind),
            )
            needed = still
            blobs_before = _blob_names(self.repo.blobs)

    def _inspect(self, commit: str, files: list[ExpectedFile], *, hash_all: bool) -> dict[str, str]:
        """Why each problematic file is not usable as cached (missing, wrong size, wrong link, ...)."""
        self._dirs_safe(commit, files, repair=True)
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        problems: dict[str, str] = {}
        for f in files:
            why = check_file(self.repo, snapshot_dir, f)
            if why is not None and not (why.startswith("link points") and self._adopt(commit, f)):
                problems[f.path] = why
        if hash_all:
            kept = [f for f in files if f.path not in problems and f.path not in self.adopted]
            for path in hash_mismatches(self._blob_pairs(commit, kept)):
                problems[path] = "sha256 mismatch"
        return problems

    def _adopt(self, commit: str, f: ExpectedFile) -> bool:
        """Accept a link to a blob named otherwise than the listing's hash, if its contents have that hash.

        The Hub's ETag of a small file is its git blob sha1, the listing's ``oid``; a server whose
        ETag differs makes the client name the blob after that ETag instead. The contents decide.
        """
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        name = linked_blob_name(snapshot_dir, f.path)
        if name is None or name == f.blob_name:
            return False
        candidate = dataclasses.replace(f, blob=name)
        if check_file(self.repo, snapshot_dir, candidate) is not None:
            return False
        if hash_mismatches([(candidate, self.repo.blob(name))]):
            return False
        self.adopted[f.path] = candidate
        return True

    def _dirs_safe(self, commit: str, files: list[ExpectedFile], *, repair: bool = False) -> bool:
        """The repo's folders and the snapshot's subfolders are real folders, not links leading elsewhere.

        huggingface_hub never makes a snapshot subfolder a symlink, so with ``repair`` such a
        planted link is removed (the link itself, never what it points at). The repo folder,
        ``blobs/`` and ``snapshots/`` are not ours to remove: a link there is refused.
        """
        root = str(self.repo.root)
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        parents = {""}
        for f in files:
            parent = f.path.rpartition("/")[0]
            while parent and parent not in parents:
                parents.add(parent)
                parent = parent.rpartition("/")[0]
        fixed = [root, os.path.join(root, "blobs"), os.path.join(root, "snapshots")]
        inner = sorted(os.path.join(snapshot_dir, p) if p else snapshot_dir for p in parents)
        for folder in fixed + inner:
            try:
                st = os.lstat(folder)
            except FileNotFoundError:
                continue
            except OSError:
                return False
            if stat.S_ISDIR(st.st_mode):
                continue
            if not repair:
                return False
            kind = "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            if folder in fixed:
                raise UnsafeCacheError(
                    f"{folder} in the cache is a {kind}, not a folder. Refusing to write through it: "
                    f"delete {root} and run again.",
                    repo_id=self.request.repo_id,
                )
            log.warning("hfsnapshot: removing the %s %s planted inside %s", kind, folder, self.request.label)
            self.repo.require_inside(Path(folder).parent)
            os.unlink(folder)
            self.planted = True
        return True

    def _blob_pairs(self, commit: str, files: list[ExpectedFile]) -> list[tuple[ExpectedFile, Path]]:
        snapshot_dir = self.repo.snapshot_dir(commit)
        out = []
        for f in files:
            link = snapshot_dir / f.path
            out.append((f, self.repo.blob(f.blob_name) if link.is_symlink() else link))
        return out

    def _remove(self, commit: str, f: ExpectedFile, *, blob: bool) -> None:
        """Remove one bad link (and its blob), never following a symlink, only inside the repo folder.

        Where the blob is a link into the shared blob store, see :meth:`_unlink_from_store`.
        """
        link = self.repo.snapshot_dir(commit) / f.path
        self.repo.require_inside(link.parent)
        with self._blob_lock(f.blob_name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(link)
            if blob:
                self.repo.require_inside(self.repo.blobs)
                store = self.repo.store_target(f.blob_name)
                if store is not None:
                    self._unlink_from_store(store, f)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.repo.blob(f.blob_name))

    def _unlink_from_store(self, store: Path, f: ExpectedFile) -> None:
        """Remove the repo's link into the shared blob store, and the store file if it is damaged.

        All under huggingface_hub's lock for that store entry, as the client links and collects
        there. The store file is checked again under the lock: another process may have put a
        good copy there meanwhile, and a good store file serves other repos, so it stays. A bad
        one is unlinked, never written (it is read-only by design), so that the client fetches it
        again instead of linking it anew. The entry's ``.refs`` manifest loses this repo's line,
        which the client writes back when it links the repo again.
        """
        lock = FileLock(str(self.repo.store_lock(store)), mode=0o666, timeout=self.lock_timeout, is_singleton=False)
        with lock:
            with contextlib.suppress(FileNotFoundError):
                st = os.lstat(store)
                damaged = stat.S_ISREG(st.st_mode) and (st.st_size != f.size or bool(hash_mismatches([(f, store)])))
                if damaged:
                    log.info("hfsnapshot: removing the damaged shared blob %s of %s", store, self.request.label)
                    os.unlink(store)
            self.repo.drop_store_reference(store, f.blob_name)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.repo.blob(f.blob_name))

    def _remove_orphans(self) -> None:
        """Delete the repo's ``.incomplete`` blobs that nobody is writing, each under the client's blob lock.

        Every orphan of the repo goes, not only those of the selected files: a killed download
        of a file this request does not need is still debris nobody will ever resume.
        """
        for path in self.repo.incomplete_blobs():
            etag = path.name.split(".", 1)[0]
            try:
                with self._blob_lock(etag, timeout=0):
                    self.repo.require_inside(path.parent)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            except Timeout:
                log.info("hfsnapshot: %s is being downloaded by another process; leaving it", path.name)

    def _blob_lock(self, etag: str, timeout: float | None = None) -> FileLock:
        path = self.repo.blob_lock(etag)
        self.repo.make_folders(path.parent)
        return FileLock(str(path), timeout=self.lock_timeout if timeout is None else timeout, is_singleton=False)

    # --- results ------------------------------------------------------------------------------
    def _write_record(self, commit: str, files: list[ExpectedFile]) -> None:
        files = [self.adopted.get(f.path, f) for f in files]
        atomic_write_json(
            self._record_path(commit),
            {
                "version": RECORD_VERSION,
                "repo_id": self.request.repo_id,
                "repo_type": self.request.repo_type,
                "commit": commit,
                "selection": {
                    "allow_patterns": self.request.allow_patterns,
                    "ignore_patterns": self.request.ignore_patterns,
                    "metadata_only": self.request.metadata_only,
                },
                "files": [f.to_json() for f in files],
                "verified_at": time.time(),
            },
            root=self.repo.cache_dir,
            repo_id=self.repo.repo_id,
        )

    def _snapshot(
        self, commit: str, files: list[ExpectedFile], source: Source, repaired: tuple[str, ...] = ()
    ) -> Snapshot:
        return Snapshot(
            path=self.repo.snapshot_dir(commit),
            repo_id=self.request.repo_id,
            repo_type=self.request.repo_type,
            revision=self.request.revision,
            commit=commit,
            files=tuple(sorted(f.path for f in files)),
            size=sum(f.size for f in files),
            source=source,
            seconds=time.monotonic() - self.started,
            lock_wait=self.lock_wait,
            repaired=repaired,
            rehashed=self.rehashed,
        )


def _blob_names(blobs: Path) -> set[str]:
    try:
        return set(os.listdir(blobs))
    except OSError:
        return set()


def _cause(kind: retry.Classification) -> str:
    """A short, token-free description of a failure: class name and status, never headers."""
    decisive = kind.decisive
    name = type(decisive).__name__ if decisive is not None else "error"
    return f"{name} (HTTP {kind.status})" if kind.status else name


def _failed_file(error: BaseException) -> str | None:
    """The repo file a failed request was for, read from the request URL in the exception chain."""
    for link in retry.chain(error):
        for holder in (retry.safe_attr(link, "request"), retry.safe_attr(retry.safe_attr(link, "response"), "request")):
            url = str(retry.safe_attr(holder, "url") or "")
            match = re.search(r"/resolve/[^/]+/(.+?)(?:\?|$)", url)
            if match:
                return unquote(match.group(1))
    return None


def _prune_sessions(resolutions: Path) -> None:
    """Drop branch resolutions of test sessions that ended days ago (tiny files, our own folder)."""
    # The cache path is resolved, so a difference means a symlink on the way: it leads out of our
    # own folder, and what is there is not ours to delete.
    if os.path.realpath(resolutions) != str(resolutions):
        return
    try:
        entries = list(os.scandir(resolutions))
    except OSError:
        return
    cutoff = time.time() - _SESSION_MAX_AGE
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_mtime < cutoff:
                for child in os.scandir(entry.path):
                    if child.is_file(follow_symlinks=False):
                        os.unlink(child.path)
                os.rmdir(entry.path)
