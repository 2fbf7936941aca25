"""``materialize()``: one verified snapshot per cache, under a cross-process lock.

Cheapest first, each step a module: the fast path with no lock or network (:mod:`.resolve`,
:mod:`.record`); else, under the repo lock, the listing, what layers serve, the damage removed,
what is missing fetched and hashed (:mod:`.fetch`), the record written; offline, :mod:`.cache_only`."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

from ...errors import AuthError, HfSnapshotError, InvalidRequestError, LockLostError
from ...request import SnapshotRequest
from ...settings import Settings, takes_knobs
from ...snapshot import Snapshot, Source
from ..cache import layers, state
from ..cache.layers import LAYERS_ENV, env_layers, layer_roots, open_layers
from ..cache.locking import HeldCheck, RepoLock
from ..hub import gate, retry
from ..hub.retry import Retrier
from ..own_work import own_work
from . import cache_only, error_builders, fetch, listing, record, resolve, space
from .call import Call

log = logging.getLogger("pytest_hfsnapshot")


@takes_knobs
def materialize(repo_id: str, **keywords: Any) -> Snapshot:
    """Return a verified :class:`Snapshot` of ``repo_id`` at ``revision``, downloading at most once per cache.

    Args:
        repo_id: ``"org/name"``.
        **keywords: what to materialize, the keywords of every declaration form
            (:class:`~pytest_hfsnapshot.request.RequestKeywords`: ``revision="main"``,
            ``allow_patterns``, ``ignore_patterns``, ``repo_type="model"``, ``metadata_only=False``,
            ``private=False``), and how: each knob of :class:`~pytest_hfsnapshot.settings.Settings`
            (``cache_dir``, ``verify``, ``retries``, ``lock_timeout``, ``pins``, ``cache_layers``, ...),
            whose type, default and meaning are declared there. ``cache_layers`` not given: the
            folders the environment names.

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
        InvalidRequestError: a malformed repo id, an unknown keyword, or a value of the wrong type.
    """
    from_env = not keywords.get("cache_layers")
    if from_env:
        keywords = {**keywords, "cache_layers": env_layers()}
    given, settings = Settings.split(keywords)
    request = SnapshotRequest.from_keywords(repo_id, given, form="materialize()")
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


def materialize_request(
    request: SnapshotRequest, settings: Settings | None = None, *, warn_unmatched: bool = True
) -> Snapshot:
    """:func:`materialize` for an already validated request, made with ``settings`` (default: the defaults).

    ``warn_unmatched=False``: say nothing of an ``allow_patterns`` entry that selects no file (a
    one-file selection of a path the commit lacks, see :mod:`pytest_hfsnapshot.core.implicit.file_materialize`).
    """
    with own_work():
        snapshot = _run(Call.start(request, settings or Settings()))
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
        return fetch.plan(Call.start(request, planning, remembers_outages=False))


def resolve_revision(request: SnapshotRequest, settings: Settings | None = None) -> str:
    """The commit ``request``'s branch or tag points at on the Hub now (``pytest-hfsnapshot pins``).

    One revision request, retried as :func:`materialize_request` retries it, through the rate-limit
    gate; no pin file, cache or earlier resolution is consulted and nothing is recorded. Only
    ``settings``' cache (for the session's state), session, token, retries and rate-limit wait
    matter. Raises the typed errors of :func:`materialize` (AuthError, RevisionNotFoundError,
    TransientError, ...).
    """
    call = Call.start(request, dataclasses.replace(settings or Settings(), offline=False, pins=None))
    with own_work(), gate.for_call(call.repo.cache_dir, call.settings.max_rate_wait, call.settings.session):
        return resolve.hub_commit(call, call.retrier())


def _run(call: Call) -> Snapshot:
    """The fast path, else the work under the repo lock (or the snapshot its holder just recorded)."""
    call.layers.probe()
    snap = record.recorded(call, resolve.known_commit(call))
    if snap is not None:
        return snap
    repo, settings = call.repo, call.settings
    try:
        repo.cache_dir.mkdir(parents=True, exist_ok=True)
        with RepoLock(
            repo,
            timeout=settings.lock_timeout,
            lease=settings.lock_lease,
            done=record.Awaited(call),
            watch=repo.records_dir,
        ) as lock:
            if isinstance(lock.early, Snapshot):
                return dataclasses.replace(lock.early, lock_wait=lock.wait, seconds=time.monotonic() - call.started)
            return dataclasses.replace(_under_lock(call, lock.ensure_held), lock_wait=lock.wait)
    except HfSnapshotError:
        raise
    except OSError as error:
        # Our own writes (locks, refs, records): the same words as a refused download.
        number = retry.filesystem_errno(error)
        if number is None:
            raise
        raise error_builders.disk(call.request, error, number, cache_dir=repo.cache_dir, blobs=repo.blobs) from error


def _under_lock(call: Call, held: HeldCheck) -> Snapshot:
    """Under the repo lock: :func:`_locked`; a lost lock is no failure once the new holder is done."""
    try:
        return _locked(call, held)
    except LockLostError:
        # The new holder may have finished meanwhile: its verified snapshot is the answer.
        snap = record.recorded(call, resolve.known_commit(call))
        if snap is None:
            raise
        return snap


def _locked(call: Call, held: HeldCheck) -> Snapshot:
    """Under the repo lock: the record again (another process may just have written it), else
    the cache alone (offline), else the Hub's listing made true in the cache."""
    commit = resolve.known_commit(call)
    snap = record.recorded(call, commit)
    if snap is not None:
        return snap
    if call.settings.offline:
        return cache_only.offline(call, held, commit)
    retrier = call.retrier()
    try:
        # The session's rate-limit gate when one is installed (the plugin's), else one for this call.
        with gate.for_call(call.repo.cache_dir, call.settings.max_rate_wait, call.settings.session):
            found = resolve.Resolved(commit) if commit is not None else resolve.resolve(call, retrier)
            if found.unverified:
                return cache_only.unverified(call, held, found.commit)
            return _online(call, retrier, held, found.commit)
    except AuthError as refused:
        # Remembered so that an offline run after a tokenless prefetch skips like this one.
        state.remember_refusal(call.repo, reason=refused.reason, message=str(refused), token_set=call.token_set())
        raise


