"""What a failed materialization says: one typed error per kind of failure, naming what failed and where."""

from __future__ import annotations

import errno
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from huggingface_hub import constants
from huggingface_hub import errors as hf_errors

from pytest_hfsnapshot import (
    AuthError,
    DiskError,
    EntryNotFoundError,
    HfSnapshotError,
    RevisionNotFoundError,
    TransientError,
)
from pytest_hfsnapshot.core.engine import error_builders
from pytest_hfsnapshot.core.hub import retry
from pytest_hfsnapshot.request import SnapshotRequest

HUB = "https://hub.test"
REQUEST = SnapshotRequest.build("org/tiny", revision="v1")


def http_error(
    cls: type[hf_errors.HfHubHTTPError] = hf_errors.HfHubHTTPError,
    status: int = 500,
    *,
    url: str = f"{HUB}/org/tiny/resolve/v1/model.safetensors",
    method: str = "GET",
) -> hf_errors.HfHubHTTPError:
    # Only what the classification reads: the client's response class differs between 1.x and 2.x.
    request = SimpleNamespace(method=method, url=url)
    response: Any = SimpleNamespace(status_code=status, headers={}, request=request, url=url)
    return cls(f"{status} error", response=response)


def typed(error: BaseException, *, token_set: bool = False) -> HfSnapshotError:
    return error_builders.typed(REQUEST, error, retry.classify(error), token_set=token_set, cache_dir=Path("/cache"))


@pytest.fixture(autouse=True)
def endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", HUB)


def test_a_refusal_is_an_auth_error_with_its_reason() -> None:
    error = typed(http_error(hf_errors.GatedRepoError, 403))

    assert isinstance(error, AuthError)
    assert (error.reason, error.repo_id, error.revision) == ("gated", "org/tiny", "v1")
    assert f"{HUB}/org/tiny" in str(error)


def test_an_unknown_revision_names_it_and_the_repo() -> None:
    error = typed(http_error(hf_errors.RevisionNotFoundError, 404, url=f"{HUB}/api/models/org/tiny/revision/v1"))

    assert isinstance(error, RevisionNotFoundError)
    assert str(error) == "Revision 'v1' does not exist in model 'org/tiny': check the branch, tag or commit id."


def test_a_missing_file_is_named_from_the_refused_url() -> None:
    error = typed(http_error(hf_errors.RemoteEntryNotFoundError, 404, url=f"{HUB}/org/tiny/resolve/v1/sub%20dir/a.bin"))

    assert isinstance(error, EntryNotFoundError)
    assert str(error) == "A file of org/tiny@v1 is not on the Hub (sub dir/a.bin)."


def test_a_filesystem_refusal_is_a_disk_error() -> None:
    error = typed(OSError(errno.EROFS, "Read-only file system"))

    assert isinstance(error, DiskError)
    assert str(error).startswith("Read-only file system (EROFS) ")


def test_anything_else_says_what_failed_with_the_class_and_status() -> None:
    assert str(typed(http_error(status=422))) == "Materializing org/tiny@v1 failed: HfHubHTTPError (HTTP 422)."
    assert str(typed(ValueError("a bug"))) == "Materializing org/tiny@v1 failed: ValueError."


@pytest.mark.parametrize(
    ("error", "what", "filename", "message"),
    [
        (
            http_error(status=503, url=f"{HUB}/api/models/org/tiny/revision/v1"),
            "the revision",
            None,
            f"Gave up on the revision of org/tiny@v1 at {HUB} after 3 attempts: last cause HfHubHTTPError "
            "(HTTP 503). The Hub or the network is failing; retry later or raise --hf-retries.",
        ),
        (
            # A file's HEAD that huggingface_hub had retried itself: raising --hf-retries would not help.
            http_error(status=503, method="HEAD", url="https://cdn.test/org/tiny/resolve/v1/model.safetensors"),
            "the download",
            None,
            "Gave up on the download of org/tiny@v1, file 'model.safetensors' at https://cdn.test after 3 attempts "
            "(huggingface_hub had already retried it with its own backoff): last cause HfHubHTTPError (HTTP 503). "
            "The Hub or the network is failing; retry later.",
        ),
        (
            ConnectionResetError("reset"),
            "the listing",
            "config.json",
            f"Gave up on the listing of org/tiny@v1, file 'config.json' at {HUB} after 3 attempts: last cause "
            "ConnectionResetError. The Hub or the network is failing; retry later or raise --hf-retries.",
        ),
    ],
    ids=["revision", "file-retried-by-the-client", "transport-error"],
)
def test_a_give_up_names_what_where_how_often_and_the_last_cause(
    error: BaseException, what: str, filename: str | None, message: str
) -> None:
    gave_up = error_builders.gave_up(REQUEST, error, retry.classify(error), 3, what, filename, 2)

    assert isinstance(gave_up, TransientError)
    assert str(gave_up) == message
    assert (gave_up.attempts, gave_up.repo_id, gave_up.revision) == (3, "org/tiny", "v1")
    assert gave_up.filename == (filename or error_builders.failed_file(error))


def test_one_attempt_is_singular() -> None:
    error = http_error(status=500, url=f"{HUB}/api/models/org/tiny/revision/v1")
    assert " after 1 attempt: " in str(
        error_builders.gave_up(REQUEST, error, retry.classify(error), 1, "the revision", None, 0)
    )


def test_the_endpoint_and_the_file_are_read_from_anywhere_in_the_chain() -> None:
    try:
        try:
            raise http_error(status=502, url="https://cas.test:8443/org/tiny/resolve/v1/a%2Bb.json?x=1")
        except hf_errors.HfHubHTTPError as inner:
            raise OSError("Can't load config") from inner
    except OSError as outer:
        wrapped = outer

    assert error_builders.failed_origin(wrapped) == "https://cas.test:8443"
    assert error_builders.failed_file(wrapped) == "a+b.json"
    # Nothing to read them from: the Hub in use, and no file.
    assert error_builders.failed_origin(ValueError("x")) == HUB == error_builders.hub()
    assert error_builders.failed_file(ValueError("x")) is None
