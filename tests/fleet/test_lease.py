"""CONTRACT §7, the lease lock: a cache shared read-write by hosts that die, pause and disagree.

Every holder and waiter is a child interpreter on a host of its own (``fleet-a``, ``fleet-b``:
``unshare -u``), all sharing the test's cache folder and the local Hub, with the lease lock forced
(``HFSNAPSHOT_LOCK_MODE=lease``, as where ``flock`` does not work across hosts) and a lease of
5 s. Time is read with ``time.time()`` in every process (one clock on one machine).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from reliability.conftest import Child, assert_snapshot_matches, incomplete_files, repo_files

from pytest_hfsnapshot import LockTimeoutError, materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import wait_until

REPO = "org/leased"
LEASE = 5.0
MODE_ENV = "HFSNAPSHOT_LOCK_MODE"
LEASE_ENV = "HFSNAPSHOT_LOCK_LEASE"
WEIGHT = f"/{REPO}/resolve/*/model.safetensors"
TREE = f"/api/models/{REPO}/tree/*"
#: A weight file that takes the holder about 16 s at the pace set below: it is mid-transfer when stopped.
WEIGHT_SIZE = 256 * 1024
SLOW = 16 * 1024

Children = Callable[..., Child]


@pytest.fixture
def lease(monkeypatch: pytest.MonkeyPatch) -> float:
    """The lease lock with a lease of 5 s, for this process and its children."""
    monkeypatch.setenv(MODE_ENV, "lease")
    monkeypatch.setenv(LEASE_ENV, f"{LEASE:g}")
    return LEASE


def _spec(commit: str, **kwargs: Any) -> dict[str, Any]:
    return {"action": "materialize", "repo_id": REPO, "kwargs": {"revision": commit, "lock_timeout": 120, **kwargs}}


def _took_over(result: dict[str, Any], since: float) -> float:
    """Seconds from ``since`` until the child held the lock."""
    return float(result["started"]) + float(result["lock_wait"]) - since


def _holding(hub: LocalHub, children: Children, prefix: list[str], commit: str, **env: str) -> Child:
    """A child on another host that holds the repo's lease while it slowly fetches the weight file."""
    hub.slow(SLOW)
    holder = children(_spec(commit), prefix=prefix, env={**os.environ, **env} if env else None)
    wait_until(lambda: hub.served(WEIGHT) > 0 or holder.proc.poll() is not None, "the holder fetches the weights")
    if holder.proc.poll() is not None:
        pytest.fail(f"the holder ended before it fetched the weight file: {holder.result()}")
    return holder


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_holder_killed_on_another_host_is_taken_over_within_one_and_a_half_leases(
    local_hub: LocalHub, children: Children, two_hosts: dict[str, list[str]], lease: float
) -> None:
    files = repo_files(40, weight_size=WEIGHT_SIZE)
    commit = local_hub.add_repo(REPO, files)
    holder = _holding(local_hub, children, two_hosts["fleet-a"], commit)
    waiter = children(_spec(commit), prefix=two_hosts["fleet-b"])
    assert waiter.expect("ready")[1] == "fleet-b"

    killed = time.time()
    holder.kill()
    local_hub.slow(None)
    result = waiter.result(timeout=60)

    assert result["ok"], result
    took_over = _took_over(result, killed)
    print(f"takeover after SIGKILL: {took_over:.2f}s (lease {lease:g}s)")
    assert took_over <= 1.5 * lease, f"took over {took_over:.2f}s after the kill (lease {lease:g}s)"
    assert result["source"] in ("download", "repair")
    assert_snapshot_matches(result["path"], files)
    assert incomplete_files(local_hub.cache_dir, REPO) == [], "the dead holder's partial download was left"
    # The new holder's snapshot verifies in full.
    snap = materialize(REPO, revision=commit, verify="sha256", lock_timeout=30)
    assert (str(snap.path), snap.source) == (result["path"], "cache")


def _paused_holder(hub: LocalHub, children: Children, prefix: list[str], commit: str) -> Child:
    """A holder on another host, about to be paused while the listing, its first request under the
    lock, still trickles in: it has fetched no file."""
    hub.slow(64)
    holder = children(_spec(commit), prefix=prefix)
    wait_until(lambda: hub.request_count(TREE) >= 1 or holder.proc.poll() is not None, "the holder lists")
    if holder.proc.poll() is not None:
        pytest.fail(f"the holder ended before it asked for the listing: {holder.result()}")
    return holder


