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

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from huggingface_hub import HfApi, hf_hub_download

from ..errors import (
    AuthError,
    DiskError,
    HfSnapshotError,
    InvalidRequestError,
    LockLostError,
    OfflineMissingError,
    TransientError,
    UnverifiedRevisionError,
    VerificationError,
)
from ..request import RequestKeywords, SnapshotRequest, is_commit
from ..settings import (
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_RATE_WAIT,
    DEFAULT_RETRIES,
    DEFAULT_VERIFY,
    Settings,
    VerifyMode,
)
from ..snapshot import Snapshot, Source
from . import error_builders, gate, outage, pins, refusals, retry, space, state, usage, xet
from . import listing as listing_mod
from ._hf_compat import xet_in_use
from .credentials import token_set
from .error_builders import cause as _cause
from .error_builders import failed_file as _failed_file
from .error_builders import hub as _hub
from .hashing import ArrivalHasher
from .implicit import own_work
from .layers import LAYERS_ENV, Layers, env_layers, link_into_layer, links_to, open_layers
from .layout import RepoCache
from .locking import RepoLock, wait_for_client_lock
from .repair import Repairer
from .verify import ExpectedFile, Problem, ProblemKind, all_fine, check_file, hash_mismatches, hash_problem

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger("pytest_hfsnapshot")

#: Wall-clock bound on one call's transient-failure handling, the client's own retries included.
RETRY_DEADLINE = 300.0
#: Files transferred at once (what ``snapshot_download`` runs by default).
TRANSFER_WORKERS = 8


def materialize(
    repo_id: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    verify: VerifyMode = DEFAULT_VERIFY,
    retries: int = DEFAULT_RETRIES,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    offline: bool | None = None,
    strict: bool = False,
    session: str | None = None,
    token: str | bool | None = None,
    space_check: bool = True,
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT,
    pins: str | os.PathLike[str] | None = None,
    cache_layers: Sequence[str | os.PathLike[str]] = (),
    lock_lease: float | None = None,
    **keywords: Unpack[RequestKeywords],
) -> Snapshot:
    """Return a verified :class:`Snapshot` of ``repo_id`` at ``revision``, downloading at most once per cache.

    Args:
        repo_id: ``"org/name"``.
        **keywords: what to materialize, the keywords of every declaration form:
            ``revision="main"`` (a branch, tag or 40-hex commit), ``allow_patterns`` and
            ``ignore_patterns`` (globs as in ``snapshot_download``), ``repo_type="model"``
            (``"dataset"``, ``"space"``), ``metadata_only=False`` (True: everything but weight
            files, see ``request.WEIGHT_PATTERNS``), ``private=False``; see
            :meth:`~pytest_hfsnapshot.request.SnapshotRequest.build`.
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
        space_check: before transferring, refuse a snapshot that does not fit in the cache's free
            space (see :mod:`pytest_hfsnapshot.core.space`); False for filesystems whose free space
            means nothing.
        max_rate_wait: the longest wait, in seconds, for a rate-limit window of the Hub to reset;
            every request of the call goes through the rate-limit gate (:mod:`pytest_hfsnapshot.core.gate`).
            Inside a pytest session the session's gate, and so its ``--hf-max-rate-wait``, is used.
        pins: a pin file (``--hf-pins``, :mod:`pytest_hfsnapshot.core.pins`): a branch or tag it
            lists resolves to its pinned commit without a request, online and offline, whatever
            the patterns; a malformed file raises InvalidRequestError naming the file and entry.
        cache_layers: read-only huggingface_hub caches (a mounted bucket, a cache baked into an
            image) searched in this order before anything is fetched into ``cache_dir``: what they
            hold is linked from ``cache_dir``, never copied, and nothing is written into them (see
            :mod:`pytest_hfsnapshot.core.layers`). A folder that does not exist or cannot be read
            raises InvalidRequestError; one that fails during the session is left with a warning.
            Default (none given): the folders ``HFSNAPSHOT_CACHE_LAYERS`` names, joined by ``os.pathsep``.
        lock_lease: seconds the repo lock's lease lasts without renewal where the lock is a lease
            (a cache without flock, or ``HFSNAPSHOT_LOCK_MODE=lease``); every host sharing the
            cache must use the same. Default: ``HFSNAPSHOT_LOCK_LEASE``, else 60.

    Raises:
        AuthError: the Hub refused access (gated, private, a rejected token).
        RevisionNotFoundError: the branch, tag or commit does not exist.
        EntryNotFoundError: a file of the listing is not on the Hub.
        TransientError: transient failures outlasted the retry budget (``RateLimitError``: a
            rate-limit window longer than ``max_rate_wait``).
        OfflineMissingError: offline (or the Hub unreachable) and the snapshot is not fully cached.
        UnverifiedRevisionError: ``strict`` and the Hub could not confirm a cached branch or tag.
        VerificationError: the snapshot could not be made to match the Hub's listing.
        UnsafeCacheError: a write would reach outside the repo's cache folder.
        LockTimeoutError: another process held the repo lock past ``lock_timeout``.
        LockLostError: another host took the repo's lease over while this call held it.
        DiskError: the cache's filesystem refused a write, or the snapshot does not fit.
        InvalidRequestError: a malformed repo id, keyword or setting.
    """
    request = SnapshotRequest.from_keywords(repo_id, keywords, form="materialize()")
    from_env = not cache_layers
    if from_env:
        cache_layers = env_layers()
    settings = Settings(
        cache_dir=cache_dir,
        verify=verify,
        retries=retries,
        lock_timeout=lock_timeout,
        offline=offline,
        strict=strict,
        session=session,
        token=token,
        space_check=space_check,
        max_rate_wait=max_rate_wait,
        pins=pins,
        cache_layers=cache_layers,
        lock_lease=lock_lease,
    )
    if settings.cache_layers:
        resolved = settings.resolved()
        assert resolved.cache_dir is not None
        try:
            open_layers(layer_roots(settings), cache_dir=Path(resolved.cache_dir), session=settings.session)
        except InvalidRequestError as error:
            if not from_env:
                raise
            raise InvalidRequestError(f"{LAYERS_ENV}: {error}") from None
    return materialize_request(request, settings)


