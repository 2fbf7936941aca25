"""The typed error each kind of failed materialization raises, in one place; never a header or a token."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote

from huggingface_hub import constants

from ...errors import (
    AuthError,
    DiskError,
    EntryNotFoundError,
    HfSnapshotError,
    OfflineMissingError,
    RevisionNotFoundError,
    TransientError,
)
from ...request import SnapshotRequest
from ...settings import say
from ..cache.formats import count
from ..cache.verify import ExpectedFile
from ..hub import causes, gate, outage, refusals, retry
from . import space


def typed(
    request: SnapshotRequest,
    error: BaseException,
    kind: retry.Classification,
    *,
    token_set: bool,
    cache_dir: Path,
) -> HfSnapshotError:
    """The error a non-transient failure of ``request`` becomes."""
    label, repo_id, rev = request.label, request.repo_id, request.revision
    if kind.kind == "auth":
        reason = kind.auth_reason or "unauthorized"
        hint = refusals.auth_message(
            reason,
            repo_id=repo_id,
            repo_type=request.repo_type,
            revision=rev,
            endpoint=constants.ENDPOINT,
            token_set=token_set,
            private=request.private,
        )
        return AuthError(hint, reason=reason, repo_id=repo_id, revision=rev)
    if kind.kind == "revision_not_found":
        return RevisionNotFoundError(
            f"Revision {rev!r} does not exist in {request.repo_type} {repo_id!r}: check the branch, tag or commit id.",
            repo_id=repo_id,
            revision=rev,
        )
    if kind.kind == "disk" and kind.errno is not None:
        return disk(request, error, kind.errno, cache_dir=cache_dir)
    if kind.kind == "entry_not_found":
        return EntryNotFoundError(
            f"A file of {label} is not on the Hub ({failed_file(error) or 'unknown file'}).",
            repo_id=repo_id,
            revision=rev,
        )
    return HfSnapshotError(f"Materializing {label} failed: {cause(kind)}.", repo_id=repo_id, revision=rev)


def disk(
    request: SnapshotRequest,
    error: BaseException,
    number: int,
    *,
    cache_dir: Path,
    blobs: Path | None = None,
    still: Sequence[ExpectedFile] = (),
) -> DiskError:
    """A filesystem refusal as the user reads it.

    ``still``: the files a download had left to fetch when the write failed (into ``blobs``): the
    refused write was one of theirs, so they are named. Otherwise the path the OSError names.
    """
    if still:
        filename: str | None = ", ".join(sorted(f.path for f in still)[:3])
        folder: str | Path | None = blobs
    else:
        filename, folder = space.written_path(error)
    return space.filesystem_error(
        number,
        label=request.label,
        cache_dir=cache_dir,
        filename=filename,
        folder=folder,
        needed=sum(f.size for f in still) if still else None,
        repo_id=request.repo_id,
        revision=request.revision,
    )


def gave_up(
    request: SnapshotRequest,
    error: BaseException,
    kind: retry.Classification,
    attempts: int,
    what: str,
    filename: str | None,
    retries: int,
) -> TransientError:
    """A transient failure that outlasted the ``retries`` budget (``what``: "the revision", "the download", ...)."""
    filename = filename or failed_file(error)
    where = f", file {filename!r}" if filename else ""
    retrier = "hf_xet" if kind.by_xet else "huggingface_hub"
    client = f" ({retrier} had already retried it with its own backoff)" if kind.client_retried else ""
    tries = count(attempts, "attempt")
    return TransientError(
        f"Gave up on {what} of {request.label}{where} at {failed_origin(error)} after {tries}{client}: last cause "
        f"{cause(kind)}. The Hub or the network is failing; retry later"
        + ("." if kind.client_retried else f" or raise {say('retries')}."),
        attempts=attempts,
        filename=filename,
        retries=retries,
        repo_id=request.repo_id,
        revision=request.revision,
    )


def unreachable(request: SnapshotRequest, down: outage.Outage, what: str) -> TransientError:
    """The give-up of a call not even tried: the session found the Hub unreachable moments ago."""
    return TransientError(
        f"Gave up on {what} of {request.label} at {down.endpoint} without trying: this test session "
        f"could not reach it {down.age():.0f} s ago (last cause {down.cause}); it is asked again "
        f"{outage.RECHECK_AFTER:.0f} s after that. The Hub or the network is failing; retry later.",
        attempts=0,
        repo_id=request.repo_id,
        revision=request.revision,
    )


def not_cached(request: SnapshotRequest, message: str, *missing: str) -> OfflineMissingError:
    """Offline (or with the Hub unreachable), the snapshot is not fully cached: ``missing`` names what."""
    return OfflineMissingError(message, missing=missing, repo_id=request.repo_id, revision=request.revision)


def cause(kind: retry.Classification) -> str:
    """A short, token-free description of a failure: class name and status, never headers."""
    decisive = kind.decisive
    name = type(decisive).__name__ if decisive is not None else "error"
    return f"{name} (HTTP {kind.status})" if kind.status else name


def hub() -> str:
    """The origin of the Hub endpoint in use (``HF_ENDPOINT``), read at call time."""
    return gate.origin_of(constants.ENDPOINT)


def failed_origin(error: BaseException) -> str:
    """The origin a failed request was sent to (the Hub, its CDN or the CAS), else the Hub's."""
    for url in _request_urls(error):
        if url.startswith(("http://", "https://")):
            return gate.origin_of(url)
    return hub()


def failed_file(error: BaseException) -> str | None:
    """The repo file a failed request was for, read from the request URL in the exception chain."""
    for url in _request_urls(error):
        match = re.search(r"/resolve/[^/]+/(.+?)(?:\?|$)", url)
        if match:
            return unquote(match.group(1))
    return None


def _request_urls(error: BaseException) -> Iterator[str]:
    """The URL of each request found in ``error``'s chain (on the exception, or on its response)."""
    for link in causes.chain(error):
        for holder in (
            causes.safe_attr(link, "request"),
            causes.safe_attr(causes.safe_attr(link, "response"), "request"),
        ):
            url = causes.safe_attr(holder, "url")
            if url is not None:
                yield str(url)


__all__ = ["cause", "disk", "failed_file", "failed_origin", "gave_up", "hub", "not_cached", "typed", "unreachable"]
