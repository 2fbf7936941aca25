"""Our own state in the cache, file by file: what is written, what is read back, and what is ignored."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from pytest_hfsnapshot.core.cache import state
from pytest_hfsnapshot.core.cache.layout import RepoCache, own_dir
from pytest_hfsnapshot.core.cache.verify import ExpectedFile
from pytest_hfsnapshot.request import SnapshotRequest

COMMIT = "a" * 40
OTHER = "b" * 40
FILES = [
    ExpectedFile("config.json", 2, "1" * 40, False),
    ExpectedFile("model.safetensors", 4096, "2" * 64, True, xet="3" * 64),
]


@pytest.fixture
def repo(tmp_path: Path) -> RepoCache:
    return RepoCache(tmp_path, "org/tiny", "model")


# --- records --------------------------------------------------------------------------------------


def test_a_record_reads_back_as_the_files_written(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/tiny")
    state.write_record(repo, request, COMMIT, FILES)

    assert state.read_record(repo, request, COMMIT) == FILES
    data = json.loads(state.record_path(repo, request, COMMIT).read_text())
    assert (data["version"], data["repo_id"], data["repo_type"], data["commit"]) == (
        state.RECORD_VERSION,
        "org/tiny",
        "model",
        COMMIT,
    )
    assert data["selection"] == {"allow_patterns": None, "ignore_patterns": None, "metadata_only": False}


def test_a_record_is_per_commit_and_per_selection(repo: RepoCache) -> None:
    full = SnapshotRequest.build("org/tiny")
    state.write_record(repo, full, COMMIT, FILES)

    assert state.read_record(repo, full, OTHER) is None
    assert state.read_record(repo, SnapshotRequest.build("org/tiny", allow_patterns="*.json"), COMMIT) is None
    assert state.read_record(repo, SnapshotRequest.build("org/tiny", metadata_only=True), COMMIT) is None
    # private changes how a refusal is reported, not what is downloaded: the same record.
    assert state.read_record(repo, SnapshotRequest.build("org/tiny", private=True), COMMIT) == FILES


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[]",
        '{"version": 1, "commit": "' + COMMIT + '", "files": []}',
        '{"version": 2, "commit": "' + OTHER + '", "files": []}',
        '{"version": 2, "commit": "' + COMMIT + '"}',
        '{"version": 2, "commit": "' + COMMIT + '", "files": [["config.json", "2", "x", false, "x", ""]]}',
        '{"version": 2, "commit": "' + COMMIT + '", "files": [["too", "short"]]}',
    ],
    ids=["garbage", "a-list", "old-version", "another-commit", "no-files", "bad-size", "bad-entry"],
)
def test_a_record_of_another_format_or_commit_is_not_trusted(repo: RepoCache, content: str) -> None:
    request = SnapshotRequest.build("org/tiny")
    path = state.record_path(repo, request, COMMIT)
    path.parent.mkdir(parents=True)
    path.write_text(content)

    assert state.read_record(repo, request, COMMIT) is None


# --- resolutions ----------------------------------------------------------------------------------


def test_without_a_session_a_resolution_lives_in_this_process_only(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/tiny", revision="dev")
    state.remember_resolution(repo, request, None, COMMIT)

    assert state.resolved(repo, request, None) == COMMIT
    assert state.resolved(repo, SnapshotRequest.build("org/tiny"), None) is None
    assert state.resolved(RepoCache(repo.cache_dir / "other", "org/tiny", "model"), request, None) is None
    assert not own_dir(repo.cache_dir).exists(), "nothing written to the cache"


def test_a_session_shares_its_resolutions_through_the_cache(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/tiny", revision="refs/pr/1")
    state.remember_resolution(repo, request, "s1", COMMIT)

    assert state.resolved(repo, request, "s1") == COMMIT
    assert state.resolved(repo, request, "s2") is None
    path = repo.resolution_path("s1", "refs/pr/1")
    assert path.name == "models--org--tiny@refs%2Fpr%2F1.json"
    assert json.loads(path.read_text())["revision"] == "refs/pr/1"
    state.remember_resolution(repo, request, "s1", OTHER)
    assert state.resolved(repo, request, "s1") == OTHER


@pytest.mark.parametrize("content", ['{"commit": "main"}', '{"commit": 40}', "[]", "{"])
def test_a_resolution_that_is_not_a_commit_id_is_none(repo: RepoCache, content: str) -> None:
    path = repo.resolution_path("s1", "main")
    path.parent.mkdir(parents=True)
    path.write_text(content)

    assert state.resolved(repo, SnapshotRequest.build("org/tiny"), "s1") is None


def test_a_new_session_prunes_the_resolutions_of_sessions_days_old(repo: RepoCache) -> None:
    resolutions = own_dir(repo.cache_dir) / "resolutions"
    old, recent = resolutions / "old", resolutions / "recent"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "models--org--tiny@main.json").write_text(json.dumps({"commit": COMMIT}))
    days_ago = time.time() - state.SESSION_MAX_AGE - 60
    os.utime(old, (days_ago, days_ago))

    state.remember_resolution(repo, SnapshotRequest.build("org/tiny"), "new", COMMIT)

    assert sorted(p.name for p in resolutions.iterdir()) == ["new", "recent"]
    # A session already under way writes into its own folder without pruning again.
    os.utime(recent, (days_ago, days_ago))
    state.remember_resolution(repo, SnapshotRequest.build("org/tiny", revision="dev"), "new", COMMIT)
    assert sorted(p.name for p in resolutions.iterdir()) == ["new", "recent"]


# --- refusals -------------------------------------------------------------------------------------


def test_a_refusal_is_kept_then_forgotten_and_never_holds_the_token(repo: RepoCache) -> None:
    assert state.recalled_refusal(repo) is None
    state.remember_refusal(repo, reason="gated", message="Access to org/tiny is restricted", token_set=True)

    recalled = state.recalled_refusal(repo)
    assert recalled is not None
    assert sorted(recalled) == ["at", "message", "reason", "token_set"]
    assert (recalled["reason"], recalled["token_set"]) == ("gated", True)

    state.forget_refusal(repo)
    state.forget_refusal(repo)  # twice: nothing to forget is fine
    assert state.recalled_refusal(repo) is None


def test_a_refusal_that_cannot_be_written_is_not_an_error(repo: RepoCache) -> None:
    own_dir(repo.cache_dir).parent.mkdir(parents=True)
    own_dir(repo.cache_dir).write_text("a file where our folder should be")

    state.remember_refusal(repo, reason="gated", message="m", token_set=False)

    assert state.recalled_refusal(repo) is None


# --- failure memory -------------------------------------------------------------------------------


def test_failures_are_shared_per_session_and_removed_by_the_controller(tmp_path: Path) -> None:
    writer, reader, stranger = state.FailureMemory("s1"), state.FailureMemory("s1"), state.FailureMemory("s2")
    writer.share(tmp_path, "org--tiny", {"kind": "auth", "reason": "gated"})

    assert reader.recall(tmp_path, "org--tiny") == {"kind": "auth", "reason": "gated"}
    assert reader.recall(tmp_path, "org--other") is None
    assert stranger.recall(tmp_path, "org--tiny") is None

    controller = state.FailureMemory("s1")
    controller.adopt(writer.folders)
    controller.remove()
    assert reader.recall(tmp_path, "org--tiny") is None
    assert not (own_dir(tmp_path) / "outcomes" / "s1").exists()


def test_sharing_into_a_cache_that_cannot_take_it_is_skipped(tmp_path: Path) -> None:
    own_dir(tmp_path).parent.mkdir(parents=True)
    own_dir(tmp_path).write_text("not a folder")
    failures = state.FailureMemory("s1")

    failures.share(tmp_path, "org--tiny", {"kind": "auth"})

    assert failures.folders == set()
    assert failures.recall(tmp_path, "org--tiny") is None


# --- lock holder ----------------------------------------------------------------------------------


def test_the_holder_record_names_this_process_or_the_one_given(repo: RepoCache) -> None:
    assert state.read_holder(repo) == {}
    state.write_holder(repo, "kernel")

    holder = state.read_holder(repo)
    assert (holder["pid"], holder["host"], holder["mode"], holder["repo"]) == (
        os.getpid(),
        socket.gethostname(),
        "kernel",
        "model:org/tiny",
    )
    assert time.strptime(holder["since_iso"], "%Y-%m-%dT%H:%M:%SZ")
    assert abs(holder["since"] - time.time()) < 60

    state.write_holder(repo, "soft", pid=1234, host="ci-runner-7")
    assert {k: state.read_holder(repo)[k] for k in ("pid", "host", "mode")} == {
        "pid": 1234,
        "host": "ci-runner-7",
        "mode": "soft",
    }


def test_a_holder_record_that_is_not_an_object_reads_as_empty(repo: RepoCache) -> None:
    repo.holder_path.parent.mkdir(parents=True)
    repo.holder_path.write_text("[1, 2]")
    assert state.read_holder(repo) == {}
