"""The per-repo lock under killed, live and foreign holders, with the kernel lock and the lease."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot import LockLostError, LockTimeoutError, materialize
from pytest_hfsnapshot.core.cache import watch
from pytest_hfsnapshot.core.cache.layout import RepoCache, atomic_write_json
from pytest_hfsnapshot.core.cache.locking import MODE_ENV, RepoLock
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import (
    OTHER_HOST,
    Child,
    assert_each_file_crossed_once,
    assert_snapshot_matches,
    repo_files,
    start_together,
)

REPO = "org/locked"


@pytest.fixture(params=["kernel", "lease"])
def lock_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both mechanisms, forced for this process and its children."""
    monkeypatch.setenv(MODE_ENV, request.param)
    return str(request.param)


def _hold_lock(children: Any, cache_dir: Path, expect_mode: str, **kwargs: Any) -> Child:
    holder: Child = children({"action": "lock", "repo_id": REPO, "cache_dir": str(cache_dir)}, **kwargs)
    assert holder.expect("locked") == [expect_mode]
    return holder


def test_killed_holder_frees_the_lock_at_once(local_hub: LocalHub, children: Any, lock_mode: str) -> None:
    files = repo_files(30)
    local_hub.add_repo(REPO, files)
    holder = _hold_lock(children, local_hub.cache_dir, lock_mode)
    holder.kill()
    if lock_mode == "lease":
        assert RepoCache(local_hub.cache_dir, REPO, "model").soft_lock_path.exists(), "no marker left to take over"

    snap = materialize(REPO, lock_timeout=5)

    assert snap.lock_wait < 1.0, f"waited {snap.lock_wait:.2f}s for a dead holder ({lock_mode} lock)"
    assert_snapshot_matches(snap.path, files)


