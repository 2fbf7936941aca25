"""The lease lock of a cache shared by several hosts: takeover after a holder dies or pauses.

Every host here is a real process: ``unshare -u`` gives a child another hostname (the
``other_host`` prefix), so filelock cannot probe its pid and only the lease tells whether it is
alive. The lease is 5 s (the shortest allowed), so a takeover is due within 7.5 s of a death.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import filelock
import pytest
from huggingface_hub import HfApi

from pytest_hfsnapshot import InvalidRequestError, LockTimeoutError, materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache, store_file
from pytest_hfsnapshot.core.cache.locking import MODE_ENV
from pytest_hfsnapshot.core.cache.state import read_holder
from pytest_hfsnapshot.core.engine import listing
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.settings import LOCK_LEASE_ENV
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import OTHER_HOST, Child, assert_snapshot_matches, incomplete_files

REPO = "org/fleet"
LEASE = 5.0
#: Bytes per second of each body: a 64 KiB shard takes two seconds.
RATE = 32 * 1024


@pytest.fixture
def lease(monkeypatch: pytest.MonkeyPatch) -> float:
    """The lease lock with a 5 s lease, for this process and its children."""
    monkeypatch.setenv(MODE_ENV, "lease")
    monkeypatch.setenv(LOCK_LEASE_ENV, str(LEASE))
    return LEASE


def shards(seed: int, count: int) -> dict[str, bytes]:
    """A config and ``count`` weight shards of 64 KiB (LFS, so Xet-backed where the Hub is)."""
    rng = random.Random(seed)
    files = {"config.json": json.dumps({"seed": seed}).encode()}
    files.update({f"model-{i:02d}.safetensors": rng.randbytes(64 * 1024) for i in range(count)})
    return files


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout}s")
        time.sleep(0.01)


def stderr_of(child: Child) -> list[str]:
    """The lines a child wrote to stderr, once it has exited."""
    child.proc.wait(30)
    wait_until(lambda: child.stderr, 10, "the child's stderr was not read")
    return child.stderr.splitlines()


#: A log record of a child (``%(created).6f hfsnapshot: ...``), found wherever it starts: a progress
#: bar's carriage returns can put it in the middle of a line (HF_HUB_DISABLE_PROGRESS_BARS unset).
_RECORD = re.compile(r"(\d+\.\d{6}) (hfsnapshot: [^\r\n\x1b]*)")


def log_records(child: Child) -> list[str]:
    """The child's log records (stamp first), in the order they were made, once it has exited."""
    found = _RECORD.findall("\n".join(stderr_of(child)))
    return [f"{stamp} {text}" for stamp, text in sorted(found, key=lambda record: float(record[0]))]


def took_over_after(waiter: dict[str, Any], since: float) -> float:
    """Seconds from ``since`` (epoch) until the waiter got the lock."""
    assert waiter["started"] < since, "the waiter only started waiting after the holder was gone"
    return float(waiter["started"] + waiter["lock_wait"] - since)


def assert_verified_in_full(files: dict[str, bytes], path: str) -> None:
    """The snapshot at ``path`` holds the Hub's bytes, and a sha256 check of every file agrees."""
    assert_snapshot_matches(path, files)
    snap = materialize(REPO, verify="sha256", lock_timeout=10)
    assert (str(snap.path), snap.source) == (path, "cache")


def start_waiter(children: Any, go: Path | None = None, *, select: Any = None, **spec: Any) -> Child:
    """A child on this host that materializes ``REPO`` (once ``go`` exists, when given; only the
    files ``select`` allows, when given)."""
    kwargs = {"lock_timeout": 60, **({"allow_patterns": select} if select else {})}
    waiter: Child = children({"action": "materialize", "repo_id": REPO, "kwargs": kwargs, "go": go and str(go), **spec})
    return waiter


