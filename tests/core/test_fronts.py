"""The core's advice names each knob as the front end in use spells it (issue: messages per front end)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

import pytest_hfsnapshot
from pytest_hfsnapshot import settings
from pytest_hfsnapshot.core.engine import space

CORE = Path(pytest_hfsnapshot.__file__).parent / "core"


@pytest.fixture
def front() -> Iterator[None]:
    previous = settings.serve_front("materialize")
    yield
    settings.serve_front(previous)


@pytest.mark.parametrize(
    ("served", "cache_dir", "lock_timeout"),
    [
        ("pytest", "--hf-cache-dir", "--hf-lock-timeout"),
        ("materialize", "cache_dir=", "lock_timeout="),
        ("cli:prefetch", "--cache-dir", "the lock_timeout setting (not settable here)"),
        ("cli:pins", "the cache_dir setting (not settable here)", "the lock_timeout setting (not settable here)"),
    ],
)
def test_advice_is_spelled_for_the_front_end(front: None, served: str, cache_dir: str, lock_timeout: str) -> None:
    settings.serve_front(served)
    assert f"point {cache_dir} / HF_HUB_CACHE at a writable folder" in space.advice(errno.EROFS)
    assert settings.say("lock_timeout") == lock_timeout


def test_a_value_and_the_environment_are_spelled_too(front: None) -> None:
    settings.serve_front("pytest")
    assert settings.say("on_auth_error", value="skip") == "--hf-on-auth-error=skip"
    assert settings.say("lock_lease", with_env=True) == "--hf-lock-lease (ini hf_lock_lease, env HFSNAPSHOT_LOCK_LEASE)"
    settings.serve_front("materialize")
    assert settings.say("lock_lease", with_env=True) == "lock_lease= (env HFSNAPSHOT_LOCK_LEASE)"


def test_the_core_writes_no_pytest_flag() -> None:
    found = [
        f"{path.name}:{number}"
        for path in sorted(CORE.glob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "--hf-" in line
    ]
    assert found == [], "core/ names pytest flags; get them from pytest_hfsnapshot.settings.say"


def test_the_command_line_serves_its_own_front_and_restores_the_last(front: None) -> None:
    from pytest_hfsnapshot.cli import main

    assert main(["pins", "check", "/nonexistent/pins.json"]) == 2
    assert settings.say("retries") == "retries="
