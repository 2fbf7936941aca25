"""How a snapshot is made: the knobs ``materialize``, the plugin's options and the command line share.

One frozen :class:`Settings` carries them from each of those front ends to the engine, validated
once, here. What is asked for (repo, revision, patterns) is a
:class:`~pytest_hfsnapshot.request.SnapshotRequest`; how it is made is a ``Settings``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, get_args

from .errors import InvalidRequestError

# The values a user chooses between, each spelled once for the plugin's options, the CLI and prefetch.
#: What a test needing a snapshot the Hub refuses does (``--hf-on-auth-error``).
AuthAction = Literal["skip", "xfail", "fail"]
#: What a test needing a snapshot that is not fully cached does offline (``--hf-on-missing``).
MissingAction = Literal["fail", "skip"]
#: How cached files are re-checked (``--hf-verify``).
VerifyMode = Literal["size", "sha256"]
#: What the plugin does with Hub use that no declaration made (CONTRACT section 9).
ImplicitMode = Literal["report", "manage", "fail", "off"]

AUTH_ACTIONS: tuple[AuthAction, ...] = get_args(AuthAction)
MISSING_ACTIONS: tuple[MissingAction, ...] = get_args(MissingAction)
VERIFY_MODES: tuple[VerifyMode, ...] = get_args(VerifyMode)
IMPLICIT_MODES: tuple[ImplicitMode, ...] = get_args(ImplicitMode)
DEFAULT_IMPLICIT: ImplicitMode = "report"
IMPLICIT_ENV = "HFSNAPSHOT_IMPLICIT"

# The defaults, each written once for materialize, the plugin's options (and their help) and the CLI.
#: What a test needing a snapshot the Hub refuses does (``--hf-on-auth-error``).
DEFAULT_AUTH_ACTION: AuthAction = "skip"
#: What a test needing a snapshot that is not fully cached does offline (``--hf-on-missing``).
DEFAULT_MISSING_ACTION: MissingAction = "fail"
#: How cached files are re-checked (``verify=``, ``--hf-verify``).
DEFAULT_VERIFY: VerifyMode = "size"
#: Extra attempts for transient failures, the default of ``materialize`` and ``--hf-retries``.
DEFAULT_RETRIES = 5
#: Seconds to wait for another process's repo lock (``--hf-lock-timeout``).
DEFAULT_LOCK_TIMEOUT = 900.0
#: Longest wait, in seconds, for one rate-limit window of the Hub to reset (``--hf-max-rate-wait``).
DEFAULT_MAX_RATE_WAIT = 300.0
#: Seconds a lease lock lasts without renewal before a waiter on any host takes it over (``--hf-lock-lease``).
DEFAULT_LOCK_LEASE = 60.0
#: The shortest lease accepted: its holder renews it every third of it, on a loaded machine too.
MIN_LOCK_LEASE = 5.0
#: The lease length when neither ``materialize(lock_lease=...)`` nor the plugin's option gives one.
LOCK_LEASE_ENV = "HFSNAPSHOT_LOCK_LEASE"
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
        cache_layers: read-only huggingface_hub caches searched, in this order, before anything is
            fetched into ``cache_dir`` (see :mod:`pytest_hfsnapshot.core.layers`); kept as absolute
            paths with every symlink resolved.
        lock_lease: seconds the repo lock's lease lasts without renewal, when the lock is a lease
            (see :mod:`pytest_hfsnapshot.core.locking`); every host sharing the cache must use
            the same. None: ``HFSNAPSHOT_LOCK_LEASE`` at call time, else 60.
    """

    cache_dir: str | os.PathLike[str] | None = None
    verify: VerifyMode = DEFAULT_VERIFY
    retries: int = DEFAULT_RETRIES
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    offline: bool | None = None
    strict: bool = False
    session: str | None = None
    token: str | bool | None = None
    space_check: bool = True
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT
    pins: str | os.PathLike[str] | None = None
    cache_layers: Sequence[str | os.PathLike[str]] = ()
    lock_lease: float | None = None

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
        if self.lock_lease is not None and not lease_valid(self.lock_lease):
            raise InvalidRequestError(
                f"lock_lease={self.lock_lease!r} is not valid: give a number of seconds >= {MIN_LOCK_LEASE:g}."
            )
        if self.session is not None and not _SESSION_RE.fullmatch(self.session):
            raise InvalidRequestError(f"session={self.session!r} is not valid: use letters, digits, '_', '.', '-'.")
        if self.pins is not None and not isinstance(self.pins, str | os.PathLike):
            raise InvalidRequestError(f"pins={self.pins!r} is not valid: give the path of a pin file, or None.")
        object.__setattr__(self, "cache_layers", _layer_paths(self.cache_layers))
        object.__setattr__(self, "lock_timeout", float(self.lock_timeout))
        object.__setattr__(self, "max_rate_wait", float(self.max_rate_wait))
        if self.lock_lease is not None:
            object.__setattr__(self, "lock_lease", float(self.lock_lease))

    def resolved(self) -> Settings:
        """These settings with the defaults of the moment filled in (huggingface_hub's cache folder
        and offline mode, ``HFSNAPSHOT_LOCK_LEASE``)."""
        from huggingface_hub import constants

        return dataclasses.replace(
            self,
            cache_dir=self.cache_dir if self.cache_dir is not None else constants.HF_HUB_CACHE,
            offline=bool(constants.HF_HUB_OFFLINE) if self.offline is None else self.offline,
            lock_lease=self.lock_lease if self.lock_lease is not None else lock_lease_from_env(),
        )