def holder_then_waiter(
    children: Any, prefix: list[str], repo: RepoCache, go: Path, *, select: Any = None, **spec: Any
) -> tuple[Child, Child]:
    """A child on another host that takes the lock and transfers, and one on this host already
    waiting for it (its imports done before, so that it waits from the start of the transfers)."""
    waiter = start_waiter(children, go, select=select, **spec)
    holder: Child = children(
        {"action": "materialize", "repo_id": REPO, "kwargs": {"lock_timeout": 60}, **spec}, prefix=prefix
    )
    waiter.expect("ready")
    wait_until(lambda: read_holder(repo).get("host") == OTHER_HOST, 30, "the holder took no lock")
    go.touch()
    waiter.expect("started")
    wait_until(lambda: incomplete_files(repo.cache_dir, REPO), 30, "the holder started no transfer")
    return holder, waiter


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_holder_killed_on_another_host_is_taken_over_within_the_lease(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float, tmp_path: Path
) -> None:
    files = shards(1, 6)
    local_hub.add_repo(REPO, files)
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    local_hub.slow_each(RATE)
    holder, waiter = holder_then_waiter(children, other_host, repo, tmp_path / "go")

    killed_at = time.time()
    holder.kill()
    local_hub.slow_each(None)
    out = waiter.result(timeout=60)

    assert out["ok"], out
    takeover = took_over_after(out, killed_at)
    print(f"takeover {takeover:.2f}s after the kill (lease {lease:g}s)")
    # Renewed at most a third of a lease before it died, never taken before the lease ran out.
    assert lease * 2 / 3 - 0.5 <= takeover <= 1.5 * lease
    assert incomplete_files(local_hub.cache_dir, REPO) == []
    assert_verified_in_full(files, out["path"])
    said = f"took over the lock on {REPO} from pid {holder.pid} on host {OTHER_HOST}, whose 5s lease ran out"
    assert [line for line in stderr_of(waiter) if said in line], waiter.stderr


class Paused:
    """A holder on another host, paused (SIGSTOP) in the middle of its transfers while a waiter on
    this host takes its lease over; ``resume()`` lets it go on (SIGCONT)."""

    def __init__(
        self,
        hub: LocalHub,
        children: Any,
        prefix: list[str],
        go: Path,
        files: dict[str, bytes],
        *,
        select: Any = None,
        **spec: Any,
    ) -> None:
        hub.add_repo(REPO, files)
        self.hub, self.files = hub, files
        self.repo = RepoCache(hub.cache_dir, REPO, "model")
        hub.slow_each(RATE)
        self.holder, self.waiter = holder_then_waiter(children, prefix, self.repo, go, select=select, log=True, **spec)
        self.stopped_at = time.time()
        os.kill(self.holder.pid, signal.SIGSTOP)
        wait_until(lambda: read_holder(self.repo).get("pid") == self.waiter.pid, 3 * LEASE, "no takeover")
        self.resumed_at = 0.0

    def resume(self) -> dict[str, Any]:
        """SIGCONT the paused holder; its outcome."""
        self.resumed_at = time.time()
        os.kill(self.holder.pid, signal.SIGCONT)
        return self.holder.result(timeout=60)

    def new_holders(self, out: dict[str, Any]) -> None:
        """The waiter's snapshot: taken over within 1.5 leases of the pause, verified in full."""
        assert out["ok"], out
        takeover = took_over_after(out, self.stopped_at)
        print(f"takeover {takeover:.2f}s after the pause (lease {LEASE:g}s)")
        assert LEASE * 2 / 3 - 0.5 <= takeover <= 1.5 * LEASE
        assert_verified_in_full(self.files, out["path"])

    def fetched_nothing_after_it_knew(self) -> set[str]:
        """The paused holder's log: it learned of the loss, and started no transfer after that.
        Returns the files whose transfer it had started."""
        # In the order the lines were made, which is the order of the checks: a thread makes its
        # "fetching" line under its lease check, so no other thread's check (and "lost") comes in
        # between, even where the process was paused there. Threads write their records to stderr
        # in another order.
        log = log_records(self.holder)
        learned = [i for i, line in enumerate(log) if "lost the lock on" in line]
        assert learned, log
        assert not [line for line in log[learned[0] :] if "hfsnapshot: fetching" in line], log
        started = {line.split("fetching ", 1)[1].split(" of ", 1)[0] for line in log if "hfsnapshot: fetching" in line}
        assert started < set(self.files), log
        return started


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_paused_holder_loses_its_lease_and_writes_nothing_more(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float, tmp_path: Path
) -> None:
    # Resumed as soon as the waiter took over: the waiter still has most files to fetch (and waits,
    # within the lock timeout, for the client's locks the paused holder keeps on its transfers).
    paused = Paused(local_hub, children, other_host, tmp_path / "go", shards(2, 20))
    lost = paused.resume()
    local_hub.slow_each(None)
    out = paused.waiter.result(timeout=60)

    paused.new_holders(out)
    paused.fetched_nothing_after_it_knew()
    assert not lost["ok"] and "LockLostError" in lost["kinds"], lost
    message = lost["message"]
    print(message)
    for part in (repr(REPO), str(paused.repo.soft_lock_path), f"host {socket.gethostname()} (pid {paused.waiter.pid})"):
        assert part in message, message


