"""The Hub token never shows: not in errors (their whole chain), log records at DEBUG, or output."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot import AuthError, HfSnapshotError, TransientError, materialize
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import ClientClock, assert_snapshot_matches, repo_files

TOKEN = "hf_SENTINELtoken123"
WRONG = "hf_SENTINELwrong456"
SECRET_PARTS = ("SENTINELtoken123", "SENTINELwrong456")


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[LocalHub]:
    """A local Hub whose token is the sentinel, with gated and private repos."""
    with LocalHub(token=TOKEN) as server, server.configure_client(tmp_path / "hf-cache"):
        server.add_repo("org/gated", repo_files(60), gated=True)
        server.add_repo("org/private", repo_files(61), private=True)
        yield server


def _everything_said(error: BaseException, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> str:
    out, err = capfd.readouterr()
    said = [out, err, caplog.text, "".join(traceback.format_exception(error))]
    link: BaseException | None = error
    while link is not None:
        said += [str(link), repr(link), repr(getattr(link, "args", ()))]
        link = link.__cause__ or link.__context__
    for record in caplog.records:
        said += [record.getMessage(), repr(record.args), repr(getattr(record, "__dict__", {}))]
    return "\n".join(said)


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("pytest_hfsnapshot", "huggingface_hub", "httpx", "httpx2", "httpcore", "filelock"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


CASES: dict[str, tuple[str, dict[str, Any], type[HfSnapshotError]]] = {
    "gated-no-token": ("org/gated", {}, AuthError),
    "gated-wrong-token-env": ("org/gated", {"env": WRONG}, AuthError),
    "private-wrong-token-arg": ("org/private", {"token": WRONG}, AuthError),
    "private-no-token": ("org/private", {}, AuthError),
    "private-5xx-file-exhausted": (
        "org/private",
        {"token": TOKEN, "fail": "*/resolve/*/model.safetensors"},
        TransientError,
    ),
    "private-5xx-revision-exhausted": ("org/private", {"env": TOKEN, "fail": "*/revision/*"}, TransientError),
    "gated-5xx-listing-exhausted": ("org/gated", {"token": TOKEN, "fail": "*/tree/*"}, TransientError),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_token_never_appears_in_failures(
    hub: LocalHub,
    client_clock: ClientClock,
    debug_logs: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    repo_id, how, expected = CASES[case]
    if "env" in how:
        monkeypatch.setenv("HF_TOKEN", how["env"])
    if "fail" in how:
        hub.fail(how["fail"], 503, times=500)

    with pytest.raises(expected) as caught:
        materialize(repo_id, token=how.get("token"), retries=1)

    said = _everything_said(caught.value, debug_logs, capfd)
    assert repo_id in str(caught.value)
    for secret in SECRET_PARTS:
        assert secret not in said, f"{case}: the token leaked"
    if "token" in how or "env" in how:
        # The token really was sent: the test would see a leak of it.
        assert hub.requests, "no request was made"


@pytest.mark.parametrize("repo_id", ["org/gated", "org/private"])
def test_right_token_opens_the_repo(hub: LocalHub, monkeypatch: pytest.MonkeyPatch, repo_id: str) -> None:
    # The counterpart of the failures above: the sentinel token is the one that works.
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    snap = materialize(repo_id)
    assert_snapshot_matches(snap.path, repo_files(60 if repo_id == "org/gated" else 61))
    # Nor is it written anywhere in the cache (records, holder files, listings).
    assert hub.cache_dir is not None
    for path in hub.cache_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert TOKEN.encode() not in path.read_bytes(), f"the token is stored in {path}"