def layer_roots(settings: Settings) -> list[Path]:
    """The settings' cache layers, as paths."""
    return [Path(layer) for layer in settings.cache_layers]


def materialize_request(
    request: SnapshotRequest, settings: Settings | None = None, *, warn_unmatched: bool = True
) -> Snapshot:
    """:func:`materialize` for an already validated request, made with ``settings`` (default: the defaults).

    ``warn_unmatched=False``: say nothing of an ``allow_patterns`` entry that selects no file (a
    one-file selection of a path the commit lacks, see :mod:`pytest_hfsnapshot.core.file_materialize`).
    """
    with own_work():
        snapshot = _Engine(request, settings or Settings()).run()
    for pattern in request.unmatched_allow_patterns(snapshot.files) if warn_unmatched else ():
        log.warning("hfsnapshot: %s", request.unmatched_pattern_message(pattern))
    return snapshot


def plan_request(request: SnapshotRequest, settings: Settings | None = None) -> space.Need:
    """What :func:`materialize_request` would fetch for ``request`` now, without transferring a file.

    It resolves a branch and takes the listing as that call would, and leaves both where that
    call finds them (the session's resolution, or this process's; the client's tree cache), so
    planning first costs no extra request. Transient failures are not retried here: the call
    that follows retries them and says what failed. Only ``settings``' cache, session and token
    matter.
    """
    base = settings or Settings()
    planning = Settings(
        cache_dir=base.cache_dir,
        retries=0,
        offline=False,
        session=base.session,
        token=base.token,
        pins=base.pins,
        cache_layers=base.cache_layers,
    )
    # One unretried try is no verdict on the Hub: the call that follows spends the real budget.
    with own_work():
        return _Engine(request, planning, remembers_outages=False).plan()


def resolve_revision(request: SnapshotRequest, settings: Settings | None = None) -> str:
    """The commit ``request``'s branch or tag points at on the Hub now (``pytest-hfsnapshot pins``).

    One revision request, retried as :func:`materialize_request` retries it, through the rate-limit
    gate; no pin file, cache or earlier resolution is consulted and nothing is recorded. Only
    ``settings``' cache (for the session's state), session, token, retries and rate-limit wait
    matter. Raises the typed errors of :func:`materialize` (AuthError, RevisionNotFoundError,
    TransientError, ...).
    """
    engine = _Engine(request, dataclasses.replace(settings or Settings(), offline=False, pins=None))
    with own_work(), gate.for_call(engine.repo.cache_dir, engine.settings.max_rate_wait, engine.settings.session):
        return engine._hub_commit()


