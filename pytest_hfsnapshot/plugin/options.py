"""The plugin's options: command-line flags with their ini twins, read and validated once per run."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from huggingface_hub import constants as hf_constants

from ..core.layers import LAYERS_ENV, env_layers, open_layers
from ..core.offline import env_offline
from ..errors import InvalidRequestError
from ..settings import (
    AUTH_ACTIONS,
    DEFAULT_LOCK_LEASE,
    DEFAULT_MAX_RATE_WAIT,
    MIN_LOCK_LEASE,
    MISSING_ACTIONS,
    VERIFY_MODES,
    AuthAction,
    MissingAction,
    Settings,
    VerifyMode,
    lock_lease_from_env,
)

_Choice = TypeVar("_Choice", bound=str)


@dataclasses.dataclass(frozen=True)
class Options:
    """The plugin's settings for one run, validated at configure time (command line over ini)."""

    offline: bool
    on_auth_error: AuthAction
    on_missing: MissingAction
    strict: bool
    retries: int
    lock_timeout: float
    verify: VerifyMode
    #: None: huggingface_hub's ``constants.HF_HUB_CACHE``, read when a snapshot is needed.
    cache_dir: Path | None
    prefetch_only: bool
    manifest: Path | None
    #: Refuse, before transferring, a snapshot the cache's free space cannot take (``--hf-no-space-check``: off).
    space_check: bool = True
    #: Longest wait, in seconds, for one rate-limit window of the Hub to reset.
    max_rate_wait: float = DEFAULT_MAX_RATE_WAIT
    #: Seconds a lease lock lasts without renewal (``--hf-lock-lease``, else ``HFSNAPSHOT_LOCK_LEASE``).
    lock_lease: float = DEFAULT_LOCK_LEASE
    #: Read-only caches searched, in order, before anything is fetched into the cache (resolved paths).
    cache_layers: tuple[Path, ...] = ()

    def settings(self, session: str) -> Settings:
        """How this run's snapshots are made, for the processes of test session ``session``."""
        return Settings(
            cache_dir=self.cache_dir,
            verify=self.verify,
            retries=self.retries,
            lock_timeout=self.lock_timeout,
            offline=True if self.offline else None,
            strict=self.strict,
            session=session,
            space_check=self.space_check,
            max_rate_wait=self.max_rate_wait,
            lock_lease=self.lock_lease,
            cache_layers=self.cache_layers,
        )

    def effective_cache_dir(self) -> Path:
        """The cache folder snapshots go to right now."""
        return self.cache_dir if self.cache_dir is not None else Path(hf_constants.HF_HUB_CACHE)

    def effective_offline(self) -> bool:
        """True when no network request may be made (``--hf-offline`` or ``HF_HUB_OFFLINE=1``)."""
        return self.offline or bool(hf_constants.HF_HUB_OFFLINE)


