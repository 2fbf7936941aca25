"""Our own state in the cache, file by file: what each one says, who reads it back, and what counts
as absent. Plain unit tests on a temporary cache; no Hub involved."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from pytest_hfsnapshot.core import layout, state
from pytest_hfsnapshot.core.layout import RepoCache
from pytest_hfsnapshot.core.verify import ExpectedFile
from pytest_hfsnapshot.request import SnapshotRequest

COMMIT = "a" * 40
OTHER = "b" * 40
FILES = [
    ExpectedFile("config.json", 2, "c" * 40, False),
    ExpectedFile("model.safetensors", 10, "d" * 64, True, xet="e" * 64),
]


@pytest.fixture
def repo(tmp_path: Path) -> RepoCache:
    return RepoCache(tmp_path, "org/x", "model")


# --- records ------------------------------------------------------------------------------------


def test_a_record_gives_back_the_files_it_was_written_with(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/x")
    state.write_record(repo, request, COMMIT, FILES)
    assert state.read_record(repo, request, COMMIT) == FILES
    data = json.loads(state.record_path(repo, request, COMMIT).read_text())
    assert (data["version"], data["commit"], data["repo_id"]) == (state.RECORD_VERSION, COMMIT, "org/x")


def test_a_record_is_per_commit_and_per_selection(repo: RepoCache) -> None:
    everything = SnapshotRequest.build("org/x")
    configs = SnapshotRequest.build("org/x", allow_patterns="*.json")
    state.write_record(repo, everything, COMMIT, FILES)
    assert state.read_record(repo, everything, OTHER) is None
    assert state.read_record(repo, configs, COMMIT) is None
    # The revision and "private" do not change what is selected: the same record serves them.
    same = SnapshotRequest.build("org/x", revision=COMMIT, private=True)
    assert state.read_record(repo, same, COMMIT) == FILES


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: {**data, "version": state.RECORD_VERSION - 1},
        lambda data: {**data, "commit": OTHER},
        lambda data: {**data, "files": [["config.json", "two", "c" * 40, False, "", ""]]},
        lambda data: {k: v for k, v in data.items() if k != "files"},
        lambda data: [data],
    ],
    ids=["old-format", "other-commit", "bad-entry", "no-files", "not-an-object"],
)
def test_a_record_of_another_shape_counts_as_absent(repo: RepoCache, damage: object) -> None:
    request = SnapshotRequest.build("org/x")
    state.write_record(repo, request, COMMIT, FILES)
    path = state.record_path(repo, request, COMMIT)
    path.write_text(json.dumps(damage(json.loads(path.read_text()))))  # type: ignore[operator]
    assert state.read_record(repo, request, COMMIT) is None


def test_a_torn_record_counts_as_absent(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/x")
    state.write_record(repo, request, COMMIT, FILES)
    path = state.record_path(repo, request, COMMIT)
    path.write_text(path.read_text()[:20])
    assert state.read_record(repo, request, COMMIT) is None


# --- resolutions --------------------------------------------------------------------------------


def test_without_a_session_a_resolution_is_this_process_own(repo: RepoCache, tmp_path: Path) -> None:
    request = SnapshotRequest.build("org/x", revision="release")
    assert state.resolved(repo, request, None) is None
    state.remember_resolution(repo, request, None, COMMIT)
    assert state.resolved(repo, request, None) == COMMIT
    assert not layout.own_dir(repo.cache_dir).exists()  # nothing written for other processes
    elsewhere = RepoCache(tmp_path / "other-cache", "org/x", "model")
    assert state.resolved(elsewhere, request, None) is None  # per cache


def test_a_sessions_resolution_is_shared_through_the_cache(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/x", revision="feature/a")
    state.remember_resolution(repo, request, "s1", COMMIT)
    assert state.resolved(repo, request, "s1") == COMMIT
    assert state.resolved(repo, request, "s2") is None
    path = repo.resolution_path("s1", "feature/a")
    path.write_text(json.dumps({"commit": "not-a-commit"}))
    assert state.resolved(repo, request, "s1") is None


def test_old_sessions_resolutions_are_pruned_when_a_new_session_writes(repo: RepoCache) -> None:
    request = SnapshotRequest.build("org/x")
    state.remember_resolution(repo, request, "old", COMMIT)
    state.remember_resolution(repo, request, "recent", COMMIT)
    old = repo.resolution_path("old", "main").parent
    past = time.time() - state.SESSION_MAX_AGE - 60
    os.utime(old, (past, past))
    state.remember_resolution(repo, request, "new", OTHER)
    assert not old.exists()
    assert state.resolved(repo, request, "recent") == COMMIT
    assert state.resolved(repo, request, "new") == OTHER


# --- refusals -----------------------------------------------------------------------------------


def test_a_refusal_is_kept_with_whether_a_token_was_set_never_the_token(repo: RepoCache) -> None:
    assert state.recalled_refusal(repo) is None
    state.remember_refusal(repo, reason="gated", message="org/x is gated", token_set=True)
    kept = state.recalled_refusal(repo)
    assert kept is not None
    assert {key: kept[key] for key in ("reason", "message", "token_set")} == {
        "reason": "gated",
        "message": "org/x is gated",
        "token_set": True,
    }
    assert set(kept) == {"reason", "message", "token_set", "at"}
    state.forget_refusal(repo)
    assert state.recalled_refusal(repo) is None
    state.forget_refusal(repo)  # nothing to forget: no error


def test_a_refusal_that_cannot_be_written_is_not_an_error(repo: RepoCache) -> None:
    own = layout.own_dir(repo.cache_dir)
    own.parent.mkdir(parents=True)
    own.write_text("a file where our folder should be")
    state.remember_refusal(repo, reason="gated", message="m", token_set=False)
    assert state.recalled_refusal(repo) is None


# --- the failure memory -------------------------------------------------------------------------


def test_a_failure_shared_by_one_process_is_recalled_by_another(tmp_path: Path) -> None:
    mine, theirs, other_session = state.FailureMemory("s1"), state.FailureMemory("s1"), state.FailureMemory("s2")
    mine.share(tmp_path, "key", {"action": "skip", "reason": "gated"})
    assert theirs.recall(tmp_path, "key") == {"action": "skip", "reason": "gated"}
    assert theirs.recall(tmp_path, "other-key") is None
    assert other_session.recall(tmp_path, "key") is None
    assert mine.folders == {str(layout.failure_memory_file(tmp_path, "s1", "key").parent)}


def test_the_controller_removes_the_folders_its_workers_wrote(tmp_path: Path) -> None:
    worker, controller = state.FailureMemory("s1"), state.FailureMemory("s1")
    worker.share(tmp_path / "cache-a", "key", {"action": "fail"})
    controller.share(tmp_path / "cache-b", "key", {"action": "fail"})
    controller.adopt(worker.folders)
    controller.remove()
    assert controller.recall(tmp_path / "cache-a", "key") is None
    assert controller.recall(tmp_path / "cache-b", "key") is None
    assert not layout.failure_memory_file(tmp_path / "cache-a", "s1", "key").parent.exists()


def test_a_failure_that_cannot_be_shared_is_kept_to_oneself(tmp_path: Path) -> None:
    (tmp_path / ".locks").write_text("a file where a folder should be")
    memory = state.FailureMemory("s1")
    memory.share(tmp_path, "key", {"action": "fail"})
    assert memory.recall(tmp_path, "key") is None and memory.folders == set()


# --- the lock holder ----------------------------------------------------------------------------


def test_the_holder_record_names_this_process_or_the_one_given(repo: RepoCache) -> None:
    assert state.read_holder(repo) == {}
    state.write_holder(repo, "kernel")
    holder = state.read_holder(repo)
    assert (holder["pid"], holder["host"], holder["mode"], holder["repo"]) == (
        os.getpid(),
        socket.gethostname(),
        "kernel",
        "model:org/x",
    )
    assert holder["since_iso"].endswith("Z") and abs(holder["since"] - time.time()) < 60
    state.write_holder(repo, "lease", pid=4242, host="ci-7")
    assert {k: state.read_holder(repo)[k] for k in ("pid", "host", "mode")} == {
        "pid": 4242,
        "host": "ci-7",
        "mode": "lease",
    }