class _Engine:
    def __init__(self, request: SnapshotRequest, settings: Settings, *, remembers_outages: bool = True) -> None:
        settings = settings.resolved()
        assert settings.cache_dir is not None and settings.offline is not None
        self.request = request
        self.settings = settings
        self.repo = RepoCache(settings.cache_dir, request.repo_id, request.repo_type)
        self.started = time.monotonic()
        self.lock_wait = 0.0
        self.backoff = retry.Backoff(retries=self.settings.retries, deadline=self.started + RETRY_DEADLINE)
        #: Whether giving up on the Hub itself makes the session remember an outage (see outage.py).
        self.remembers_outages = remembers_outages
        self.layers = Layers(
            layer_roots(settings), cache_dir=self.repo.cache_dir, session=settings.session, label=request.label
        )
        self.repair = Repairer(self.repo, request.label, lock_timeout=self.settings.lock_timeout, layers=self.layers)
        #: Bytes of downloaded files hashed after their transfer (not while they arrived).
        self.rehashed = 0
        #: While waiting for the lock: the commit the holder works on, once known (it does not
        #: change), and the path of the record awaited.
        self._awaited: tuple[str, str] | None = None
        #: The commit the pin file gives the request's branch or tag; None when it is not listed.
        self.pin = pins.load(settings.pins).commit_for(request) if settings.pins is not None else None
        #: Called before each write step under the repo lock: raises LockLostError once the lock
        #: (a lease) is no longer this process's.
        self.still_held: HeldCheck = _always_held

    # --- entry --------------------------------------------------------------------------------
    def run(self) -> Snapshot:
        self.layers.probe()
        commit = self._known_commit()
        if commit is not None:
            snap = self._from_record(commit)
            if snap is not None:
                return snap
        try:
            self.repo.cache_dir.mkdir(parents=True, exist_ok=True)
            with RepoLock(
                self.repo,
                timeout=self.settings.lock_timeout,
                lease=self.settings.lock_lease,
                done=self._finished_elsewhere,
                watch=self.repo.records_dir,
            ) as lock:
                self.lock_wait = lock.wait
                if isinstance(lock.early, Snapshot):
                    return dataclasses.replace(lock.early, lock_wait=lock.wait, seconds=time.monotonic() - self.started)
                self.still_held = lock.ensure_held
                try:
                    return self._locked()
                except LockLostError:
                    # The new holder may have finished meanwhile: its verified snapshot is the answer.
                    commit = self._known_commit()
                    snap = self._from_record(commit) if commit is not None else None
                    if snap is None:
                        raise
                    return snap
        except HfSnapshotError:
            raise
        except OSError as error:
            # Our own writes (locks, refs, records): the same words as a refused download.
            number = retry.filesystem_errno(error)
            if number is None:
                raise
            raise self._disk(error, number) from error

    def plan(self) -> space.Need:
        """See :func:`plan_request`."""
        nothing = space.Need(self.request.label, self.repo.cache_dir, ())
        self.layers.probe()
        commit = self._known_commit()
        if commit is not None and self._from_record(commit) is not None:
            return nothing
        if commit is None:
            commit, unverified = self._resolve()
            if unverified:
                return nothing  # the cache is all the call can use
        listing = self._listing(commit, network=True)
        assert listing is not None
        files = listing_mod.select(self.request, listing, commit)
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        if self.repair.folders(commit, files)[0]:
            files = [f for f in files if check_file(self.repo, snapshot_dir, f, self.layers.roots) is not None]
        held = self.layers.find(self.repo, commit, files, hash_all=False, contents=False)
        return space.need(self.repo, self.request.label, [f for f in files if f.path not in held])

    def _finished_elsewhere(self) -> Snapshot | None:
        """While waiting for the lock: the snapshot the holder just recorded, if that is what it did.

        One stat while the record is absent; the full checks only once it appears.
        """
        if self._awaited is None:
            commit = self._known_commit()
            if commit is None:
                return None
            self._awaited = (commit, os.fspath(state.record_path(self.repo, self.request, commit)))
        commit, record = self._awaited
        if not os.path.exists(record):
            return None
        return self._from_record(commit)

    def _locked(self) -> Snapshot:
        commit = self._known_commit()
        if commit is not None:
            snap = self._from_record(commit)
            if snap is not None:
                return snap
        if self.settings.offline:
            try:
                return self._offline(commit)
            except OfflineMissingError as missing:
                raise self._refused_before() or missing from None
        try:
            # The session's rate-limit gate when one is installed (the plugin's), else one for this call.
            with gate.for_call(self.repo.cache_dir, self.settings.max_rate_wait, self.settings.session):
                return self._online_locked(commit)
        except AuthError as refused:
            # Remembered so that an offline run after a tokenless prefetch skips like this one.
            state.remember_refusal(self.repo, reason=refused.reason, message=str(refused), token_set=self._token_set())
            raise

    def _refused_before(self) -> HfSnapshotError | None:
        """The Hub's recorded refusal of this repo, as the error an online run would have raised.

        Replayed only under the token situation it was met in; otherwise the snapshot is simply
        not cached, and the error says how to prefetch it with the current token.
        """
        data = state.recalled_refusal(self.repo)
        if data is None or data.get("reason") not in refusals.AUTH_REASONS:
            return None
        recorded = data.get("token_set")
        if not isinstance(recorded, bool) or not refusals.replay_refused(
            recorded_token_set=recorded, token_set=self._token_set()
        ):
            return self._not_cached(
                refusals.not_replayed_message(
                    self.request.label, recorded_token_set=bool(recorded), cache_dir=str(self.repo.cache_dir)
                ),
                f"refs/{self.request.revision}",
            )
        return AuthError(
            f"{data.get('message', '')} (The Hub refused it during an earlier online run, and this run is offline.)",
            reason=str(data["reason"]),
            repo_id=self.request.repo_id,
            revision=self.request.revision,
        )

    def _token_set(self) -> bool:
        """Whether this call sends a token: the one given, or huggingface_hub's own lookup."""
        if isinstance(self.settings.token, str):
            return bool(self.settings.token)
        if self.settings.token is False:
            return False
        return token_set()

    def _online_locked(self, commit: str | None) -> Snapshot:
        unverified = False
        if commit is None:
            commit, unverified = self._resolve()
        if unverified:
            if self.settings.strict:
                raise UnverifiedRevisionError(
                    f"The Hub at {_hub()} could not be reached to confirm what {self.request.label} points at, and "
                    f"--hf-strict is on. The cache has commit {commit[:12]}; pin that commit or retry "
                    "when the Hub is reachable.",
                    repo_id=self.request.repo_id,
                    revision=self.request.revision,
                )
            return self._cached_only(commit, unverified=True)
        return self._online(commit)

    # --- what we already know ---------------------------------------------------------------
    def _known_commit(self) -> str | None:
        if self.request.pinned:
            return self.request.revision
        if self.pin is not None:
            return self.pin  # no request, online or offline: the pin file says what the branch means
        commit = state.resolved(self.repo, self.request, self.settings.session)
        if commit is not None:
            return commit
        if self.settings.offline:
            return self._cached_ref()
        return None

    def _cached_ref(self) -> str | None:
        """The commit the revision's ref names in the writable cache, else in the first layer holding one."""
        return self.repo.read_ref(self.request.revision) or self.layers.read_ref(self.repo, self.request.revision)

    def _from_record(self, commit: str) -> Snapshot | None:
        files = state.read_record(self.repo, self.request, commit)
        if files is None or not self.repair.folders(commit, files)[0]:
            return None
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        layers = self.layers.roots
        if not all_fine(self.repo, snapshot_dir, files, layers):
            return None
        if self.repo.has_incomplete_blobs():
            return None  # an orphan to clean up (or a download in flight): the slow path decides
        if self.settings.verify == "sha256" and hash_mismatches(self.repair.blob_pairs(commit, files)):
            return None
        return self._snapshot(commit, files, "cache")

    # --- resolution ---------------------------------------------------------------------------
    def _api(self) -> HfApi:
        return HfApi(token=self.settings.token)

    def _resolve(self) -> tuple[str, bool]:
        """The commit a branch or tag points at now, or (cached commit, True) when the Hub is unreachable."""
        try:
            commit = self._hub_commit()
        except TransientError:
            cached = self._cached_ref()
            if cached is None:
                raise
            log.warning(
                "hfsnapshot: the Hub at %s is unreachable; using the cached %s at %s (unverified revision)",
                _hub(),
                self.request.label,
                cached[:12],
            )
            return cached, True
        state.remember_resolution(self.repo, self.request, self.settings.session, commit)
        return commit, False

    def _hub_commit(self) -> str:
        """What the Hub says the branch or tag points at, asked with retries."""
        info = self._with_retries(
            lambda: self._api().repo_info(
                self.request.repo_id, repo_type=self.request.repo_type, revision=self.request.revision
            ),
            what="the revision",
        )
        commit = getattr(info, "sha", None)
        if not isinstance(commit, str) or not is_commit(commit):
            raise VerificationError(
                f"The Hub answered for {self.request.label} without a commit id; check HF_ENDPOINT.",
                repo_id=self.request.repo_id,
                revision=self.request.revision,
            )
        return commit

    def _with_retries(self, call: Any, *, what: str, filename: str | None = None, retried: bool = True) -> Any:
        """Run ``call``, retrying transient failures; ``retried=False`` when the client retries it already."""
        cache, session = self.repo.cache_dir, self.settings.session
        down = outage.known(cache, session, _hub())
        if down is not None:
            raise self._unreachable(down, what)
        while True:
            try:
                result = call()
                outage.forget(cache, session, _hub())
                return result
            except HfSnapshotError:
                raise
            except Exception as error:
                kind = retry.classify(error)
                self._next_attempt(error, kind, what=what, filename=filename, retried=retried, hub_call=True)
                log.info("hfsnapshot: retrying %s of %s after %s", what, self.request.label, _cause(kind))

    def _next_attempt(
        self,
        error: BaseException,
        kind: retry.Classification,
        *,
        what: str,
        filename: str | None,
        retried: bool = True,
        hub_call: bool,
    ) -> None:
        """The one retry rule, after a failed attempt: return once the backoff has passed, to try
        again; otherwise raise the typed error (not transient) or the give-up (budget spent).

        ``retried=False``, or a request the client has just retried with its own backoff: another
        round of ours on top would multiply the layers. A rate-limit window the session's gate holds
        is waited out there, not here. ``hub_call``: a call to the Hub itself (revision, listing),
        whose give-up makes the session remember an outage.
        """
        if kind.kind != "transient":
            raise self._typed(error, kind) from error
        give_up = self._gave_up if hub_call else self._exhausted
        backoff = self.backoff
        if not retried or kind.client_retried:
            backoff.attempts += 1
            raise give_up(error, kind, backoff.attempts, what, filename) from error
        if not backoff.wait(None if gate.holds(kind) else kind.retry_after):
            raise give_up(error, kind, backoff.attempts, what, filename) from error

    def _typed(self, error: BaseException, kind: retry.Classification) -> HfSnapshotError:
        if kind.kind == "revision_not_found" and self.pin is not None and self.settings.pins is not None:
            # Every request asked for the pinned commit: that commit, not the branch, is what is gone.
            return pins.missing_commit(self.settings.pins, self.request, self.pin, _hub())
        return error_builders.typed(
            self.request, error, kind, token_set=self._token_set(), cache_dir=self.repo.cache_dir
        )

    def _disk(self, error: BaseException, number: int, still: list[ExpectedFile] | None = None) -> DiskError:
        return error_builders.disk(
            self.request, error, number, cache_dir=self.repo.cache_dir, blobs=self.repo.blobs, still=still or ()
        )

    def _gave_up(
        self, error: BaseException, kind: retry.Classification, attempts: int, what: str, filename: str | None
    ) -> TransientError:
        """:meth:`_exhausted` for a call to the Hub itself; an unreachable Hub is remembered for the session."""
        if self.remembers_outages and (kind.status is None or kind.status >= 500):
            outage.remember(self.repo.cache_dir, self.settings.session, _hub(), _cause(kind))
        return self._exhausted(error, kind, attempts, what, filename)

    def _unreachable(self, down: outage.Outage, what: str) -> TransientError:
        return error_builders.unreachable(self.request, down, what)

    def _check_space(self, needed: list[ExpectedFile]) -> None:
        """Refuse, before the first byte, a download the cache's filesystem cannot take."""
        want = [space.need(self.repo, self.request.label, needed)]
        short = space.shortfall(want)
        if short is not None and self.repo.incomplete_blobs():
            self.repair.remove_orphans()  # debris of killed downloads holds space the check counts as taken
            short = space.shortfall(want)
        if short is not None:
            raise space.not_enough_space(want, short, repo_id=self.request.repo_id, revision=self.request.revision)

    def _exhausted(
        self, error: BaseException, kind: retry.Classification, attempts: int, what: str, filename: str | None
    ) -> TransientError:
        return error_builders.gave_up(self.request, error, kind, attempts, what, filename)

    # --- listing ------------------------------------------------------------------------------
    def _listing(self, commit: str, *, network: bool) -> dict[str, ExpectedFile] | None:
        raw = self.repo.read_listing_cache(commit)
        if raw is not None:
            try:
                return listing_mod.parse(self.repo, raw)
            except (KeyError, TypeError, ValueError):
                raw = None
        layered = self.layers.listing(self.repo, commit)
        if layered is not None:
            try:
                listing = listing_mod.parse(self.repo, layered)
            except (KeyError, TypeError, ValueError):
                pass
            else:
                self.repo.write_listing_cache(commit, layered)  # where the client's own offline calls look
                return listing
        if not network:
            return None

        raw = self._with_retries(
            lambda: listing_mod.fetch(self._api(), self.request, commit),
            what="the file listing",
            retried=not retry.client_retries_listings(),
        )
        listing = listing_mod.parse(self.repo, raw)
        self.repo.write_listing_cache(commit, raw)
        return listing

    # --- offline and unverified ---------------------------------------------------------------
    def _offline(self, commit: str | None) -> Snapshot:
        if commit is None:
            raise self._not_cached(
                f"Offline, and the cache has no usable refs/{self.request.revision} for {self.request.label} "
                f"in {self.repo.cache_dir}. Run `pytest --hf-prefetch-only` online first, or pin a cached commit.",
                f"refs/{self.request.revision}",
            )
        return self._cached_only(commit, unverified=False)

    def _not_cached(self, message: str, *missing: str) -> OfflineMissingError:
        return error_builders.not_cached(self.request, message, *missing)

    def _cached_only(self, commit: str, *, unverified: bool) -> Snapshot:
        """Serve what the cache holds for ``commit`` without any network, or say what is missing."""
        snap = self._from_record(commit)
        if snap is None:
            listing = self._listing(commit, network=False)
            what = "Offline" if self.settings.offline else "The Hub is unreachable"
            if listing is None:
                raise self._not_cached(
                    f"{what}, and the cache has no file listing for {self.request.label} (commit {commit[:12]}) "
                    f"in {self.repo.cache_dir}. Run `pytest --hf-prefetch-only` online first.",
                    f"trees/{commit}.json",
                )
            files = listing_mod.select(self.request, listing, commit)
            findings = self.repair.inspect(commit, files, hash_all=self.settings.verify == "sha256")
            problems = dict(findings.problems)
            served, repaired = self._serve_from_layers(commit, files, problems)
            if problems:
                listed = ", ".join(f"{p} ({problem.describe()})" for p, problem in sorted(problems.items())[:5])
                more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
                raise self._not_cached(
                    f"{what}, and {len(problems)} file(s) of {self.request.label} are missing or damaged in "
                    f"{self.repo.cache_dir}: {listed}{more}. Run `pytest --hf-prefetch-only` online first.",
                    *sorted(problems),
                )
            # Orphans of killed downloads need no network to go, and a verified snapshot has none.
            self.still_held()
            self.repair.remove_orphans()
            if not self.request.pinned and self.repo.read_ref(self.request.revision) is None:
                # The ref came from a layer: test code loading the repo by id offline reads this cache's.
                self.repo.write_ref(self.request.revision, commit)
            self._write_record(commit, files, {**findings.adopted, **served})
            snap = self._snapshot(commit, files, "cache", repaired=tuple(sorted(repaired)))
        if unverified:
            snap = dataclasses.replace(snap, unverified_revision=True)
        return snap

    # --- online: inspect, repair, download, verify ---------------------------------------------
    def _online(self, commit: str) -> Snapshot:
        listing = self._listing(commit, network=True)
        assert listing is not None
        files = listing_mod.select(self.request, listing, commit)
        damaged = False
        if not self.request.pinned:
            # An empty or garbage ref is damage; a branch that moved on is not.
            ref = self.repo.ref(self.request.revision)
            damaged = ref.is_file() and self.repo.read_ref(self.request.revision) is None
            self.still_held()
            self.repo.write_ref(self.request.revision, commit)
        findings = self.repair.inspect(commit, files, hash_all=self.settings.verify == "sha256")
        problems, adopted = dict(findings.problems), dict(findings.adopted)
        served, repaired = self._serve_from_layers(commit, files, problems)
        adopted.update(served)
        blobs_before = _blob_names(self.repo.blobs)
        orphans = self.repo.incomplete_blobs()
        interrupted = {p.name.split(".", 1)[0] for p in orphans}
        for f in files:
            problem = problems.get(f.path)
            if problem is None:
                continue
            if (
                problem.kind is ProblemKind.MISSING
                and f.blob_name not in blobs_before
                and f.blob_name not in interrupted
            ):
                continue  # simply not downloaded yet
            repaired.append(f.path)
            self.still_held()
            self.repair.remove(commit, f, problem)
        damaged = damaged or bool(repaired) or bool(orphans) or findings.planted
        blobs_before = _blob_names(self.repo.blobs)
        needed = [f for f in files if f.path in problems]
        fetched = False
        if needed:
            if self.settings.space_check:
                self._check_space(needed)
            adopted.update(self._download(commit, needed, blobs_before))
            fetched = True
        self.still_held()
        self.repair.remove_orphans()
        self._write_record(commit, files, adopted)
        state.forget_refusal(self.repo)
        source: Source = "repair" if damaged else ("download" if fetched else "cache")
        if repaired:
            log.info("hfsnapshot: repaired %s: %s", self.request.label, ", ".join(repaired))
        return self._snapshot(commit, files, source, repaired=tuple(sorted(repaired)), transferred=fetched)

    def _serve_from_layers(
        self, commit: str, files: list[ExpectedFile], problems: dict[str, Problem]
    ) -> tuple[dict[str, ExpectedFile], list[str]]:
        """Link, in place of the files ``problems`` names, those the layers hold good.

        Returns the entries the record keeps for them and the paths whose damage here was removed;
        the files served leave ``problems``. A file whose blob this cache still holds (a link is
        missing, not its bytes) is left to the client, which links it without a transfer.
        """
        if not self.layers or not problems:
            return {}, []
        wanted = [f for f in files if f.path in problems]
        found = self.layers.find(self.repo, commit, wanted, hash_all=self.settings.verify == "sha256")
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        served: dict[str, ExpectedFile] = {}
        repaired: list[str] = []
        for f in wanted:
            one = found.get(f.path)
            if one is None:
                continue
            problem = problems[f.path]
            blob = self.repo.blob(one.entry.blob_name)
            if not problem.blob_damaged and os.path.lexists(blob) and not links_to(blob, one.file):
                continue
            if problem.kind is not ProblemKind.MISSING:
                self.still_held()
                self.repair.remove(commit, f, problem)
            if os.path.lexists(blob) and not os.path.islink(blob):
                continue  # a blob of this cache's own stays: the client links it
            if problem.kind is not ProblemKind.MISSING:
                repaired.append(f.path)
            self.still_held()  # a link into a layer is a write step like any other
            link_into_layer(self.repo, commit, one, self.repair.blob_lock)
            after = check_file(self.repo, snapshot_dir, one.entry, self.layers.roots)
            if after is not None:
                problems[f.path] = after  # the layer failed meanwhile: repaired like any damage
                continue
            served[f.path] = one.entry
            del problems[f.path]
        return served, repaired

    def _download(self, commit: str, needed: list[ExpectedFile], blobs_before: set[str]) -> dict[str, ExpectedFile]:
        """Fetch ``needed`` until each is verified; returns the files adopted under another blob name."""
        request = self.request
        adopted: dict[str, ExpectedFile] = {}
        snapshot_dir = str(self.repo.snapshot_dir(commit))
        while True:
            # How the files left go: what hf_xet reports is read as its own only when it carries some.
            through_xet = xet_in_use() and any(f.xet for f in needed)
            failure: BaseException | None = None
            arrivals = ArrivalHasher(self.repo.blobs, needed)
            try:
                with xet.transfer_settings():
                    arrivals.run(self._transfer, commit, needed)
            except HfSnapshotError:
                raise
            except Exception as error:
                failure = error
            still: list[ExpectedFile] = []
            fresh: list[ExpectedFile] = []
            for f in needed:
                problem = check_file(self.repo, snapshot_dir, f, self.layers.roots)
                if problem is None:
                    fresh.append(f)
                elif problem.kind is ProblemKind.OTHER_BLOB and (candidate := self.repair.adopted(commit, f)):
                    adopted[f.path] = candidate  # hashed and found right under the name the server's ETag gave it
                elif problem.kind is not ProblemKind.MISSING:
                    self.still_held()
                    self.repair.remove(commit, f, problem)
                    still.append(f)
                else:
                    still.append(f)
            new = [f for f in fresh if f.blob_name not in blobs_before or self.settings.verify == "sha256"]
            corrupt = set(arrivals.mismatches(self.repair.blob_pairs(commit, new)))
            self.rehashed += arrivals.rehashed
            for f in fresh:
                if f.path in corrupt:
                    self.still_held()
                    self.repair.remove(commit, f, hash_problem(f))
                    still.append(f)
            if not still:
                return adopted
            if failure is None:
                failure = retry.ContentMismatch(
                    f"{len(still)} file(s) arrived with the wrong size or hash: "
                    + ", ".join(sorted(f.path for f in still)[:5])
                )
            kind = retry.classify(failure, through_xet=through_xet)
            if kind.kind == "disk" and kind.errno is not None:
                self.still_held()
                self.repair.remove_orphans()
                raise self._disk(failure, kind.errno, still) from failure
            filename = _failed_file(failure) or sorted(f.path for f in still)[0]
            self._next_attempt(failure, kind, what="the download", filename=filename, hub_call=False)
            log.info(
                "hfsnapshot: retrying the download of %s (%d file(s) left) after %s",
                request.label,
                len(still),
                _cause(kind),
            )
            needed = still
            blobs_before = _blob_names(self.repo.blobs)

    def _transfer(self, commit: str, files: list[ExpectedFile]) -> None:
        """Fetch ``files`` at ``commit``, one ``hf_hub_download`` each, as ``snapshot_download`` does
        (the listing is cached and the revision a commit, so none asks the Hub for either again),
        checking before each that the repo lock is still this process's, after waiting (within the
        lock timeout) for the client's own lock of that file.

        Every file is tried (a failure stops no other); then the first failure in listing order
        is raised, a lost lock before any other.
        """

        def fetch(f: ExpectedFile) -> None:
            self.still_held()
            wait_for_client_lock(self.repo, f.blob_name, f.path, self.settings.lock_timeout)
            # Said under the check: a loss another thread learns of is said after it (see ensure_held).
            self.still_held(lambda: log.debug("hfsnapshot: fetching %s of %s", f.path, self.request.label))
            hf_hub_download(
                self.request.repo_id,
                f.path,
                repo_type=self.request.repo_type,
                revision=commit,
                cache_dir=str(self.repo.cache_dir),
                token=self.settings.token,
            )

        with ThreadPoolExecutor(max_workers=TRANSFER_WORKERS, thread_name_prefix="hfsnapshot-fetch") as pool:
            futures = [pool.submit(fetch, f) for f in files]
        errors = [error for future in futures if (error := future.exception()) is not None]
        lost = [error for error in errors if isinstance(error, LockLostError)]
        if lost or errors:
            raise (lost or errors)[0]

    # --- results ------------------------------------------------------------------------------
    def _write_record(self, commit: str, files: list[ExpectedFile], adopted: dict[str, ExpectedFile]) -> None:
        state.write_record(self.repo, self.request, commit, [adopted.get(f.path, f) for f in files])

    def _snapshot(
        self,
        commit: str,
        files: list[ExpectedFile],
        source: Source,
        repaired: tuple[str, ...] = (),
        *,
        transferred: bool = False,
    ) -> Snapshot:
        """The Snapshot handed out; ``source`` becomes ``"layer"`` when a layer serves a file and
        nothing was ``transferred``."""
        usage.record_use(self.repo.cache_dir, self.request.repo_type, self.request.repo_id, commit)
        layers = self.layers.serving(self.repo, files) if self.layers else ()
        if layers and not transferred:
            source = "layer"
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
            layers=layers,
        )


class HeldCheck(Protocol):
    """The check before each write step under the repo lock (:meth:`RepoLock.ensure_held`)."""

    def __call__(self, then: Callable[[], None] | None = None) -> None: ...


def _always_held(then: Callable[[], None] | None = None) -> None:
    """The lock check before the lock is taken, or where nothing can take it away."""
    if then is not None:
        then()


def _blob_names(blobs: Path) -> set[str]:
    try:
        return set(os.listdir(blobs))
    except OSError:
        return set()
