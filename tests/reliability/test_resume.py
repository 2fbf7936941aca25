"""CONTRACT section 11, "Resume": a transfer cut short goes on from the byte where it stopped, across
huggingface_hub's calls and the plugin's retries; file bytes fetched / file bytes <= 1.01 under cuts.

Over plain HTTP the engine's transfers resume with ``Range``. Through hf_xet the transfer is hf_xet's
own: what it does under the kit's cuts is measured here and pinned, so that a release that changes
it fails here.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from pytest_hfsnapshot import TransientError, materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.doctor import scan as doctor
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import (
    ClientClock,
    assert_snapshot_matches,
    content_bytes,
    incomplete_files,
    one_fetch_bytes,
    repo_files,
    sha256,
    xet_backed,
)

REPO = "org/resumed"
NAME = "model.safetensors"
PATTERN = f"*/resolve/*/{NAME}"
SIZE = 32 * 1024 * 1024
CUT_AT = 8 * 1024 * 1024
#: The no-progress tries of one transfer after the last byte arrived (huggingface_hub's http_get: 5).
TRIES = 5


def big_repo(seed: int) -> dict[str, bytes]:
    return repo_files(seed, weight_size=SIZE)


def fetched_ratio(hub: LocalHub, files: dict[str, bytes]) -> float:
    """File bytes the Hub sent for the weights (cut bodies count what was sent) over the file's size."""
    return content_bytes(hub, PATTERN) / len(files[NAME])


def partial_of(hub: LocalHub, files: dict[str, bytes]) -> str:
    """The name a kept partial download of the weights has: ``<sha256>.incomplete``."""
    return f"{sha256(files[NAME])}.incomplete"


def ranged_answers(hub: LocalHub) -> int:
    return hub.request_count(PATTERN, method="GET", status=206)


def assert_two_cuts_cost_what_they_should(hub: LocalHub, files: dict[str, bytes]) -> bool:
    """The bytes sent for :data:`NAME`, cut twice at :data:`CUT_AT`; True when it came over Xet."""
    sent = content_bytes(hub, PATTERN)
    if xet_backed(hub, NAME, files[NAME]):
        # hf_xet fetches a cut xorb range again from its first byte, inside its one transfer (the
        # file is one xorb range here): each cut costs the bytes it let through.
        low, high = one_fetch_bytes(hub, NAME, files[NAME])
        assert low + 2 * CUT_AT <= sent <= high + 2 * CUT_AT, f"{sent / SIZE:.4f}x the file's bytes"
        return True
    assert sent / SIZE <= 1.01, f"{sent / SIZE:.4f}x the file's bytes"
    return False


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_file_cut_twice_goes_on_from_each_cut(local_hub: LocalHub, client_clock: ClientClock) -> None:
    files = big_repo(40)
    local_hub.add_repo(REPO, files)
    local_hub.cut(PATTERN, CUT_AT, times=2)

    snap = materialize(REPO, retries=2)

    assert_snapshot_matches(snap.path, files)
    assert local_hub.pending_faults() == []
    if not assert_two_cuts_cost_what_they_should(local_hub, files):
        assert ranged_answers(local_hub) == 2
    assert incomplete_files(local_hub.cache_dir, REPO) == []


@pytest.mark.transports("http")
def test_a_download_given_up_goes_on_in_the_next_call(local_hub: LocalHub, client_clock: ClientClock) -> None:
    files = big_repo(41)
    local_hub.add_repo(REPO, files)
    local_hub.cut(PATTERN, CUT_AT)
    local_hub.cut(PATTERN, 0, times=TRIES)  # then nothing more arrives, try after try

    with pytest.raises(TransientError):
        materialize(REPO, retries=0)

    assert local_hub.pending_faults() == []
    kept = partial_of(local_hub, files)
    assert incomplete_files(local_hub.cache_dir, REPO) == [kept]
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    assert os.path.getsize(repo.blobs / kept) == CUT_AT
    # The doctor sees an unfinished download nobody is writing (its --fix would remove it).
    report = doctor.scan(local_hub.cache_dir)
    assert [(f.kind, f.path) for f in report.findings if f.kind == "incomplete"] == [("incomplete", f"blobs/{kept}")]

    snap = materialize(REPO, retries=0)

    assert_snapshot_matches(snap.path, files)
    assert fetched_ratio(local_hub, files) <= 1.01, f"{fetched_ratio(local_hub, files):.4f}x the file's bytes"
    assert incomplete_files(local_hub.cache_dir, REPO) == []