def _online(call: Call, retrier: Retrier, held: HeldCheck, commit: str) -> Snapshot:
    """The steps online: the listing, the ref, what is cached, what layers serve, the damage
    removed, what is missing fetched and verified, the record written."""
    files = listing.select(call.request, listing.load(call, retrier, commit), commit)
    ref_damaged = resolve.record_ref(call, held, commit)
    findings = call.repair.inspect(commit, files, hash_all=call.hash_all)
    served = layers.serve(call.layers, call.repair, held, commit, files, findings.problems, hash_all=call.hash_all)
    cleared = call.repair.clear(held, commit, files, served.problems)
    needed = [f for f in files if f.path in served.problems]
    fetched = fetch.download(call, retrier, held, commit, needed) if needed else fetch.Fetched()
    held()
    call.repair.remove_orphans()
    record.write(call, commit, files, {**findings.adopted, **served.entries, **fetched.adopted})
    state.forget_refusal(call.repo)
    repaired = served.repaired + cleared.repaired
    damaged = ref_damaged or bool(repaired) or cleared.orphans or findings.planted
    source: Source = "repair" if damaged else ("download" if needed else "cache")
    if repaired:
        log.info("hfsnapshot: repaired %s: %s", call.request.label, ", ".join(repaired))
    done = tuple(sorted(repaired))
    return record.snapshot(
        call, commit, files, source, repaired=done, rehashed=fetched.rehashed, transferred=bool(needed)
    )


__all__ = ["layer_roots", "materialize", "materialize_request", "plan_request", "resolve_revision"]
