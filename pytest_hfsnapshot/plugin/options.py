"""The plugin's options: each knob of :data:`pytest_hfsnapshot.settings.KNOBS` that reaches pytest, as a
``--hf-...`` flag with its ini twin, read and validated once per run."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import constants as hf_constants

from ..core.hub.offline import env_offline
from ..errors import InvalidRequestError
from ..settings import KNOBS, NEEDS_PIN_FILE, Knob, PluginSettings, Settings, spelling

#: The knobs the plugin has, in ``--help`` order: each a flag (unless ini-only) and an ini key.
OPTIONS: tuple[Knob, ...] = tuple(option for option in KNOBS if option.plugin)


@dataclasses.dataclass(frozen=True)
class Options(PluginSettings, Settings):
    """The plugin's settings for one run, validated at configure time (command line over ini over environment)."""

    #: Read as a path from the run's folder or the ini file's (the knob is :attr:`Settings.pins`).
    pins: Path | None = None

    def settings(self, session: str) -> Settings:
        """How this run's snapshots are made, for the processes of test session ``session``."""
        given = {name: getattr(self, name) for name in (f.name for f in dataclasses.fields(Settings))}
        return Settings(
            **{
                **given,
                "offline": True if self.offline else None,
                "session": session,
                # An update asks the Hub for every branch: the file's old commits are what it replaces.
                "pins": None if self.update_pins else self.pins,
            }
        )

    def effective_cache_dir(self) -> Path:
        """The cache folder snapshots go to right now."""
        return Path(self.cache_dir) if self.cache_dir is not None else Path(hf_constants.HF_HUB_CACHE)

    def effective_offline(self) -> bool:
        """True when no network request may be made (``--hf-offline`` or ``HF_HUB_OFFLINE=1``)."""
        return bool(self.offline) or bool(hf_constants.HF_HUB_OFFLINE)


def add_options(parser: pytest.Parser) -> None:
    """Register every row of :data:`OPTIONS`: each ``--hf-...`` flag with its ini twin ``hf_...``."""
    group = parser.getgroup("hfsnapshot", "Hugging Face Hub snapshots (pytest-hfsnapshot)")
    for option in OPTIONS:
        assert option.ini is not None
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
                option.flag, dest=option.ini, default=None, help=f"{option.full_help} (ini: {option.ini})", **kwargs
            )
        if option.ini_default is None:
            parser.addini(option.ini, help=option.full_help, type=option.ini_type)
        else:
            parser.addini(option.ini, help=option.full_help, type=option.ini_type, default=option.ini_default)


def _raw(config: pytest.Config, option: Knob) -> tuple[Any, str, Path]:
    """The value, where it came from (for errors), and the folder relative paths start from."""
    assert option.ini is not None
    value = config.getoption(option.ini) if option.flag is not None else None
    ini: str = option.ini
    if value is not None:
        return value, str(option.flag), config.invocation_params.dir
    try:
        value = config.getini(ini)
    except (TypeError, ValueError, pytest.UsageError) as error:
        raise pytest.UsageError(f"ini option {ini}: {error}") from None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return value, f"ini option {ini}", base


def _read(config: pytest.Config, option: Knob) -> Any:
    """One knob's value: its flag, else its ini key, else its environment variable, else its default."""
    value, where, base = _raw(config, option)
    empty = value is None or value == [] or (isinstance(value, str) and not value.strip())
    if empty and option.env and not option.env_is_hub:
        try:
            return option.from_env()
        except InvalidRequestError as error:
            raise pytest.UsageError(str(error)) from None
    if empty:
        return option.kind.parse(value or "", base) if option.ini_type != "string" else option.unset
    try:
        return option.kind.parse(value, base)
    except ValueError:
        raise pytest.UsageError(f"{where}: invalid value {value!r}; use {option.kind.use}") from None


def read_options(config: pytest.Config) -> Options:
    """The run's options; a pytest.UsageError naming the flag, ini option or variable when a value is invalid."""
    values = {option.name: _read(config, option) for option in OPTIONS}
    # HF_HUB_OFFLINE is read here too: see pytest_hfsnapshot.core.hub.offline.
    values["offline"] = bool(values["offline"]) or env_offline()
    offline, update = spelling("offline"), spelling("update_pins")
    if values["update_pins"]:
        _, update_where, _ = _raw(config, update)
        if values["pins"] is None:
            raise pytest.UsageError(f"{update_where} {NEEDS_PIN_FILE}")
        if values["offline"]:
            given, offline_where, _ = _raw(config, offline)
            why = offline_where if given else "HF_HUB_OFFLINE=1"
            raise pytest.UsageError(
                f"{update_where} asks the Hub what every branch and tag points at, and {why} makes this run "
                "offline: drop one of them"
            )
    layers = spelling("cache_layers")
    if values["cache_layers"]:
        from ..core.cache.layers import open_layers  # only a run with layers pays for importing them

        writable = values["cache_dir"] if values["cache_dir"] is not None else Path(hf_constants.HF_HUB_CACHE)
        try:
            open_layers(list(values["cache_layers"]), cache_dir=writable, session=None)
        except InvalidRequestError as error:
            given, where, _ = _raw(config, layers)
            raise pytest.UsageError(f"{where if given else layers.env}: {error}") from None
    try:
        return Options(**values)
    except InvalidRequestError as error:
        raise pytest.UsageError(str(error)) from None


def prefetch_only_wanted(config: pytest.Config) -> bool:
    """``--hf-prefetch-only`` (or its ini twin) asked for, read before the options are validated.

    An invalid ini value counts as not asked: :func:`read_options` reports it as a usage error.
    """
    name = str(spelling("prefetch_only").ini)
    wanted = config.getoption(name, None)
    if wanted is None:
        try:
            wanted = config.getini(name)
        except (TypeError, ValueError):
            return False
    return bool(wanted)


__all__ = ["OPTIONS", "Options", "add_options", "prefetch_only_wanted", "read_options"]
