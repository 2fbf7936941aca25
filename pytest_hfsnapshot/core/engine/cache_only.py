"""A snapshot from the cache alone: offline, or with the Hub unreachable (an unverified revision)."""

from __future__ import annotations

import dataclasses

from ...errors import AuthError, HfSnapshotError, OfflineMissingError, UnverifiedRevisionError
from ...settings import prefetch_command, say
from ...snapshot import Snapshot
from ..cache import layers, state
from ..cache.formats import count
from ..cache.locking import HeldCheck
from ..hub import refusals
from . import listing, record
from .call import Call
from .error_builders import hub, not_cached


def offline(call: Call, held: HeldCheck, commit: str | None) -> Snapshot:
    """Offline: the cached snapshot of ``commit`` (None: the cache knows no commit for the revision)."""
    request = call.request
    try:
        if commit is None:
            raise not_cached(
                request,
                f"Offline, and the cache has no usable refs/{request.revision} for {request.label} "
                f"in {call.repo.cache_dir}. Run {prefetch_command()} online first, or pin a cached commit.",
                f"refs/{request.revision}",
            )
        return serve(call, held, commit, unverified=False)
    except OfflineMissingError as missing:
        raise refused_before(call) or missing from None


def unverified(call: Call, held: HeldCheck, commit: str) -> Snapshot:
    """The Hub is unreachable: the cached snapshot of ``commit``, the commit the cached ref names."""
    request = call.request
    if call.settings.strict:
        raise UnverifiedRevisionError(
            f"The Hub at {hub()} could not be reached to confirm what {request.label} points at, and "
            f"{say('strict')} is on. The cache has commit {commit[:12]}; pin that commit or retry "
            "when the Hub is reachable.",
            repo_id=request.repo_id,
            revision=request.revision,
        )
    return serve(call, held, commit, unverified=True)


def serve(call: Call, held: HeldCheck, commit: str, *, unverified: bool) -> Snapshot:
    """Serve what the cache holds for ``commit`` without any network, or say what is missing."""
    snap = record.recorded(call, commit)
    if snap is None:
        snap = _served(call, held, commit)
    if unverified:
        snap = dataclasses.replace(snap, unverified_revision=True)
    return snap


def _served(call: Call, held: HeldCheck, commit: str) -> Snapshot:
    request, repo = call.request, call.repo
    listed = listing.cached(repo, call.layers, commit)
    what = "Offline" if call.settings.offline else "The Hub is unreachable"
    if listed is None:
        raise not_cached(
            request,
            f"{what}, and the cache has no file listing for {request.label} (commit {commit[:12]}) "
            f"in {repo.cache_dir}. Run {prefetch_command()} online first.",
            f"trees/{commit}.json",
        )
    files = listing.select(request, listed, commit)
    findings = call.repair.inspect(commit, files, hash_all=call.hash_all)
    served = layers.serve(call.layers, call.repair, held, commit, files, findings.problems, hash_all=call.hash_all)
    problems = served.problems
    if problems:
        listed_problems = ", ".join(f"{p} ({problem.describe()})" for p, problem in sorted(problems.items())[:5])
        more = f" and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise not_cached(
            request,
            f"{what}, and {count(len(problems), 'file')} of {request.label} {'is' if len(problems) == 1 else 'are'} "
            f"missing or damaged in "
            f"{repo.cache_dir}: {listed_problems}{more}. Run {prefetch_command()} online first.",
            *sorted(problems),
        )
    # Orphans of killed downloads need no network to go, and a verified snapshot has none.
    held()
    call.repair.remove_orphans()
    if not request.pinned and repo.refs.read(request.revision) is None:
        # The ref came from a layer: test code loading the repo by id offline reads this cache's.
        repo.refs.write(request.revision, commit)
    record.write(call, commit, files, {**findings.adopted, **served.entries})
    return record.snapshot(call, commit, files, "cache", repaired=tuple(sorted(served.repaired)))


def refused_before(call: Call) -> HfSnapshotError | None:
    """The Hub's recorded refusal of this repo, as the error an online run would have raised.

    Replayed only under the token situation it was met in; otherwise the snapshot is simply
    not cached, and the error says how to prefetch it with the current token.
    """
    request, repo = call.request, call.repo
    data = state.recalled_refusal(repo)
    if data is None or data.get("reason") not in refusals.AUTH_REASONS:
        return None
    recorded = data.get("token_set")
    if not isinstance(recorded, bool) or not refusals.replay_refused(
        recorded_token_set=recorded, token_set=call.token_set()
    ):
        return not_cached(
            request,
            refusals.not_replayed_message(
                request.label, recorded_token_set=bool(recorded), cache_dir=str(repo.cache_dir)
            ),
            f"refs/{request.revision}",
        )
    return AuthError(
        f"{data.get('message', '')} (The Hub refused it during an earlier online run, and this run is offline.)",
        reason=str(data["reason"]),
        repo_id=request.repo_id,
        revision=request.revision,
    )


__all__ = ["offline", "refused_before", "serve", "unverified"]