@pytest.mark.transports("http")
def test_a_cut_then_a_5xx_goes_on_in_the_plugins_next_try(local_hub: LocalHub, client_clock: ClientClock) -> None:
    # huggingface_hub does not retry a GET answered 503: the plugin does, with a new call.
    files = big_repo(42)
    local_hub.add_repo(REPO, files)
    local_hub.cut(PATTERN, CUT_AT)
    # The cut body is paced so that the 503 is in place before it ends (the GET is counted when
    # it is answered, before its body), then pacing stops.
    local_hub.slow_each(CUT_AT / 4)
    outcome: dict[str, object] = {}

    def fetch() -> None:
        try:
            outcome["snap"] = materialize(REPO, retries=2)
        except Exception as error:  # reported by the assertion below
            outcome["error"] = error

    worker = threading.Thread(target=fetch)
    worker.start()
    deadline = time.monotonic() + 30
    while local_hub.request_count(PATTERN, method="GET") == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    local_hub.fail(PATTERN, 503, method="GET")
    local_hub.slow_each(None)
    worker.join(60)

    assert "snap" in outcome, outcome
    assert local_hub.request_count(PATTERN, method="GET", status=503) == 1
    assert_snapshot_matches(outcome["snap"].path, files)  # type: ignore[attr-defined]
    assert fetched_ratio(local_hub, files) <= 1.01, f"{fetched_ratio(local_hub, files):.4f}x the file's bytes"


# --- partial downloads that must not be trusted ----------------------------------------------------


@pytest.mark.transports("http")
def test_a_partial_longer_than_the_file_is_dropped(local_hub: LocalHub) -> None:
    files = big_repo(43)
    local_hub.add_repo(REPO, files)
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    repo.blobs.mkdir(parents=True)
    (repo.blobs / partial_of(local_hub, files)).write_bytes(files[NAME] + b"more")

    snap = materialize(REPO, retries=0)

    assert_snapshot_matches(snap.path, files)
    assert ranged_answers(local_hub) == 0
    assert fetched_ratio(local_hub, files) == 1.0
    assert incomplete_files(local_hub.cache_dir, REPO) == []


@pytest.mark.transports("http")
def test_a_partial_of_other_bytes_is_caught_by_the_hash_and_fetched_again(local_hub: LocalHub) -> None:
    files = big_repo(44)
    local_hub.add_repo(REPO, files)
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    repo.blobs.mkdir(parents=True)
    (repo.blobs / partial_of(local_hub, files)).write_bytes(b"\0" * CUT_AT)

    snap = materialize(REPO, retries=1)

    assert_snapshot_matches(snap.path, files)
    # The rest after the planted bytes, found wrong by its sha256, then the whole file.
    assert ranged_answers(local_hub) == 1
    assert content_bytes(local_hub, PATTERN) == SIZE - CUT_AT + SIZE
    assert incomplete_files(local_hub.cache_dir, REPO) == []


@pytest.mark.transports("http")
def test_a_partial_of_a_file_changed_upstream_is_not_used(local_hub: LocalHub, client_clock: ClientClock) -> None:
    old = big_repo(45)
    local_hub.add_repo(REPO, old)
    local_hub.cut(PATTERN, CUT_AT)
    local_hub.cut(PATTERN, 0, times=TRIES)
    with pytest.raises(TransientError):
        materialize(REPO, retries=0)
    assert incomplete_files(local_hub.cache_dir, REPO) == [partial_of(local_hub, old)]
    new = big_repo(46)
    local_hub.add_repo(REPO, new)
    local_hub.reset_counters()

    snap = materialize(REPO, session="later", retries=0)

    assert_snapshot_matches(snap.path, new)
    assert ranged_answers(local_hub) == 0
    assert fetched_ratio(local_hub, new) == 1.0
    assert incomplete_files(local_hub.cache_dir, REPO) == []


# --- implicit uses (CONTRACT section 9, manage) -----------------------------------------------------

IMPLICIT_TEST = """
import hashlib
from huggingface_hub import hf_hub_download

def test_loads_the_weights():
    path = hf_hub_download("{repo}", "{name}")
    with open(path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == "{digest}"
"""


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_an_implicit_download_cut_twice_goes_on_from_each_cut(
    pytester: pytest.Pytester, local_hub: LocalHub, client_clock: ClientClock
) -> None:
    files = big_repo(47)
    local_hub.add_repo(REPO, files)
    local_hub.cut(PATTERN, CUT_AT, times=2)
    pytester.makepyfile(IMPLICIT_TEST.format(repo=REPO, name=NAME, digest=sha256(files[NAME])))

    result = pytester.runpytest(
        f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider", "--hf-implicit=manage"
    )

    result.assert_outcomes(passed=1)
    assert local_hub.pending_faults() == []
    assert_two_cuts_cost_what_they_should(local_hub, files)
