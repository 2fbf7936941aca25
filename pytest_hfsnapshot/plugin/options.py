"""The plugin's options: command-line flags with their ini twins, read and validated once per run."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from huggingface_hub import constants as hf_constants

from ..core.layers import LAYERS_ENV, env_layers, open_layers
from ..core.offline import env_offline
from ..errors import InvalidRequestError
from ..settings import (
    AUTH_ACTIONS,
    DEFAULT_AUTH_ACTION,
    DEFAULT_IMPLICIT,
    DEFAULT_LOCK_LEASE,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_RATE_WAIT,
    DEFAULT_MISSING_ACTION,
    DEFAULT_RETRIES,
    DEFAULT_VERIFY,
    IMPLICIT_ENV,
    IMPLICIT_MODES,
    MIN_LOCK_LEASE,
    MISSING_ACTIONS,
    VERIFY_MODES,
    AuthAction,
    ImplicitMode,
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
    #: The pin file (``--hf-pins``): the commits its branches and tags resolve to.
    pins: Path | None = None
    #: Resolve every snapshot on the Hub and write the pin file at the end (``--hf-update-pins``).
    update_pins: bool = False
    #: Read-only caches searched, in order, before anything is fetched into the cache (resolved paths).
    cache_layers: tuple[Path, ...] = ()
    #: Seconds a lease lock lasts without renewal (``--hf-lock-lease``, else ``HFSNAPSHOT_LOCK_LEASE``).
    lock_lease: float = DEFAULT_LOCK_LEASE
    #: What the plugin does with Hub use no declaration made (``--hf-implicit``, CONTRACT section 9).
    implicit: ImplicitMode = DEFAULT_IMPLICIT

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
            # An update asks the Hub for every branch: the file's old commits are what it replaces.
            pins=None if self.update_pins else self.pins,
            cache_layers=self.cache_layers,
            lock_lease=self.lock_lease,
        )

    def effective_cache_dir(self) -> Path:
        """The cache folder snapshots go to right now."""
        return self.cache_dir if self.cache_dir is not None else Path(hf_constants.HF_HUB_CACHE)

    def effective_offline(self) -> bool:
        """True when no network request may be made (``--hf-offline`` or ``HF_HUB_OFFLINE=1``)."""
        return self.offline or bool(hf_constants.HF_HUB_OFFLINE)


IniType = Literal["bool", "string", "linelist", "paths", "args"]


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """One row of :data:`OPTIONS`: a ``--hf-...`` flag and its ini twin, or an ini-only key.

    The table is what :func:`add_options` registers and what the manual's reference lists, so the
    two cannot disagree.
    """

    #: The command-line flag; None for an ini-only key.
    flag: str | None
    help: str
    #: pytest's ini type; ``"bool"`` makes the flag a switch (``store_true``).
    ini_type: IniType
    #: The ini default; None: pytest's own default for ``ini_type`` (an empty list for ``linelist``).
    default: str | bool | None
    #: The values the option takes, when it is a choice.
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    #: The ini key, when it is not the flag's name spelt ``hf_...``.
    ini_name: str | None = None
    #: What the default is, in words, where the ini default does not say it (e.g. an empty path).
    default_text: str | None = None
    #: An environment variable that turns the option on or gives its default.
    env: str | None = None

    @property
    def ini(self) -> str:
        """The ini key: ``--hf-lock-timeout`` has ``hf_lock_timeout``."""
        if self.ini_name is not None:
            return self.ini_name
        assert self.flag is not None, "an ini-only key needs its ini_name"
        return "hf_" + self.flag.removeprefix("--hf-").replace("-", "_")

    @property
    def shown_default(self) -> str:
        """The default as the manual and ``--help`` say it."""
        if self.default_text is not None:
            return self.default_text
        if self.ini_type == "bool":
            return "off"
        return str(self.default)


def _choices(allowed: Sequence[str], default: str) -> str:
    """``skip (default), xfail or fail``: the choices of an option in words, its default marked."""
    said = [f"{choice} (default)" if choice == default else choice for choice in allowed]
    return ", ".join(said[:-1]) + " or " + said[-1]


def _seconds(value: float) -> str:
    return f"{value:g}"


#: Every option of the plugin, in ``--help`` order. Defaults come from :mod:`pytest_hfsnapshot.settings`.
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "--hf-offline",
        "make no network request; use only what is cached",
        "bool",
        False,
        default_text="off (HF_HUB_OFFLINE=1 turns it on)",
        env="HF_HUB_OFFLINE",
    ),
    OptionSpec(
        "--hf-on-auth-error",
        "what a test needing a gated, private or unauthorized repo does: "
        + _choices(AUTH_ACTIONS, DEFAULT_AUTH_ACTION),
        "string",
        DEFAULT_AUTH_ACTION,
        choices=AUTH_ACTIONS,
    ),
    OptionSpec(
        "--hf-on-missing",
        "offline and not fully cached: " + _choices(MISSING_ACTIONS, DEFAULT_MISSING_ACTION),
        "string",
        DEFAULT_MISSING_ACTION,
        choices=MISSING_ACTIONS,
    ),
    OptionSpec("--hf-strict", "fail when a cached branch or tag cannot be confirmed against the Hub", "bool", False),
    OptionSpec(
        "--hf-retries",
        f"retries for transient Hub errors (default {DEFAULT_RETRIES})",
        "string",
        str(DEFAULT_RETRIES),
        metavar="N",
    ),
    OptionSpec(
        "--hf-lock-timeout",
        f"seconds to wait for another process holding a repo lock (default {_seconds(DEFAULT_LOCK_TIMEOUT)})",
        "string",
        _seconds(DEFAULT_LOCK_TIMEOUT),
        metavar="SECONDS",
    ),
    OptionSpec(
        "--hf-lock-lease",
        "seconds a lease lock (a cache without flock, or HFSNAPSHOT_LOCK_MODE=lease) lasts without renewal "
        "before a waiter on any host takes it over; every host sharing the cache must use the same "
        f"(default: HFSNAPSHOT_LOCK_LEASE, else {_seconds(DEFAULT_LOCK_LEASE)}; at least {_seconds(MIN_LOCK_LEASE)})",
        "string",
        "",
        default_text=f"{_seconds(DEFAULT_LOCK_LEASE)} (at least {_seconds(MIN_LOCK_LEASE)})",
        env="HFSNAPSHOT_LOCK_LEASE",
        metavar="SECONDS",
    ),
    OptionSpec(
        "--hf-verify",
        "how cached files are re-checked: " + _choices(VERIFY_MODES, DEFAULT_VERIFY),
        "string",
        DEFAULT_VERIFY,
        choices=VERIFY_MODES,
    ),
    OptionSpec(
        "--hf-cache-dir",
        "huggingface_hub cache folder to use (default: huggingface_hub's HF_HUB_CACHE)",
        "string",
        "",
        metavar="PATH",
        default_text="huggingface_hub's (HF_HUB_CACHE)",
        env="HF_HUB_CACHE",
    ),
    OptionSpec(
        "--hf-cache-layer",
        "a read-only huggingface_hub cache (a mounted bucket, a cache baked into an image) searched before "
        "anything is fetched into the cache; what it holds is linked, never fetched or copied, and nothing is "
        f"written into it; repeat for more, searched in order ({LAYERS_ENV}: paths separated by os.pathsep)",
        "linelist",
        None,
        metavar="PATH",
        ini_name="hf_cache_layers",
        default_text="none",
        env=LAYERS_ENV,
    ),
    OptionSpec(
        "--hf-prefetch-only",
        "materialize every snapshot the selected tests declare (fixtures, markers, ini hf_prefetch) "
        "in parallel, write the manifest, run no test; exit 0 when all are ready",
        "bool",
        False,
    ),
    OptionSpec(
        "--hf-manifest",
        "write a deterministic JSON manifest of the session's snapshots to PATH (a CI cache key)",
        "string",
        "",
        metavar="PATH",
        default_text="none",
    ),
    OptionSpec(
        "--hf-no-space-check",
        "do not refuse, before transferring, snapshots the cache's free space cannot take "
        "(for filesystems whose free space means nothing, such as some network mounts)",
        "bool",
        False,
        default_text="off (the check is on)",
    ),
    OptionSpec(
        "--hf-max-rate-wait",
        "longest wait, in seconds, for a rate-limit window of the Hub to reset before failing "
        f"(default {_seconds(DEFAULT_MAX_RATE_WAIT)})",
        "string",
        _seconds(DEFAULT_MAX_RATE_WAIT),
        metavar="SECONDS",
    ),
    OptionSpec(
        "--hf-pins",
        "a pin file (JSON, the manifest's format; a manifest is one): the branches and tags it lists "
        "resolve to their pinned commits, without asking the Hub",
        "string",
        "",
        metavar="PATH",
        default_text="none",
    ),
    OptionSpec(
        "--hf-update-pins",
        "resolve every snapshot of the session on the Hub and write the --hf-pins file at the end "
        "(moved pins updated, new ones added, the others kept)",
        "bool",
        False,
    ),
    OptionSpec(
        "--hf-implicit",
        "Hub use that no declaration made (from_pretrained('org/name'), hf_hub_download, ...): report it "
        "(and record it with --hf-update-pins); manage it (each file it downloads is fetched first under "
        "the repo's lock, through the gate, with retries, and verified); fail its test when the pin file "
        "does not list it (as manage otherwise); or leave it alone (off): "
        + _choices(IMPLICIT_MODES, DEFAULT_IMPLICIT)
        + f" ({IMPLICIT_ENV} gives the default)",
        "string",
        "",
        choices=IMPLICIT_MODES,
        default_text=f"{DEFAULT_IMPLICIT} ({IMPLICIT_ENV} gives another)",
        env=IMPLICIT_ENV,
    ),
    OptionSpec(
        None,
        "snapshots --hf-prefetch-only fetches besides the selected tests' declarations (those "
        "hf_snapshots(...) gets): one per line, org/name[@revision] or a JSON object of its arguments",
        "linelist",
        None,
        ini_name="hf_prefetch",
        default_text="none",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    """Register every row of :data:`OPTIONS`: each ``--hf-...`` flag with its ini twin ``hf_...``."""
    group = parser.getgroup("hfsnapshot", "Hugging Face Hub snapshots (pytest-hfsnapshot)")
    for option in OPTIONS:
        if option.flag is not None:
            kwargs: dict[str, Any] = {}
            if option.ini_type == "bool":
                kwargs["action"] = "store_true"
            elif option.ini_type == "linelist":
                kwargs["action"] = "append"  # a repeated flag: each use adds a line
            metavar = "{" + ",".join(option.choices) + "}" if option.choices else option.metavar
            if metavar is not None:
                kwargs["metavar"] = metavar
            group.addoption(
                option.flag, dest=option.ini, default=None, help=f"{option.help} (ini: {option.ini})", **kwargs
            )
        if option.default is None:
            parser.addini(option.ini, help=option.help, type=option.ini_type)
        else:
            parser.addini(option.ini, help=option.help, type=option.ini_type, default=option.default)


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

    offline_value, offline_where, _ = raw("hf_offline")
    offline = bool(offline_value) or env_offline()
    pins = path("hf_pins")
    update_pins, update_where, _ = raw("hf_update_pins")
    if update_pins and pins is None:
        raise pytest.UsageError(
            f"{update_where} needs --hf-pins=PATH (or the ini option hf_pins): the pin file to write"
        )
    if update_pins and offline:
        why = offline_where if offline_value else "HF_HUB_OFFLINE=1"
        raise pytest.UsageError(
            f"{update_where} asks the Hub what every branch and tag points at, and {why} makes this run "
            "offline: drop one of them"
        )

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

    def implicit() -> ImplicitMode:
        value, where, _ = raw("hf_implicit")
        if not str(value).strip():
            value, where = os.environ.get(IMPLICIT_ENV, "") or DEFAULT_IMPLICIT, IMPLICIT_ENV
        text = str(value).strip()
        for mode in IMPLICIT_MODES:
            if text == mode:
                return mode
        raise pytest.UsageError(
            f"{where}: invalid value {value!r}; use one of: {', '.join(IMPLICIT_MODES)} "
            "(report: only report and record Hub use no declaration made; manage: fetch, lock and verify "
            "each file it downloads; fail: also fail tests whose use the pin file does not list; off: ignore it)"
        )

    cache_dir = path("hf_cache_dir")
    return Options(
        # HF_HUB_OFFLINE is read here too: see pytest_hfsnapshot.core.offline.
        offline=offline,
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
        pins=pins,
        update_pins=bool(update_pins),
        cache_layers=layers(cache_dir),
        lock_lease=lease(),
        implicit=implicit(),
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


__all__ = ["OPTIONS", "OptionSpec", "Options", "add_options", "prefetch_only_wanted", "read_options"]