def test_live_holder_times_out_naming_pid_and_host(local_hub: LocalHub, children: Any, lock_mode: str) -> None:
    local_hub.add_repo(REPO, repo_files(31))
    holder = _hold_lock(children, local_hub.cache_dir, lock_mode)

    started = time.monotonic()
    with pytest.raises(LockTimeoutError) as caught:
        materialize(REPO, lock_timeout=1)
    waited = time.monotonic() - started

    message = str(caught.value)
    assert f"pid {holder.pid}" in message and socket.gethostname() in message, message
    assert caught.value.holder.get("pid") == holder.pid
    assert (caught.value.setting, caught.value.limit) == ("lock_timeout", 1)
    assert 1.0 <= waited < 5.0
    assert local_hub.requests == [], "went to the Hub without the lock"


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_lease_end_to_end(local_hub: LocalHub, children: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(MODE_ENV, "lease")
    files = repo_files(32)
    local_hub.add_repo(REPO, files)
    local_hub.slow(128 * 1024)
    go = tmp_path / "go"
    kids = [children({"action": "materialize", "repo_id": REPO, "go": str(go)}) for _ in range(3)]
    start_together(kids, go)
    results = [kid.result() for kid in kids]

    assert all(r["ok"] for r in results), results
    assert len({r["path"] for r in results}) == 1
    assert sorted(r["source"] for r in results) == ["cache", "cache", "download"]
    assert_snapshot_matches(results[0]["path"], files)
    assert_each_file_crossed_once(local_hub, REPO, files)
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    assert not repo.lock_path.exists(), "the kernel lock file was used in lease mode"
    assert not repo.soft_lock_path.exists(), "the lease marker outlived its holders"


@pytest.mark.parametrize("alive", [True, False], ids=["alive", "killed"])
def test_lease_of_another_host_is_waited_for_then_reported(
    local_hub: LocalHub, children: Any, other_host: list[str], monkeypatch: Any, alive: bool
) -> None:
    monkeypatch.setenv(MODE_ENV, "lease")
    local_hub.add_repo(REPO, repo_files(33))
    holder: Child = children(
        {"action": "lock", "repo_id": REPO, "cache_dir": str(local_hub.cache_dir)}, prefix=other_host
    )
    pid, host = holder.expect("ready")
    assert host == OTHER_HOST
    assert holder.expect("locked") == ["lease"]
    if not alive:
        # A pid on another host cannot be checked: its lease (60s) stands until it runs out.
        holder.kill()

    started = time.monotonic()
    with pytest.raises(LockTimeoutError) as caught:
        materialize(REPO, lock_timeout=1.5)
    waited = time.monotonic() - started

    message = str(caught.value)
    assert OTHER_HOST in message and f"pid {pid}" in message, message
    assert 1.5 <= waited < 6.0
    assert local_hub.requests == [], "went to the Hub without the lock"


class _Waiter:
    """A RepoLock waiter on its own thread whose ``done`` counts its calls and answers once
    ``answer`` exists."""

    def __init__(self, repo: RepoCache, answer: Path, **kwargs: Any) -> None:
        self.answer = answer
        self.calls = 0
        self.asked = threading.Event()
        self.lock: RepoLock[str] | None = None
        self.thread = threading.Thread(target=self._wait, args=(repo, kwargs), daemon=True)
        self.thread.start()

    def _done(self) -> str | None:
        self.calls += 1
        self.asked.set()
        return "recorded" if self.answer.exists() else None

    def _wait(self, repo: RepoCache, kwargs: dict[str, Any]) -> None:
        with RepoLock(repo, timeout=120, log_every=120, done=self._done, **kwargs) as lock:
            self.lock = lock


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_waiter_sleeps_until_the_record_is_written(local_hub: LocalHub, children: Any, monkeypatch: Any) -> None:
    # Seven waiters waking every few ms to look for the record slowed the process doing the work.
    monkeypatch.setenv(MODE_ENV, "kernel")
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    _hold_lock(children, local_hub.cache_dir, "kernel")
    answer = repo.records_dir / "awaited.json"
    # No try of the lock and no log line is due for two minutes: only a write can wake it.
    waiter = _Waiter(repo, answer, watch=repo.records_dir, try_every=120)
    assert waiter.asked.wait(30), "the waiter never looked"
    threading.Event().wait(0.3)
    assert waiter.calls == 1, f"woken {waiter.calls - 1} times while nothing was written"

    atomic_write_json(answer, {"done": True})
    waiter.thread.join(30)

    assert not waiter.thread.is_alive(), "the record's write did not wake the waiter"
    assert waiter.lock is not None and waiter.lock.early == "recorded"
    assert waiter.calls <= 3  # the first look, and at most one per file of the atomic write


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_holder_that_lets_go_without_a_record_wakes_its_waiters(
    local_hub: LocalHub, children: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    # A holder of another selection, or one that failed, writes no record its waiters look for.
    monkeypatch.setenv(MODE_ENV, "kernel")
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    release = tmp_path / "release"
    holder: Child = children(
        {"action": "lock", "repo_id": REPO, "cache_dir": str(local_hub.cache_dir), "release_when": str(release)}
    )
    assert holder.expect("locked") == ["kernel"]
    # No try is due for two minutes: only the holder's wake can end the wait.
    waiter = _Waiter(repo, repo.records_dir / "never.json", watch=repo.records_dir, try_every=120)
    assert waiter.asked.wait(30), "the waiter never looked"

    release.touch()
    holder.expect("released")
    waiter.thread.join(30)

    assert not waiter.thread.is_alive(), "the holder let go and its waiter slept on"
    assert waiter.lock is not None and waiter.lock.early is None, "the waiter returned without the lock"


def test_without_inotify_a_waiter_polls(local_hub: LocalHub, children: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv(MODE_ENV, "kernel")
    monkeypatch.setattr(watch, "_LIBC", None)
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    _hold_lock(children, local_hub.cache_dir, "kernel")
    answer = repo.records_dir / "awaited.json"
    waiter = _Waiter(repo, answer, watch=repo.records_dir, try_every=120, poll_every=0.01)
    assert waiter.asked.wait(30), "the waiter never looked"

    atomic_write_json(answer, {"done": True})
    waiter.thread.join(30)

    assert not waiter.thread.is_alive(), "the polling waiter did not find the record"
    assert waiter.lock is not None and waiter.lock.early == "recorded"


def _held_lease(local_hub: LocalHub, monkeypatch: Any) -> tuple[RepoCache, RepoLock[None]]:
    """A lease on REPO taken in this process (entered: leave it with ``__exit__``)."""
    monkeypatch.setenv(MODE_ENV, "lease")
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    lock: RepoLock[None] = RepoLock(repo, timeout=30, lease=30)
    lock.__enter__()
    return repo, lock


def test_a_lost_lease_stays_lost_and_is_logged_once(
    local_hub: LocalHub, monkeypatch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # Once one thread has learned of the loss, no check passes again: not even when a marker with
    # this process's token is back (newer filelock puts back a marker it swapped aside).
    repo, lock = _held_lease(local_hub, monkeypatch)
    try:
        marker = repo.soft_lock_path.read_bytes()
        repo.soft_lock_path.unlink()
        with pytest.raises(LockLostError):
            lock.ensure_held()
        repo.soft_lock_path.write_bytes(marker)

        for _ in range(3):
            with pytest.raises(LockLostError) as caught:
                lock.ensure_held()
        assert "its marker is gone" in str(caught.value), caught.value
        said = [r for r in caplog.records if "lost the lock on" in r.getMessage()]
        assert len(said) == 1, [r.getMessage() for r in said]
    finally:
        lock.__exit__(None, None, None)


def test_a_step_let_start_by_a_check_comes_before_a_loss_another_thread_learns(
    local_hub: LocalHub, monkeypatch: Any
) -> None:
    # A transfer thread checks the lease, then says which file it starts: a paused process resumed
    # after a takeover must not say so after another of its threads has said that the lock is lost.
    repo, lock = _held_lease(local_hub, monkeypatch)
    entered, go_on = threading.Event(), threading.Event()
    order: list[str] = []

    def starting() -> None:
        entered.set()
        assert go_on.wait(30)
        order.append("started")

    def other() -> None:
        try:
            lock.ensure_held()
        except LockLostError:
            order.append("lost")

    try:
        first = threading.Thread(target=lock.ensure_held, kwargs={"then": starting})
        first.start()
        assert entered.wait(30), "the check never let the step start"
        repo.soft_lock_path.unlink()  # lost while the first thread is between its check and its step
        second = threading.Thread(target=other)
        second.start()
        second.join(0.5)
        blocked = second.is_alive()
        go_on.set()
        first.join(30)
        second.join(30)
    finally:
        go_on.set()
        lock.__exit__(None, None, None)

    assert blocked, "another thread learned of the loss while a step the check let start was starting"
    assert order == ["started", "lost"], order
