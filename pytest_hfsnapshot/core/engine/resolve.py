"""The resolve step: the commit a request means, from the pin file, the session, the cache or the Hub."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from huggingface_hub import HfApi

from ...errors import TransientError, VerificationError
from ...request import is_commit
from ..cache import state
from ..cache.locking import HeldCheck
from ..hub.retry import Retrier
from .call import Call
from .error_builders import hub

log = logging.getLogger("pytest_hfsnapshot")


@dataclass(frozen=True)
class Resolved:
    """The commit a branch or tag points at."""

    commit: str
    #: The Hub could not be reached: the commit is the cached ref's, unconfirmed.
    unverified: bool = False


def known_commit(call: Call) -> str | None:
    """The commit the request means without asking the Hub, or None."""
    request = call.request
    if request.pinned:
        return request.revision
    if call.pin is not None:
        return call.pin  # no request, online or offline: the pin file says what the branch means
    commit = state.resolved(call.repo, request, call.settings.session)
    if commit is not None:
        return commit
    if call.settings.offline:
        return cached_ref(call)
    return None


def cached_ref(call: Call) -> str | None:
    """The commit the revision's ref names in the writable cache, else in the first layer holding one."""
    revision = call.request.revision
    return call.repo.refs.read(revision) or call.layers.read_ref(call.repo, revision)


def resolve(call: Call, retrier: Retrier) -> Resolved:
    """The commit a branch or tag points at now, or the cached one (unverified) when the Hub is unreachable."""
    try:
        commit = hub_commit(call, retrier)
    except TransientError:
        cached = cached_ref(call)
        if cached is None:
            raise
        log.warning(
            "hfsnapshot: the Hub at %s is unreachable; using the cached %s at %s (unverified revision)",
            hub(),
            call.request.label,
            cached[:12],
        )
        return Resolved(cached, unverified=True)
    state.remember_resolution(call.repo, call.request, call.settings.session, commit)
    return Resolved(commit)


def hub_commit(call: Call, retrier: Retrier) -> str:
    """What the Hub says the branch or tag points at, asked with retries."""
    request = call.request
    info = retrier.call(
        lambda: HfApi(token=call.settings.token).repo_info(
            request.repo_id, repo_type=request.repo_type, revision=request.revision
        ),
        what="the revision",
    )
    commit = info.sha
    if not isinstance(commit, str) or not is_commit(commit):
        raise VerificationError(
            f"The Hub answered for {request.label} without a commit id; check HF_ENDPOINT.",
            repo_id=request.repo_id,
            revision=request.revision,
        )
    return commit


def record_ref(call: Call, held: HeldCheck, commit: str) -> bool:
    """Point the cache's ref of a branch or tag at ``commit``; True when the ref was damaged.

    An empty or garbage ref is damage; a branch that moved on is not.
    """
    revision = call.request.revision
    if call.request.pinned:
        return False
    damaged = call.repo.ref(revision).is_file() and call.repo.refs.read(revision) is None
    held()
    call.repo.refs.write(revision, commit)
    return damaged


__all__ = ["Resolved", "cached_ref", "hub_commit", "known_commit", "record_ref", "resolve"]