def _assert_lost(lost: dict[str, Any], hub: LocalHub) -> None:
    assert not lost["ok"], f"the paused holder went on after losing its lease: {lost}"
    assert lost["error"] == "LockLostError" and "HfSnapshotError" in lost["kinds"], lost
    for part in (REPO, "fleet-b", str(hub.cache_dir)):
        assert part in lost["message"], f"{part!r} is not named in: {lost['message']}"


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_holder_paused_on_another_host_is_taken_over_and_raises_lock_lost_while_the_new_holder_works(
    local_hub: LocalHub, children: Children, two_hosts: dict[str, list[str]], lease: float
) -> None:
    files = repo_files(41, weight_size=WEIGHT_SIZE)
    commit = local_hub.add_repo(REPO, files)
    holder = _paused_holder(local_hub, children, two_hosts["fleet-a"], commit)
    waiter = children(_spec(commit), prefix=two_hosts["fleet-b"])
    waiter.expect("ready")

    os.kill(holder.pid, signal.SIGSTOP)
    paused = time.time()
    try:
        # The new holder's own listing trickles in too: it still holds the lease when the old one resumes.
        wait_until(lambda: local_hub.request_count(TREE) >= 2, "the new holder lists", timeout=1.5 * lease + 10)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    lost = holder.result(timeout=60)
    local_hub.slow(None)
    result = waiter.result(timeout=60)

    _assert_lost(lost, local_hub)
    assert result["ok"], result
    took_over = _took_over(result, paused)
    print(f"takeover after SIGSTOP: {took_over:.2f}s (lease {lease:g}s)")
    assert took_over <= 1.5 * lease, f"took over {took_over:.2f}s after the pause (lease {lease:g}s)"
    assert_snapshot_matches(result["path"], files)
    assert local_hub.served(WEIGHT) <= len(files["model.safetensors"]) * 1.01, "the weights were fetched twice"
    # The new holder's snapshot verifies in full.
    snap = materialize(REPO, revision=commit, verify="sha256", lock_timeout=30)
    assert (str(snap.path), snap.source) == (result["path"], "cache")


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_holder_paused_on_another_host_raises_lock_lost_after_the_new_holder_finished(
    local_hub: LocalHub, children: Children, two_hosts: dict[str, list[str]], lease: float
) -> None:
    files = repo_files(46, weight_size=WEIGHT_SIZE)
    commit = local_hub.add_repo(REPO, files)
    # The new holder makes a smaller snapshot (the JSON files): the paused one's stays incomplete.
    holder = _paused_holder(local_hub, children, two_hosts["fleet-a"], commit)
    waiter = children(_spec(commit, allow_patterns=["*.json"]), prefix=two_hosts["fleet-b"])
    waiter.expect("ready")

    os.kill(holder.pid, signal.SIGSTOP)
    paused = time.time()
    try:
        local_hub.slow(None)
        result = waiter.result(timeout=60)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    lost = holder.result(timeout=60)

    assert result["ok"], result
    took_over = _took_over(result, paused)
    print(f"takeover after SIGSTOP: {took_over:.2f}s (lease {lease:g}s)")
    assert took_over <= 1.5 * lease, f"took over {took_over:.2f}s after the pause (lease {lease:g}s)"
    _assert_lost(lost, local_hub)
    assert local_hub.served(WEIGHT) == 0, "a file transfer started after the lease was lost"
    # The new holder's snapshot verifies in full; the whole repo is made afterwards.
    json_files = {path: data for path, data in files.items() if path.endswith(".json")}
    small = materialize(REPO, revision=commit, allow_patterns=["*.json"], verify="sha256", lock_timeout=30)
    assert (str(small.path), small.source) == (result["path"], "cache")
    assert sorted(small.files) == sorted(json_files)
    full = materialize(REPO, revision=commit, verify="sha256", lock_timeout=30)
    assert_snapshot_matches(full.path, files)


def _named(value: float, message: str) -> bool:
    return re.search(rf"(?<![\d.]){value:g}(\.0+)?(?![\d.])", message) is not None


@pytest.mark.transports("xet")
def test_hosts_that_disagree_on_the_lease_get_an_error_naming_both_values(
    local_hub: LocalHub, children: Children, two_hosts: dict[str, list[str]], lease: float
) -> None:
    files = repo_files(42, weight_size=WEIGHT_SIZE)
    commit = local_hub.add_repo(REPO, files)
    holder = _holding(local_hub, children, two_hosts["fleet-a"], commit, **{LEASE_ENV: "7"})
    other = children(_spec(commit), prefix=two_hosts["fleet-b"], env={**os.environ, LEASE_ENV: "11"})

    refused = other.result(timeout=60)
    local_hub.slow(None)
    done = holder.result(timeout=60)

    assert not refused["ok"], f"a host with another lease length went ahead: {refused}"
    assert _named(7, refused["message"]) and _named(11, refused["message"]), refused["message"]
    assert refused["error"] != "LockTimeoutError" and refused["ended"] - refused["started"] < 60, refused
    assert done["ok"] and done["source"] == "download", f"the holder was taken over: {done}"
    assert_snapshot_matches(done["path"], files)