# Without flock the client's locks of the paused holder are markers, which the new holder drops
# with the lease it took over (the shared store cannot be locked at all there: see below).
@pytest.mark.transports("xet-noshare", "http")
def test_a_paused_holder_resumed_after_the_new_holder_finished_hands_out_its_snapshot(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float, tmp_path: Path
) -> None:
    no_flock = str(local_hub.cache_dir)
    paused = Paused(local_hub, children, other_host, tmp_path / "go", shards(3, 20), no_flock_under=no_flock)
    local_hub.slow_each(None)
    out = paused.waiter.result(timeout=60)
    (record,) = (paused.repo.own_dir / "records" / paused.repo.folder_name).glob("*.json")
    recorded = record.stat()
    served = paused.resume()

    assert served["ok"] and served["path"] == out["path"], served
    assert (record.stat().st_ino, record.stat().st_mtime_ns) == (recorded.st_ino, recorded.st_mtime_ns)
    # Every request after the resume went on with a transfer it had started before the pause.
    local_hub.wait_idle()
    records = local_hub.counters().records
    after = {
        p
        for p in paused.files
        if any(r.at >= paused.resumed_at and r.matches(f"/{REPO}/resolve/*/{p}") for r in records)
    }
    started = paused.fetched_nothing_after_it_knew()
    assert after <= started, f"transfers started after the resume: {sorted(after - started)}"
    paused.new_holders(out)


@pytest.mark.transports("xet-noshare", "http")
def test_a_paused_holder_resumed_after_the_new_holder_released_names_it(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float, tmp_path: Path
) -> None:
    # The new holder wants the config only: once it is done and gone, the paused holder's snapshot
    # is not complete, and its lease's marker is gone too; the holder record still names who took it.
    no_flock = str(local_hub.cache_dir)
    files = shards(7, 20)
    paused = Paused(
        local_hub, children, other_host, tmp_path / "go", files, select=["config.json"], no_flock_under=no_flock
    )
    out = paused.waiter.result(timeout=60)
    assert out["ok"] and out["files"] == ["config.json"], out
    assert not paused.repo.soft_lock_path.exists()
    lost = paused.resume()
    local_hub.slow_each(None)

    assert not lost["ok"] and "LockLostError" in lost["kinds"], lost
    message = lost["message"]
    print(message)
    who = f"host {socket.gethostname()} (pid {paused.waiter.pid}) took it over (and has released it since)"
    for part in (repr(REPO), str(paused.repo.soft_lock_path), who):
        assert part in message, message
    paused.fetched_nothing_after_it_knew()


