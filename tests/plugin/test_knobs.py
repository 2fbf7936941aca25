"""Every knob of ``pytest_hfsnapshot.settings.KNOBS`` reaches every front end it declares: the pytest
flag, its ini twin and its environment variable, the command line's flag, ``materialize``'s keyword."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pytest_hfsnapshot import InvalidRequestError, materialize
from pytest_hfsnapshot.cli import _prefetch_parser, add_knob_flags
from pytest_hfsnapshot.settings import KNOBS, Knob, Settings

#: A value other than the default for each knob: (as text, as the value it reads as). A new knob needs one.
SAMPLES: dict[str, tuple[str, object]] = {
    "offline": ("1", True),
    "strict": ("1", True),
    "retries": ("2", 2),
    "lock_timeout": ("2.5", 2.5),
    "lock_lease": ("7.5", 7.5),
    "verify": ("sha256", "sha256"),
    "cache_dir": ("cache", "cache"),
    "cache_layers": ("layer", ("layer",)),
    "space_check": ("1", False),
    "max_rate_wait": ("9", 9.0),
    "pins": ("pins.json", "pins.json"),
    "session": ("s1", "s1"),
    "token": ("hf_x", "hf_x"),
    "on_auth_error": ("fail", "fail"),
    "on_missing": ("skip", "skip"),
    "prefetch_only": ("1", True),
    "manifest": ("m.json", "m.json"),
    "update_pins": ("1", True),
    "implicit": ("manage", "manage"),
    "prefetch": ("org/x", ("org/x",)),
}

SHOW = """
from pytest_hfsnapshot.plugin.hooks import get_options

def pytest_sessionstart(session):
    print("KNOB", repr(getattr(get_options(session.config), {name!r})))
"""


def expected(option: Knob, folder: Path) -> object:
    value = SAMPLES[option.name][1]
    if option.name in ("cache_dir", "pins", "manifest"):
        return folder / str(value)
    if option.name == "cache_layers":
        return (folder / "layer",)
    return value


def test_every_knob_has_a_sample() -> None:
    assert sorted(SAMPLES) == sorted(option.name for option in KNOBS)


def _run(pytester: pytest.Pytester, option: Knob, *args: str) -> str:
    pytester.makeconftest(SHOW.format(name=option.name))
    pytester.mkdir("layer")
    pytester.path.joinpath("pins.json").write_text("[]\n")
    result = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider", *args)
    lines = [line for line in result.stdout.lines if line.startswith("KNOB ")]
    assert lines, result.stdout.str() + result.stderr.str()
    return lines[0].removeprefix("KNOB ")


@pytest.mark.parametrize("option", [o for o in KNOBS if o.flag], ids=lambda o: o.name)
def test_the_pytest_flag(pytester: pytest.Pytester, option: Knob) -> None:
    text = SAMPLES[option.name][0]
    args = [option.flag] if option.ini_type == "bool" else [f"{option.flag}={text}"]
    if option.name == "update_pins":
        args.append("--hf-pins=pins.json")
    assert _run(pytester, option, *map(str, args)) == repr(expected(option, pytester.path))


@pytest.mark.parametrize("option", [o for o in KNOBS if o.ini], ids=lambda o: o.name)
def test_the_ini_key(pytester: pytest.Pytester, option: Knob) -> None:
    extra = "hf_pins = pins.json\n" if option.name == "update_pins" else ""
    pytester.makeini(f"[pytest]\n{option.ini} = {SAMPLES[option.name][0]}\n{extra}")
    assert _run(pytester, option) == repr(expected(option, pytester.path))


@pytest.mark.parametrize("option", [o for o in KNOBS if o.env and o.plugin], ids=lambda o: o.name)
def test_the_environment_variable(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, option: Knob) -> None:
    assert option.env is not None
    if option.env_is_hub and option.name != "offline":
        pytest.skip(f"{option.env} is huggingface_hub's: it reads it itself")
    monkeypatch.setenv(option.env, SAMPLES[option.name][0])
    monkeypatch.chdir(pytester.path)
    assert _run(pytester, option) == repr(expected(option, pytester.path))


@pytest.mark.parametrize("option", [o for o in KNOBS if o.cli], ids=lambda o: o.name)
def test_the_command_line_flag(option: Knob) -> None:
    import argparse

    for command in option.cli:
        parser = _prefetch_parser() if command == "prefetch" else argparse.ArgumentParser()
        if command != "prefetch":
            add_knob_flags(parser, command)
        text = SAMPLES[option.name][0]
        args = [option.cli_flag()] if option.ini_type == "bool" else [option.cli_flag(), text]
        parsed = vars(parser.parse_args(args))
        value = SAMPLES[option.name][1]
        assert parsed[option.name] == ([*value] if isinstance(value, tuple) else value)


@pytest.mark.parametrize("option", [o for o in KNOBS if o.keyword], ids=lambda o: o.name)
def test_the_materialize_keyword(option: Knob) -> None:
    assert inspect.signature(materialize).parameters[option.name].default == option.default
    value = SAMPLES[option.name][1]
    given = [*value] if isinstance(value, tuple) else value
    _, settings = Settings.split({option.name: given})
    made = getattr(settings, option.name)
    assert made == value or (option.name == "cache_layers" and made == (Path("layer").resolve(),))
    with pytest.raises(InvalidRequestError, match=f"^{option.name}=<object"):
        Settings.split({option.name: object()})


def test_an_unknown_keyword_is_named() -> None:
    with pytest.raises(InvalidRequestError, match=r"unknown argument\(s\) lock_leese; materialize\(\) takes"):
        materialize("org/name", lock_leese=30)
