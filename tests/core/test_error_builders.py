"""The typed error builders: which error each kind of failure becomes, and what it names.

Plain unit tests on hand-made exceptions and classifications; the same errors met against the
local Hub are covered by the fault and disk suites.
"""

from __future__ import annotations

import errno
import time
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
    OfflineMissingError,
    RevisionNotFoundError,
    TransientError,
)
from pytest_hfsnapshot.core.cache.verify import ExpectedFile
from pytest_hfsnapshot.core.engine import error_builders
from pytest_hfsnapshot.core.hub import outage, retry
from pytest_hfsnapshot.request import SnapshotRequest

REQUEST = SnapshotRequest.build("org/x", revision="v1")
CACHE = Path("/nowhere/cache")
FILE_URL = "http://127.0.0.2:9/org/x/resolve/" + "c" * 40 + "/weights/model.safetensors"


def failed_request(status: int, *, url: str = FILE_URL, method: str = "GET", cls: Any = None) -> BaseException:
    response: Any = SimpleNamespace(status_code=status, headers={}, request=SimpleNamespace(method=method, url=url))
    return (cls or hf_errors.HfHubHTTPError)(f"{status} error", response=response)


def typed(error: BaseException, *, token_set: bool = False, through_xet: bool = False) -> HfSnapshotError:
    kind = retry.classify(error, through_xet=through_xet)
    return error_builders.typed(REQUEST, error, kind, token_set=token_set, cache_dir=CACHE)


@pytest.mark.parametrize(
    ("error", "expected", "words"),
    [
        (failed_request(403, cls=hf_errors.GatedRepoError), AuthError, "gated"),
        (failed_request(404, cls=hf_errors.RevisionNotFoundError), RevisionNotFoundError, "Revision 'v1' does not"),
        (failed_request(404, cls=hf_errors.RemoteEntryNotFoundError), EntryNotFoundError, "weights/model.safetensors"),
        (OSError(errno.EROFS, "Read-only file system"), DiskError, "Read-only file system (EROFS) for org/x@v1"),
        (ValueError("a bug"), HfSnapshotError, "Materializing org/x@v1 failed: ValueError."),
    ],
)
def test_each_kind_becomes_its_typed_error(error: BaseException, expected: type, words: str) -> None:
    built = typed(error)
    assert type(built) is expected
    assert words in str(built)
    assert (built.repo_id, built.revision) == ("org/x", "v1")


def test_an_auth_error_keeps_its_reason() -> None:
    built = typed(failed_request(403, cls=hf_errors.GatedRepoError), token_set=True)
    assert isinstance(built, AuthError) and built.reason == "gated"


def test_a_refused_write_of_a_download_names_the_files_it_was_fetching(tmp_path: Path) -> None:
    still = [ExpectedFile("b.safetensors", 3 * 1024 * 1024, "d" * 64, True), ExpectedFile("a.json", 2, "e" * 40, False)]
    full = RuntimeError("Task error: IO Error: No space left on device (os error 28)")
    built = error_builders.disk(REQUEST, full, errno.ENOSPC, cache_dir=tmp_path, blobs=tmp_path / "b", still=still)
    assert built.filename == "a.json, b.safetensors" and built.folder == str(tmp_path / "b")
    assert built.needed == 3 * 1024 * 1024 + 2
    assert str(built).startswith(
        f"No space left on device (ENOSPC) while writing a.json, b.safetensors for org/x@v1 in {tmp_path / 'b'}: "
        "it still needs 3.0 MiB"
    )


def test_a_refused_write_of_our_own_names_the_path_of_the_oserror(tmp_path: Path) -> None:
    error = OSError(errno.EACCES, "Permission denied", str(tmp_path / ".locks" / "hfsnapshot"))
    built = error_builders.disk(REQUEST, error, errno.EACCES, cache_dir=tmp_path)
    assert (built.filename, built.folder, built.needed) == ("hfsnapshot", str(tmp_path / ".locks"), None)
    assert "Make the cache writable for this user" in str(built)


def test_a_give_up_names_the_file_the_origin_and_who_retried() -> None:
    error = failed_request(503)
    kind = retry.classify(error)
    built = error_builders.gave_up(REQUEST, error, kind, 3, "the download", None, 2)
    assert isinstance(built, TransientError) and (built.attempts, built.filename) == (3, "weights/model.safetensors")
    assert (built.setting, built.limit) == ("retries", 2)
    assert str(built) == (
        "Gave up on the download of org/x@v1, file 'weights/model.safetensors' at http://127.0.0.2:9 after "
        "3 attempts: last cause HfHubHTTPError (HTTP 503). The Hub or the network is failing; retry later "
        "or raise --hf-retries."
    )
    xet = RuntimeError("CAS Client Error: HTTP status server error (503 Service Unavailable), domain: x")
    by_xet = error_builders.gave_up(
        REQUEST, xet, retry.classify(xet, through_xet=True), 1, "the download", "model.safetensors", 0
    )
    assert "after 1 attempt (hf_xet had already retried it with its own backoff): last cause RuntimeError" in str(
        by_xet
    )
    assert str(by_xet).endswith("retry later.")
    head = failed_request(503, method="HEAD")
    by_client = error_builders.gave_up(REQUEST, head, retry.classify(head), 1, "the download", None, 0)
    assert "(huggingface_hub had already retried it with its own backoff)" in str(by_client)


def test_a_call_not_tried_names_the_outage_it_met() -> None:
    down = outage.Outage("http://hub.test", time.time() - 4, "ConnectError")
    built = error_builders.unreachable(REQUEST, down, "the revision")
    assert built.attempts == 0
    assert str(built).startswith(
        "Gave up on the revision of org/x@v1 at http://hub.test without trying: this test session could not "
        "reach it 4 s ago (last cause ConnectError)"
    )


def test_not_cached_names_what_is_missing() -> None:
    built = error_builders.not_cached(REQUEST, "offline and not cached", "refs/v1", "trees/c.json")
    assert isinstance(built, OfflineMissingError) and built.missing == ("refs/v1", "trees/c.json")


def test_the_cause_is_a_class_name_and_a_status_never_a_header() -> None:
    error = failed_request(429)
    error.response.headers = {"Authorization": "Bearer hf_secret"}  # type: ignore[attr-defined]
    assert error_builders.cause(retry.classify(error)) == "HfHubHTTPError (HTTP 429)"
    assert error_builders.cause(retry.classify(ConnectionResetError("reset"))) == "ConnectionResetError"


def test_the_hub_is_the_origin_of_the_endpoint_in_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.example:8443/mirror")
    assert error_builders.hub() == "https://hub.example:8443"