def add_options(parser: pytest.Parser) -> None:
    """Register every ``--hf-...`` flag, its ini twin ``hf_...``, and the ini-only ``hf_prefetch``."""
    group = parser.getgroup("hfsnapshot", "Hugging Face Hub snapshots (pytest-hfsnapshot)")

    def add(flag: str, help: str, ini_type: str, ini_default: Any, **kwargs: Any) -> None:
        ini = "hf_" + flag.removeprefix("--hf-").replace("-", "_")
        group.addoption(flag, dest=ini, default=None, help=f"{help} (ini: {ini})", **kwargs)
        parser.addini(ini, help=help, type=ini_type, default=ini_default)  # type: ignore[arg-type]

    add("--hf-offline", "make no network request; use only what is cached", "bool", False, action="store_true")
    add(
        "--hf-on-auth-error",
        "what a test needing a gated, private or unauthorized repo does: skip (default), xfail or fail",
        "string",
        "skip",
        metavar="{" + ",".join(AUTH_ACTIONS) + "}",
    )
    add(
        "--hf-on-missing",
        "offline and not fully cached: fail (default) or skip",
        "string",
        "fail",
        metavar="{" + ",".join(MISSING_ACTIONS) + "}",
    )
    add(
        "--hf-strict",
        "fail when a cached branch or tag cannot be confirmed against the Hub",
        "bool",
        False,
        action="store_true",
    )
    add("--hf-retries", "retries for transient Hub errors (default 5)", "string", "5", metavar="N")
    add(
        "--hf-lock-timeout",
        "seconds to wait for another process holding a repo lock (default 900)",
        "string",
        "900",
        metavar="SECONDS",
    )
    add(
        "--hf-lock-lease",
        "seconds a lease lock (a cache without flock, or HFSNAPSHOT_LOCK_MODE=lease) lasts without renewal "
        "before a waiter on any host takes it over; every host sharing the cache must use the same "
        f"(default: HFSNAPSHOT_LOCK_LEASE, else {DEFAULT_LOCK_LEASE:g}; at least {MIN_LOCK_LEASE:g})",
        "string",
        "",
        metavar="SECONDS",
    )
    add(
        "--hf-verify",
        "how cached files are re-checked: size (default) or sha256",
        "string",
        "size",
        metavar="{" + ",".join(VERIFY_MODES) + "}",
    )
    add(
        "--hf-cache-dir",
        "huggingface_hub cache folder to use (default: huggingface_hub's HF_HUB_CACHE)",
        "string",
        "",
        metavar="PATH",
    )
    group.addoption(
        "--hf-cache-layer",
        dest="hf_cache_layers",
        action="append",
        default=None,
        metavar="PATH",
        help="a read-only huggingface_hub cache (a mounted bucket, a cache baked into an image) searched before "
        "anything is fetched into the cache; what it holds is linked, never fetched or copied, and nothing is "
        f"written into it; repeat for more, searched in order (ini: hf_cache_layers; env: {LAYERS_ENV}, "
        "paths separated by os.pathsep)",
    )
    parser.addini(
        "hf_cache_layers",
        help="read-only huggingface_hub caches searched before anything is fetched into the cache, one path a line",
        type="linelist",
        default=[],
    )
    add(
        "--hf-prefetch-only",
        "materialize every snapshot the selected tests declare (fixtures, markers, ini hf_prefetch) "
        "in parallel, write the manifest, run no test; exit 0 when all are ready",
        "bool",
        False,
        action="store_true",
    )
    add(
        "--hf-manifest",
        "write a deterministic JSON manifest of the session's snapshots to PATH (a CI cache key)",
        "string",
        "",
        metavar="PATH",
    )
    add(
        "--hf-no-space-check",
        "do not refuse, before transferring, snapshots the cache's free space cannot take "
        "(for filesystems whose free space means nothing, such as some network mounts)",
        "bool",
        False,
        action="store_true",
    )
    add(
        "--hf-max-rate-wait",
        "longest wait, in seconds, for a rate-limit window of the Hub to reset before failing (default 300)",
        "string",
        "300",
        metavar="SECONDS",
    )
    parser.addini(
        "hf_prefetch",
        "snapshots --hf-prefetch-only fetches besides the selected tests' declarations (those "
        "hf_snapshots(...) gets): one per line, org/name[@revision] or a JSON object of its arguments",
        type="linelist",
        default=[],
    )