def _layer_paths(layers: object) -> tuple[Path, ...]:
    """``cache_layers`` as absolute, resolved paths; a lone path or an empty one is refused."""
    if isinstance(layers, str | bytes | os.PathLike) or not isinstance(layers, Iterable):
        raise InvalidRequestError(f"cache_layers={layers!r} is not valid: give a list of folders.")
    out: list[Path] = []
    for layer in layers:
        if not isinstance(layer, str | os.PathLike) or not os.fspath(layer).strip():
            raise InvalidRequestError(f"cache_layers: {layer!r} is not a folder path.")
        path = Path(os.path.realpath(os.path.expanduser(os.fspath(layer))))
        if path not in out:
            out.append(path)
    return tuple(out)


def lock_lease_from_env() -> float:
    """The lease length ``HFSNAPSHOT_LOCK_LEASE`` sets (60 when unset); InvalidRequestError naming a bad value."""
    raw = os.environ.get(LOCK_LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LOCK_LEASE
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not lease_valid(value):
        raise InvalidRequestError(
            f"{LOCK_LEASE_ENV}={raw!r} is not valid: give a number of seconds >= {MIN_LOCK_LEASE:g} "
            f"(the default is {DEFAULT_LOCK_LEASE:g})."
        )
    return value


def lease_valid(value: object) -> bool:
    """Whether ``value`` is a usable lease length: a finite number of seconds, at least ``MIN_LOCK_LEASE``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and value >= MIN_LOCK_LEASE


def _seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "AUTH_ACTIONS",
    "DEFAULT_AUTH_ACTION",
    "DEFAULT_IMPLICIT",
    "DEFAULT_LOCK_LEASE",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MAX_RATE_WAIT",
    "DEFAULT_MISSING_ACTION",
    "DEFAULT_RETRIES",
    "DEFAULT_VERIFY",
    "IMPLICIT_ENV",
    "IMPLICIT_MODES",
    "LOCK_LEASE_ENV",
    "MIN_LOCK_LEASE",
    "MISSING_ACTIONS",
    "VERIFY_MODES",
    "AuthAction",
    "ImplicitMode",
    "MissingAction",
    "Settings",
    "VerifyMode",
    "lease_valid",
    "lock_lease_from_env",
]
