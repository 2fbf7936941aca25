"""How a snapshot is made: the knobs ``materialize``, the plugin's options and the command line share.

One frozen :class:`Settings` carries them from each of those front ends to the engine, validated
once, here. What is asked for (repo, revision, patterns) is a
:class:`~pytest_hfsnapshot.request.SnapshotRequest`; how it is made is a ``Settings``.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Literal, get_args

from .errors import InvalidRequestError

# The values a user chooses between, each spelled once for the plugin's options, the CLI and prefetch.
#: What a test needing a snapshot the Hub refuses does (``--hf-on-auth-error``).
AuthAction = Literal["skip", "xfail", "fail"]
#: What a test needing a snapshot that is not fully cached does offline (``--hf-on-missing``).
MissingAction = Literal["fail", "skip"]
#: How cached files are re-checked (``--hf-verify``).
VerifyMode = Literal["size", "sha256"]

AUTH_ACTIONS: tuple[AuthAction, ...] = get_args(AuthAction)
MISSING_ACTIONS: tuple[MissingAction, ...] = get_args(MissingAction)
VERIFY_MODES: tuple[VerifyMode, ...] = get_args(VerifyMode)

#: Extra attempts for transient failures, the default of ``materialize`` and ``--hf-retries``.
DEFAULT_RETRIES = 5
#: Seconds to wait for another process's repo lock (``--hf-lock-timeout``).
DEFAULT_LOCK_TIMEOUT = 900.0
#: Longest wait, in seconds, for one rate-limit window of the Hub to reset (``--hf-max-rate-wait``).
DEFAULT_MAX_RATE_WAIT = 300.0
_SESSION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The knobs of one materialization; invalid values raise InvalidRequestError on construction.

    Attributes:
        cache_dir: the huggingface_hub cache; None: ``huggingface_hub.constants.HF_HUB_CACHE`` at call time.
        verify: how cached files are re-checked: ``"size"`` (stat) or ``"sha256"`` (rehash all).
        retries: extra attempts for transient failures (5xx, 429, resets, timeouts, cut bodies).
        lock_timeout: seconds to wait for another process's lock before LockTimeoutError.
        offline: no network at all; None: ``huggingface_hub.constants.HF_HUB_OFFLINE`` at call time.
        strict: fail instead of serving a cached branch the Hub could not confirm.
        session: an id shared by the processes of one test session (branches resolved once per
            session per cache; rate-limit windows and outages shared).
        token: passed to huggingface_hub (None: its own lookup; False: none).
        space_check: refuse, before transferring, a snapshot the cache's free space cannot take.
        max_rate_wait: the longest wait for a rate-limit window of the Hub to reset.
        pins: a pin file (:mod:`pytest_hfsnapshot.core.pins`): the branches and tags it lists
            resolve to their pinned commits without asking the Hub; None: none.
    """

    cache_dir: str | os.PathLike[str] | None = None
    verify: VerifyMode = "size"
    retries: int = DEFAULT_RETRIES
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    offline: bool | None = None
    strict: bool = False
    session: str | None = None
    token: str | bool | None = None
    space_check: bool = True
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT
    pins: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if self.verify not in VERIFY_MODES:
            raise InvalidRequestError(f"verify={self.verify!r} is not valid: use 'size' or 'sha256'.")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise InvalidRequestError(f"retries={self.retries!r} is not valid: give a whole number >= 0.")
        if not _seconds(self.lock_timeout) or not self.lock_timeout > 0:
            raise InvalidRequestError(f"lock_timeout={self.lock_timeout!r} is not valid: give a number of seconds > 0.")
        if not _seconds(self.max_rate_wait) or not self.max_rate_wait >= 0:
            raise InvalidRequestError(
                f"max_rate_wait={self.max_rate_wait!r} is not valid: give a number of seconds >= 0."
            )
        if self.session is not None and not _SESSION_RE.fullmatch(self.session):
            raise InvalidRequestError(f"session={self.session!r} is not valid: use letters, digits, '_', '.', '-'.")
        if self.pins is not None and not isinstance(self.pins, str | os.PathLike):
            raise InvalidRequestError(f"pins={self.pins!r} is not valid: give the path of a pin file, or None.")
        object.__setattr__(self, "lock_timeout", float(self.lock_timeout))
        object.__setattr__(self, "max_rate_wait", float(self.max_rate_wait))

    def resolved(self) -> Settings:
        """These settings with huggingface_hub's defaults filled in now (cache folder, offline mode)."""
        from huggingface_hub import constants

        return dataclasses.replace(
            self,
            cache_dir=self.cache_dir if self.cache_dir is not None else constants.HF_HUB_CACHE,
            offline=bool(constants.HF_HUB_OFFLINE) if self.offline is None else self.offline,
        )


def _seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "AUTH_ACTIONS",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MAX_RATE_WAIT",
    "DEFAULT_RETRIES",
    "MISSING_ACTIONS",
    "VERIFY_MODES",
    "AuthAction",
    "MissingAction",
    "Settings",
    "VerifyMode",
]
