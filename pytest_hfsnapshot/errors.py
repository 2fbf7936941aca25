"""Typed errors raised by :func:`pytest_hfsnapshot.materialize` and the fixtures.

Every error names the repo (and revision or file where known) and says what to do next.
None of them ever carries the Hub token: messages are built from our own words and the
class names of lower-level causes, which are kept on ``__cause__`` for debugging."""

from __future__ import annotations

from typing import Any


class HfSnapshotError(Exception):
    """Base class of every error this package raises on purpose."""

    def __init__(
        self,
        message: str,
        *,
        repo_id: str | None = None,
        revision: str | None = None,
        setting: str | None = None,
        limit: float | None = None,
    ) -> None:
        super().__init__(message)
        self.repo_id = repo_id
        self.revision = revision
        #: The setting the advice of the message is about (a knob of :mod:`pytest_hfsnapshot.settings`,
        #: such as ``"lock_timeout"``) and the value it had, for callers that act on it without reading
        #: the message; the message names it as the front end that runs spells it (``--hf-lock-timeout``
        #: under pytest, ``--lock-timeout`` for a command, ``lock_timeout=`` for ``materialize``).
        self.setting = setting
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception's own reduce calls ``cls(*args)``, which drops the keyword-only fields (and
        # fails where they are required): rebuild without ``__init__``, then restore the message and
        # every field, so an error raised in a worker process reaches its parent whole (filelock's
        # Timeout does the same). ``args`` goes in the state: OSError's ``__new__`` ignores it.
        return _blank, (type(self),), {**self.__dict__, "args": self.args}


def _blank(cls: type[HfSnapshotError]) -> HfSnapshotError:
    """An instance of ``cls`` that ``__init__`` has not run on: pickle then sets its state."""
    return cls.__new__(cls)


class HfSnapshotWarning(UserWarning):
    """A snapshot was served, but something in its declaration looks wrong (e.g. a pattern matching nothing)."""


class InvalidRequestError(HfSnapshotError, ValueError):
    """A declaration or argument is malformed: bad repo id, repo type, revision, patterns or option."""


class AuthError(HfSnapshotError):
    """The Hub refused access: gated repo, 401, private or missing repo, or no token.

    ``reason`` is one of ``"gated"``, ``"unauthorized"``, ``"not_found_or_private"``,
    ``"invalid_token"`` (the token itself was rejected). The pytest layer maps it to a skip
    (``--hf-on-auth-error``) or a failure: see :func:`pytest_hfsnapshot.core.hub.refusals.skips`.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision)
        self.reason = reason


class RevisionNotFoundError(HfSnapshotError):
    """The repo exists but the branch, tag or commit does not."""


class EntryNotFoundError(HfSnapshotError):
    """A file the snapshot needs is not in the repo at that revision."""


class TransientError(HfSnapshotError):
    """Transient failures (5xx, 429, resets, timeouts, cut bodies) outlasted the retry budget.

    ``attempts``: the attempts made; ``limit``: the ``retries`` setting they were made under (None
    when the call was not tried: the session had just found the Hub unreachable).
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        filename: str | None = None,
        retries: int | None = None,
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision, setting="retries", limit=retries)
        self.attempts = attempts
        self.filename = filename


class RateLimitError(TransientError):
    """The Hub's rate-limit window resets later than the configured cap allows waiting."""

    def __init__(self, message: str, *, endpoint: str, wait: float, cap: float) -> None:
        super().__init__(message, attempts=0)
        self.endpoint = endpoint
        self.wait = wait
        self.cap = cap
        self.setting, self.limit = "max_rate_wait", cap


class OfflineMissingError(HfSnapshotError):
    """Offline mode is on and the snapshot is not fully cached; ``missing`` lists what is absent."""

    def __init__(
        self,
        message: str,
        *,
        missing: tuple[str, ...] = (),
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision)
        self.missing = missing


class UnverifiedRevisionError(HfSnapshotError):
    """Strict mode: the Hub was unreachable, so a cached branch or tag could not be confirmed."""


class VerificationError(HfSnapshotError):
    """A snapshot could not be made to match the Hub's listing (sizes, hashes, markers)."""


class UnsafeCacheError(HfSnapshotError):
    """Something in the cache or the Hub listing would make us reach outside the repo's cache folder."""


class DiskError(HfSnapshotError):
    """The cache's filesystem refused a write, or a snapshot will not fit in its free space.

    ``errno`` is the refusal's error number (``ENOSPC`` also for a snapshot refused before any
    transfer because it does not fit), ``filename`` the file being written (a repo path, or a
    path in the cache), ``folder`` where it was written, ``needed`` and ``free`` the bytes a
    space error was about (None when not known). ``cause`` says the same without naming the
    repo, so that one full disk reads as one line for every snapshot it stopped. ``setting`` is
    ``"space_check"`` for a snapshot refused before any transfer. Not transient: never retried.
    """

    def __init__(
        self,
        message: str,
        *,
        errno: int,
        cause: str,
        filename: str | None = None,
        folder: str | None = None,
        needed: int | None = None,
        free: int | None = None,
        setting: str | None = None,
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision, setting=setting)
        self.errno = errno
        self.cause = cause
        self.filename = filename
        self.folder = folder
        self.needed = needed
        self.free = free


class LockTimeoutError(HfSnapshotError, TimeoutError):
    """The repo lock was not released in time; ``holder`` describes who holds it, ``limit`` the
    ``lock_timeout`` waited."""

    def __init__(
        self,
        message: str,
        *,
        holder: dict[str, object] | None = None,
        timeout: float | None = None,
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision, setting="lock_timeout", limit=timeout)
        self.holder = holder or {}


class LockLostError(HfSnapshotError):
    """Another process took over this process's lease on the repo lock, so it stopped writing.

    A lease is lost when its holder does not renew it for the lease length (paused, suspended,
    or cut off from the cache's storage) and a waiter, on this host or another, takes it over.
    ``lock_file`` is the lease's marker file; ``taken_by`` describes the new holder (``host``,
    ``pid``) where its marker names it; ``limit`` is the ``lock_lease`` length.
    """

    def __init__(
        self,
        message: str,
        *,
        lock_file: str,
        taken_by: dict[str, object] | None = None,
        lease: float | None = None,
        repo_id: str | None = None,
        revision: str | None = None,
    ) -> None:
        super().__init__(message, repo_id=repo_id, revision=revision, setting="lock_lease", limit=lease)
        self.lock_file = lock_file
        self.taken_by = taken_by or {}


__all__ = [
    "AuthError",
    "DiskError",
    "EntryNotFoundError",
    "HfSnapshotError",
    "HfSnapshotWarning",
    "InvalidRequestError",
    "LockLostError",
    "LockTimeoutError",
    "OfflineMissingError",
    "RateLimitError",
    "RevisionNotFoundError",
    "TransientError",
    "UnsafeCacheError",
    "UnverifiedRevisionError",
    "VerificationError",
]