@pytest.mark.transports("xet")
def test_hosts_that_disagree_on_the_lease_get_an_error_naming_both(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float
) -> None:
    local_hub.add_repo(REPO, shards(3, 1))
    holder: Child = children(
        {"action": "lock", "repo_id": REPO, "cache_dir": str(local_hub.cache_dir)}, prefix=other_host
    )
    pid = int(holder.expect("ready")[0])
    assert holder.expect("locked") == ["lease"]

    started = time.monotonic()
    with pytest.raises(InvalidRequestError) as caught:
        materialize(REPO, lock_lease=7, lock_timeout=30)

    message = str(caught.value)
    print(message)
    assert time.monotonic() - started < 5, "waited instead of saying the leases differ"
    for part in (f"pid {pid} on host {OTHER_HOST}", "a lease of 5s", "this process uses 7s", "HFSNAPSHOT_LOCK_LEASE=5"):
        assert part in message, message
    assert local_hub.requests == [], "went to the Hub without the lock"


@pytest.mark.transports("xet")
def test_the_lock_timeout_names_the_holder_and_when_its_lease_runs_out(
    local_hub: LocalHub, children: Any, other_host: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MODE_ENV, "lease")  # the default lease, 60 s
    local_hub.add_repo(REPO, shards(4, 1))
    holder: Child = children(
        {"action": "lock", "repo_id": REPO, "cache_dir": str(local_hub.cache_dir)}, prefix=other_host
    )
    pid = int(holder.expect("ready")[0])
    assert holder.expect("locked") == ["lease"]

    with pytest.raises(LockTimeoutError) as caught:
        materialize(REPO, lock_timeout=1)
    now = time.time()

    message = str(caught.value)
    print(message)
    assert f"pid {pid} on host {OTHER_HOST}" in message, message
    found = re.search(r"its lease runs out at (\S+Z) unless renewed again", message)
    assert found is not None, message
    runs_out = datetime.strptime(found.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    # Renewed every 20 s: its lease runs out 40 to 60 s from now (to the second).
    assert now + 40 - 2 <= runs_out <= now + 60 + 1, message
    assert caught.value.holder.get("pid") == pid


@pytest.mark.transports("xet")
def test_a_soft_lock_of_an_older_release_on_another_host_is_named_for_removal(
    local_hub: LocalHub, lease: float
) -> None:
    local_hub.add_repo(REPO, shards(6, 1))
    repo = RepoCache(local_hub.cache_dir, REPO, "model")
    repo.make_folders(repo.soft_lock_path.parent)
    repo.soft_lock_path.write_text("4242\nci-old\n")  # filelock's SoftFileLock marker, no lease

    with pytest.raises(LockTimeoutError) as caught:
        materialize(REPO, lock_timeout=1)
    message = str(caught.value)
    assert "pid 4242 on host ci-old" in message and "remove the marker by hand" in message, message
    assert str(repo.soft_lock_path) in message, message
    assert repo.soft_lock_path.read_text() == "4242\nci-old\n"


@pytest.mark.transports("xet")
@pytest.mark.parametrize("value", [4, float("inf")])
def test_a_lease_below_five_seconds_is_refused(
    local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch, value: float
) -> None:
    with pytest.raises(InvalidRequestError, match=re.escape(f"lock_lease={value!r} is not valid")):
        materialize(REPO, lock_lease=value)
    monkeypatch.setenv(LOCK_LEASE_ENV, str(value))
    with pytest.raises(InvalidRequestError, match=re.escape(f"HFSNAPSHOT_LOCK_LEASE={str(value)!r} is not valid")):
        materialize(REPO)


# --- huggingface_hub's own locks where flock fails ---------------------------------------------


def client_lock_markers(repo: RepoCache, commit: str) -> tuple[list[Path], list[Path]]:
    """Where huggingface_hub locks each file of ``repo`` without flock: its per-blob marker, and the
    marker of its shared-store entry. Leaves the listing in the cache, as a holder that listed the
    repo before it started transferring does."""
    request = SnapshotRequest.from_keywords(repo.repo_id, {"revision": commit}, form="materialize()")
    raw = listing.fetch(HfApi(), request, commit)
    repo.listings.write(commit, raw)
    files = listing.parse(repo, raw).values()
    blobs = [repo.blob_lock(f.etag) for f in files]
    stores = [repo.store.soft_lock(store_file(repo.cache_dir, f.xet)) for f in files if f.xet]
    for path in (*blobs, *stores):
        path.parent.mkdir(parents=True, exist_ok=True)
    return blobs, stores


#: From filelock 4 a marker of another host is never broken; 3.x's fallback from flock removes
#: whatever marker it finds where it locks (so it is never blocked, nor ever excluded).
FOREIGN_MARKERS_BLOCK = int(filelock.__version__.split(".")[0]) >= 4


# The shared blob store cannot be locked at all where flock fails under filelock 4 (the client
# makes its empty lock file first, which filelock then takes for a marker it may never break), so
# the transports here are the two that keep blobs in the repo.
@pytest.mark.transports("xet-noshare", "http")
def test_client_lock_markers_a_dead_host_left_do_not_block_the_next_holder(
    local_hub: LocalHub, children: Any, other_host: list[str], lease: float
) -> None:
    files = shards(5, 2)
    commit = local_hub.add_repo(REPO, files)
    cache = local_hub.cache_dir
    repo, neighbour = RepoCache(cache, REPO, "model"), RepoCache(cache, "org/neighbour", "model")
    blobs, stores = client_lock_markers(repo, commit)
    assert len(stores) == 2, "the weights are Xet files: each has a shared-store entry"
    (theirs_elsewhere,), _ = client_lock_markers(
        neighbour, local_hub.add_repo(neighbour.repo_id, {"config.json": "{}"})
    )
    third_host = repo.blob_lock("f" * 64)  # this repo, another host
    third_host.write_text("4242\nci-runner-9\n")
    no_flock = {"no_flock_under": str(cache)}
    # One marker as a holder stopped between creating it and writing its record into it leaves.
    unwritten, written = blobs[0], [*blobs[1:], *stores]
    unwritten.touch()
    os.utime(unwritten, (time.time() - 3600, time.time() - 3600))

    # A holder on another host takes the lease and the client's locks, as it does while it
    # transfers on a filesystem without flock, and dies.
    holder: Child = children(
        {
            "action": "lock",
            "repo_id": REPO,
            "cache_dir": str(cache),
            "markers": [str(p) for p in (*written, theirs_elsewhere)],
            **no_flock,
        },
        prefix=other_host,
    )
    assert holder.expect("locked") == ["lease"]
    holder.kill()
    assert all(f"\n{OTHER_HOST}\n" in p.read_text() for p in (*written, theirs_elsewhere))

    # The next holder takes the lease over and removes what that host left of this repo, only that.
    waiter = start_waiter(children, **no_flock)
    waiter.expect("started")
    out = waiter.result(timeout=60)
    log = stderr_of(waiter)
    assert out["ok"], out
    assert_snapshot_matches(out["path"], files)
    assert not [p for p in (*blobs, *stores) if p.exists()], log
    assert f"\n{OTHER_HOST}\n" in theirs_elsewhere.read_text()
    assert third_host.read_text() == "4242\nci-runner-9\n"
    took_over = [line for line in log if "took over the lock" in line]
    assert len(took_over) == 1 and f"on host {OTHER_HOST}, whose 5s lease ran out" in took_over[0], took_over
    assert f"removed {len(blobs) + len(stores)} huggingface_hub lock marker(s)" in took_over[0], took_over

    # What such a marker does to the client alone (the neighbour repo's, which the rule left).
    alone: Child = children(
        {"action": "hf_download", "repo_id": neighbour.repo_id, "filename": "config.json", **no_flock}
    )
    alone.expect("ready")
    if FOREIGN_MARKERS_BLOCK:
        with pytest.raises(pytest.fail.Exception, match="gave no result within"):
            alone.result(timeout=3)
        assert f"\n{OTHER_HOST}\n" in theirs_elsewhere.read_text()
    else:
        assert alone.result()["ok"] and not theirs_elsewhere.exists()