def read_options(config: pytest.Config) -> Options:
    """The run's options; a pytest.UsageError naming the flag or ini option when a value is invalid."""

    def raw(name: str) -> tuple[Any, str, Path]:
        """The value, where it came from (for errors), and the folder relative paths start from."""
        value = config.getoption(name)
        if value is not None:
            return value, "--" + name.replace("_", "-"), config.invocation_params.dir
        try:
            value = config.getini(name)
        except (TypeError, ValueError, pytest.UsageError) as error:
            raise pytest.UsageError(f"ini option {name}: {error}") from None
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        return value, f"ini option {name}", base

    def choice(name: str, allowed: Sequence[_Choice]) -> _Choice:
        value, where, _ = raw(name)
        text = str(value).strip()
        for option in allowed:
            if text == option:
                return option
        raise pytest.UsageError(f"{where}: invalid value {value!r}; use one of: {', '.join(allowed)}")

    def flag(name: str) -> bool:
        value, _, _ = raw(name)
        return bool(value)

    def number(name: str, *, integer: bool, minimum: float, inclusive: bool, wanted: str) -> float:
        value, where, _ = raw(name)
        try:
            parsed = int(str(value).strip()) if integer else float(str(value).strip())
        except ValueError:
            parsed = math.nan
        if math.isnan(parsed) or math.isinf(parsed) or parsed < minimum or (parsed == minimum and not inclusive):
            raise pytest.UsageError(f"{where}: invalid value {value!r}; use {wanted}")
        return parsed

    def lease() -> float:
        value, _, _ = raw("hf_lock_lease")
        if not str(value).strip():
            try:
                return lock_lease_from_env()
            except InvalidRequestError as error:
                raise pytest.UsageError(str(error)) from None
        return number(
            "hf_lock_lease",
            integer=False,
            minimum=MIN_LOCK_LEASE,
            inclusive=True,
            wanted=f"a number of seconds >= {MIN_LOCK_LEASE:g}",
        )

    def path(name: str) -> Path | None:
        value, _, base = raw(name)
        text = str(value).strip()
        return (base / Path(text).expanduser()).resolve() if text else None

    def layers(cache_dir: Path | None) -> tuple[Path, ...]:
        """The layers of the command line, else of the ini file, else of the environment; each readable."""
        value, where, base = raw("hf_cache_layers")
        if where.startswith("--"):
            where = "--hf-cache-layer"  # the flag is singular, repeated
        if not value:
            value, where, base = env_layers(), LAYERS_ENV, config.invocation_params.dir
        paths = [(base / Path(str(text).strip()).expanduser()).resolve() for text in value if str(text).strip()]
        writable = cache_dir if cache_dir is not None else Path(hf_constants.HF_HUB_CACHE)
        try:
            open_layers(paths, cache_dir=writable, session=None)
        except InvalidRequestError as error:
            raise pytest.UsageError(f"{where}: {error}") from None
        return tuple(dict.fromkeys(paths))

    cache_dir = path("hf_cache_dir")
    return Options(
        # HF_HUB_OFFLINE is read here too: see pytest_hfsnapshot.offline.
        offline=flag("hf_offline") or env_offline(),
        on_auth_error=choice("hf_on_auth_error", AUTH_ACTIONS),
        on_missing=choice("hf_on_missing", MISSING_ACTIONS),
        strict=flag("hf_strict"),
        retries=int(number("hf_retries", integer=True, minimum=0, inclusive=True, wanted="an integer >= 0")),
        lock_timeout=number(
            "hf_lock_timeout", integer=False, minimum=0, inclusive=False, wanted="a number of seconds > 0"
        ),
        verify=choice("hf_verify", VERIFY_MODES),
        cache_dir=cache_dir,
        prefetch_only=flag("hf_prefetch_only"),
        manifest=path("hf_manifest"),
        space_check=not flag("hf_no_space_check"),
        max_rate_wait=number(
            "hf_max_rate_wait", integer=False, minimum=0, inclusive=True, wanted="a number of seconds >= 0"
        ),
        lock_lease=lease(),
        cache_layers=layers(cache_dir),
    )


def prefetch_only_wanted(config: pytest.Config) -> bool:
    """``--hf-prefetch-only`` (or its ini twin) asked for, read before the options are validated.

    An invalid ini value counts as not asked: :func:`read_options` reports it as a usage error.
    """
    wanted = config.getoption("hf_prefetch_only", None)
    if wanted is None:
        try:
            wanted = config.getini("hf_prefetch_only")
        except (TypeError, ValueError):
            return False
    return bool(wanted)


__all__ = ["Options", "add_options", "prefetch_only_wanted", "read_options"]