@pytest.mark.transports("xet")
def test_lock_timeout_names_the_holders_host_pid_and_lease(
    local_hub: LocalHub, children: Children, two_hosts: dict[str, list[str]], lease: float
) -> None:
    commit = local_hub.add_repo(REPO, repo_files(43, weight_size=WEIGHT_SIZE))
    holder = _holding(local_hub, children, two_hosts["fleet-a"], commit)

    started = time.monotonic()
    with pytest.raises(LockTimeoutError) as caught:
        materialize(REPO, revision=commit, lock_timeout=2)
    waited = time.monotonic() - started

    message = str(caught.value)
    assert "fleet-a" in message and re.search(rf"\b{holder.pid}\b", message), message
    assert "lease" in message.lower(), f"the message does not say when the lease runs out: {message}"
    assert 2 <= waited < lease, "a live holder's renewed lease was taken over, or the wait overran"


@pytest.mark.transports("xet")
def test_stale_lease_of_another_host_is_taken_over_once_it_ran_out(
    local_hub: LocalHub, half_written: Any, lease: float
) -> None:
    files = repo_files(44)
    commit = local_hub.add_repo(REPO, files)
    materialize(REPO, revision=commit)
    half_written.missing_file(REPO, "config.json", revision=commit)
    half_written.stale_lock(REPO, host="ci-runner-7")

    snap = materialize(REPO, revision=commit, lock_timeout=30)

    assert snap.lock_wait <= 1.5 * lease, f"waited {snap.lock_wait:.2f}s for a lease of {lease:g}s"
    assert snap.source == "repair"
    assert_snapshot_matches(snap.path, files)


@pytest.mark.transports("xet")
@pytest.mark.parametrize("how", ["flag", "ini", "env"])
def test_session_lease_from_flag_ini_or_env_must_match_the_holders(
    pytester: pytest.Pytester,
    local_hub: LocalHub,
    children: Children,
    two_hosts: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    monkeypatch.setenv(MODE_ENV, "lease")
    monkeypatch.delenv(LEASE_ENV, raising=False)
    commit = local_hub.add_repo(REPO, repo_files(45, weight_size=WEIGHT_SIZE))
    holder = _holding(local_hub, children, two_hosts["fleet-a"], commit, **{LEASE_ENV: "7"})
    pytester.makepyfile(f"def test_uses(hf_snapshots):\n    hf_snapshots({REPO!r}, revision={commit!r})\n")
    args = [f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider"]
    if how == "flag":
        args.append("--hf-lock-lease=11")
    elif how == "ini":
        pytester.makeini("[pytest]\nhf_lock_lease = 11\n")
    else:
        monkeypatch.setenv(LEASE_ENV, "11")

    result = pytester.runpytest_subprocess(*args)
    local_hub.slow(None)
    holder.result(timeout=60)

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert _named(7, output) and _named(11, output), output


@pytest.mark.transports("xet")
@pytest.mark.parametrize("value", ["4", "-1", "soon"])
def test_lease_below_five_seconds_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")

    result = pytester.runpytest_subprocess(f"--hf-lock-lease={value}", "-p", "no:cacheprovider")

    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert "--hf-lock-lease" in output and "unrecognized arguments" not in output, output


@pytest.mark.transports("xet")
def test_marker_left_empty_by_a_holder_killed_as_it_took_the_lease_is_taken_over(
    local_hub: LocalHub, lease: float
) -> None:
    # filelock creates the marker, then writes who holds it: a holder killed in between (seen in
    # tests/reliability/test_kill.py under load) leaves an empty marker that names no host.
    files = repo_files(47)
    commit = local_hub.add_repo(REPO, files)
    marker = RepoCache(local_hub.cache_dir, REPO, "model").soft_lock_path
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_bytes(b"")

    snap = materialize(REPO, revision=commit, lock_timeout=30)

    assert snap.lock_wait <= 1.5 * lease, f"waited {snap.lock_wait:.2f}s for an empty marker (lease {lease:g}s)"
    assert_snapshot_matches(snap.path, files)
