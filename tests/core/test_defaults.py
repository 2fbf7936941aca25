"""``Settings``: the knobs every front end shares, validated once, with their defaults written once.

Plain unit tests; the plugin's options and the command line take their defaults from here, which
the last tests check on the options registered in this very session.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pytest_hfsnapshot import materialize, settings
from pytest_hfsnapshot.cli import _prefetch_parser
from pytest_hfsnapshot.settings import Settings


def test_the_defaults_are_the_named_constants() -> None:
    made = Settings()
    assert made.verify == settings.DEFAULT_VERIFY == "size"
    assert made.retries == settings.DEFAULT_RETRIES
    assert made.lock_timeout == settings.DEFAULT_LOCK_TIMEOUT
    assert made.max_rate_wait == settings.DEFAULT_MAX_RATE_WAIT
    assert (made.cache_dir, made.offline, made.strict, made.session, made.token, made.space_check) == (
        None,
        None,
        False,
        None,
        None,
        True,
    )
    assert settings.DEFAULT_AUTH_ACTION in settings.AUTH_ACTIONS
    assert settings.DEFAULT_MISSING_ACTION in settings.MISSING_ACTIONS


def test_materialize_takes_the_same_defaults() -> None:
    parameters = inspect.signature(materialize).parameters
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert {name: parameters[name].default for name in fields} == fields


@pytest.mark.parametrize(
    ("ini", "default"),
    [
        ("hf_on_auth_error", settings.DEFAULT_AUTH_ACTION),
        ("hf_on_missing", settings.DEFAULT_MISSING_ACTION),
        ("hf_verify", settings.DEFAULT_VERIFY),
        ("hf_retries", str(settings.DEFAULT_RETRIES)),
        ("hf_lock_timeout", f"{settings.DEFAULT_LOCK_TIMEOUT:g}"),
        ("hf_max_rate_wait", f"{settings.DEFAULT_MAX_RATE_WAIT:g}"),
    ],
)
def test_the_plugins_options_default_to_the_settings(pytestconfig: pytest.Config, ini: str, default: str) -> None:
    # This repository's configuration sets none of them: what getini gives is the registered default.
    assert pytestconfig.getini(ini) == default


def test_the_command_line_defaults_to_the_settings() -> None:
    parsed = _prefetch_parser().parse_args(["--repo", "org/x"])
    assert (parsed.verify, parsed.on_auth_error) == (settings.DEFAULT_VERIFY, settings.DEFAULT_AUTH_ACTION)
