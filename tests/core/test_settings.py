"""The knobs of a materialization: validated once, on construction, with the defaults in one place."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import constants

from pytest_hfsnapshot import InvalidRequestError
from pytest_hfsnapshot.settings import (
    AUTH_ACTIONS,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_RATE_WAIT,
    DEFAULT_RETRIES,
    MISSING_ACTIONS,
    VERIFY_MODES,
    Settings,
)


def test_the_defaults() -> None:
    assert Settings() == Settings(
        cache_dir=None,
        verify="size",
        retries=DEFAULT_RETRIES,
        lock_timeout=DEFAULT_LOCK_TIMEOUT,
        offline=None,
        strict=False,
        session=None,
        token=None,
        space_check=True,
        max_rate_wait=DEFAULT_MAX_RATE_WAIT,
        pins=None,
    )
    assert (DEFAULT_RETRIES, DEFAULT_LOCK_TIMEOUT, DEFAULT_MAX_RATE_WAIT) == (5, 900.0, 300.0)


def test_the_choices_are_spelled_once() -> None:
    assert AUTH_ACTIONS == ("skip", "xfail", "fail")
    assert MISSING_ACTIONS == ("fail", "skip")
    assert VERIFY_MODES == ("size", "sha256")


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"verify": "md5"}, "verify='md5' is not valid: use 'size' or 'sha256'."),
        ({"verify": None}, "verify=None is not valid: use 'size' or 'sha256'."),
        ({"retries": -1}, "retries=-1 is not valid: give a whole number >= 0."),
        ({"retries": 1.0}, "retries=1.0 is not valid: give a whole number >= 0."),
        ({"retries": True}, "retries=True is not valid: give a whole number >= 0."),
        ({"retries": "3"}, "retries='3' is not valid: give a whole number >= 0."),
        ({"lock_timeout": 0}, "lock_timeout=0 is not valid: give a number of seconds > 0."),
        ({"lock_timeout": -0.5}, "lock_timeout=-0.5 is not valid: give a number of seconds > 0."),
        ({"lock_timeout": math.nan}, "lock_timeout=nan is not valid: give a number of seconds > 0."),
        ({"lock_timeout": False}, "lock_timeout=False is not valid: give a number of seconds > 0."),
        ({"lock_timeout": "5"}, "lock_timeout='5' is not valid: give a number of seconds > 0."),
        ({"max_rate_wait": -1}, "max_rate_wait=-1 is not valid: give a number of seconds >= 0."),
        ({"max_rate_wait": math.nan}, "max_rate_wait=nan is not valid: give a number of seconds >= 0."),
        ({"max_rate_wait": None}, "max_rate_wait=None is not valid: give a number of seconds >= 0."),
        ({"session": ""}, "session='' is not valid: use letters, digits, '_', '.', '-'."),
        ({"session": "a/b"}, "session='a/b' is not valid: use letters, digits, '_', '.', '-'."),
        ({"session": "s" * 65}, f"session='{'s' * 65}' is not valid: use letters, digits, '_', '.', '-'."),
        ({"pins": 3}, "pins=3 is not valid: give the path of a pin file, or None."),
        ({"pins": ["hf-pins.json"]}, "pins=['hf-pins.json'] is not valid: give the path of a pin file, or None."),
    ],
)
def test_an_invalid_knob_is_refused_naming_it_and_what_to_give(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        Settings(**knobs)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "knobs",
    [
        {"retries": 0},
        {"lock_timeout": 0.001},
        {"lock_timeout": math.inf},
        {"max_rate_wait": 0},
        {"session": "gw0.run-2_a"},
        {"session": "s" * 64},
        {"verify": "sha256"},
        {"pins": "hf-pins.json"},
        {"pins": Path("hf-pins.json")},
    ],
)
def test_edge_values_are_accepted(knobs: dict[str, Any]) -> None:
    assert dataclasses.asdict(Settings(**knobs)).items() >= knobs.items()


def test_seconds_are_kept_as_floats() -> None:
    settings = Settings(lock_timeout=3, max_rate_wait=0)
    assert (settings.lock_timeout, settings.max_rate_wait) == (3.0, 0.0)
    assert isinstance(settings.lock_timeout, float) and isinstance(settings.max_rate_wait, float)


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().retries = 1  # type: ignore[misc]


def test_resolved_fills_in_huggingface_hubs_defaults_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    assert (Settings().resolved().cache_dir, Settings().resolved().offline) == (str(tmp_path / "hub"), True)
    given = Settings(cache_dir=tmp_path / "mine", offline=False).resolved()
    assert (given.cache_dir, given.offline) == (tmp_path / "mine", False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert Settings().resolved().offline is False
