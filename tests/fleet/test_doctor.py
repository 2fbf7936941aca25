"""CONTRACT §10 on a fleet's storage: `pytest-hfsnapshot doctor --layer` reads a layer as §7 does (a
prefetched cache on a read-only bind mount, or uploaded with ``rclone copy`` and mounted from moto's S3
server, links or not) and writes nothing anywhere; and a live holder in another process is never disturbed
by ``--repair`` or ``--prune-unused``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from reliability.conftest import repo_files, tree_digest

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.doctor.scan import NOW_ENV
from pytest_hfsnapshot.testing import half_written
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import Mount

REPO = "org/layered"
OTHER = "org/second"
ALL = pytest.mark.transports("xet", "xet-noshare", "http")
LINKS = pytest.mark.parametrize("links", [True, False], ids=["rclone-links", "rclone-no-links"])

Prefetched = Callable[..., Path]
S3Layer = Callable[..., Mount]


def doctor(*args: str, prefix: Sequence[str] = (), env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """``pytest-hfsnapshot doctor ARGS --json`` in a child process (behind ``prefix``): exit code and document."""
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "pytest_hfsnapshot", "doctor", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert done.stdout.startswith("{"), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def kinds(document: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(p["kind"], p["repo"], p["path"]) for p in document["problems"]}


@ALL
def test_a_layer_on_a_read_only_bind_mount_is_checked_and_nothing_is_written(
    local_hub: LocalHub,
    prefetched: Prefetched,
    read_only_bind: Callable[..., tuple[list[str], Path]],
    tmp_path: Path,
) -> None:
    local_hub.add_repo(REPO, repo_files(80))
    local_hub.add_repo(OTHER, repo_files(81))
    baked = prefetched(REPO, OTHER)
    half_written.corrupted_blob(baked, OTHER, "model.safetensors")
    before = tree_digest(baked)
    prefix, layer = read_only_bind(baked, hostname="fleet-image")
    writable = tmp_path / "runner-cache"

    code, sizes = doctor("--layer", str(layer), prefix=prefix, env={"HF_HUB_CACHE": str(writable)})
    assert code == 0, sizes
    assert (sizes["summary"]["snapshots"], sizes["summary"]["files"]) == (2, 6)
    code, hashed = doctor("--layer", str(layer), "--sha256", prefix=prefix, env={"HF_HUB_CACHE": str(writable)})

    assert code == 1
    assert kinds(hashed) == {("wrong-hash", OTHER, "model.safetensors")}
    assert hashed["summary"]["hashed_bytes"] == hashed["summary"]["bytes"] > 0
    assert tree_digest(baked) == before, "the doctor wrote into the layer"
    assert not writable.exists(), "the doctor wrote into HF_HUB_CACHE"
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "pytest_hfsnapshot", "doctor", "--layer", str(layer), "--repair"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "--repair and --prune-unused need --cache-dir" in done.stderr, done.stderr


@ALL
@LINKS
def test_a_layer_through_an_rclone_mount_is_read_by_records_and_blob_names(
    local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer, links: bool, tmp_path: Path
) -> None:
    local_hub.add_repo(REPO, repo_files(82))
    local_hub.add_repo(OTHER, repo_files(83))
    cache = prefetched(REPO, OTHER)
    half_written.truncated_blob(cache, OTHER, "model.safetensors")
    mount = s3_layer(cache, links=links)
    writable = tmp_path / "runner-cache"

    code, document = doctor("--layer", str(mount.layer), "--sha256", env={"HF_HUB_CACHE": str(writable)})

    assert code == 1, document
    assert kinds(document) == {("wrong-size", OTHER, "model.safetensors")}
    summary = document["summary"]
    assert (summary["layer"], summary["snapshots"], summary["files"], summary["unverifiable"]) == (True, 2, 6, 0)
    assert summary["hashed_bytes"] == summary["bytes"] > 0
    assert not writable.exists(), "the doctor wrote into HF_HUB_CACHE"


#: A check in a process of its own: its exit code, then what it loaded that a check of a cache the plugin
#: recorded does not need.
CHECK_ALONE = """
import sys
from pytest_hfsnapshot.cli import main
code = main(["doctor", "--cache-dir", sys.argv[1]])
heavy = ("huggingface_hub.hf_api", "huggingface_hub.file_download", "filelock", "httpx", "httpx2")
print(code, sorted(name for name in heavy if name in sys.modules))
"""


@ALL
def test_a_check_reads_the_cache_as_it_is_on_disk_without_the_clients_http_stack(local_hub: LocalHub) -> None:
    assert local_hub.cache_dir is not None
    commit = local_hub.add_repo("org/plain", repo_files(31))
    materialize("org/plain")
    repo = RepoCache.of_folder(local_hub.cache_dir, "models--org--plain")
    assert repo is not None and repo.root == RepoCache(local_hub.cache_dir, "org/plain", "model").root
    assert RepoCache.of_folder(local_hub.cache_dir, "blobs") is None
    assert repo.listings.read_file(commit) == repo.listings.read(commit) != {}

    done = subprocess.run(
        [sys.executable, "-c", CHECK_ALONE, str(local_hub.cache_dir)], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "0 []", done.stdout + done.stderr


#: A process at work in the cache: it holds the plugin's repo lock, huggingface_hub's lock of one blob
#: while it writes that blob's ``.incomplete`` file, and a lock marker of another blob not locked before
#: (as the client locks blobs where flock fails); it lets go once the file ``release`` exists.
HOLDER = r"""
import os, sys, time
from filelock import FileLock, SoftFileLock
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.cache.locking import RepoLock
cache, repo_id, etag, marker_etag, release = sys.argv[1:6]
repo = RepoCache(cache, repo_id, "model")
with RepoLock(repo, timeout=30):
    os.makedirs(repo.client_locks, exist_ok=True)
    with FileLock(str(repo.blob_lock(etag)), timeout=10), SoftFileLock(str(repo.blob_lock(marker_etag)), timeout=10):
        with open(repo.incomplete.path(etag, "0a1b2c3d"), "wb") as partial:
            partial.write(b"x" * 1000)
            partial.flush()
            print("holding", flush=True)
            deadline = time.monotonic() + 120
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.01)
"""

#: A process that died holding a blob's lock marker (its pid names nobody once it has exited).
DEAD_MARKER = r"""
import os, sys
from filelock import SoftFileLock
held = SoftFileLock(sys.argv[1], is_singleton=False)
held.acquire(timeout=0)
os._exit(0)
"""


@ALL
def test_a_live_holder_in_another_process_is_never_disturbed(local_hub: LocalHub, tmp_path: Path) -> None:
    assert local_hub.cache_dir is not None
    cache = local_hub.cache_dir
    commit = local_hub.add_repo(REPO, repo_files(84))
    materialize(REPO)
    repo = RepoCache(cache, REPO, "model")
    listing = repo.listings.read(commit) or {}
    weights = str(listing["model.safetensors"].get("lfs_sha256") or listing["model.safetensors"]["blob_id"])
    marked = "e" * 40
    dead = repo.blob_lock("f" * 40)
    subprocess.run([sys.executable, "-c", DEAD_MARKER, str(dead)], check=True, timeout=60)
    release = tmp_path / "release"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(cache), REPO, weights, marked, str(release)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        partial = repo.incomplete.path(weights, "0a1b2c3d")
        later = {NOW_ENV: str(time.time() + 2 * 86400)}

        code, document = doctor("--repair", "--prune-unused", "1", env=later)

        assert holder.poll() is None, "the doctor stopped the holder"
        assert kinds(document) == {("stale-lock", REPO, f".locks/models--org--layered/{'f' * 40}.lock")}
        assert document["summary"]["in_flight"] == 1
        actions = {(a["action"], a["detail"].split(":")[0].split(" (")[0]) for a in document["actions"]}
        assert ("removed", f".locks/models--org--layered/{'f' * 40}.lock") in actions
        assert any(a["action"] == "skipped" and "lock is held by pid" in a["detail"] for a in document["actions"])
        assert partial.read_bytes() == b"x" * 1000, "the download in flight was touched"
        assert repo.blob_lock(marked).read_text().strip(), "the live holder's marker was removed"
        assert repo.snapshot_dir(commit).is_dir(), "a snapshot whose repo lock is held was pruned"
        assert code == 0, document
    finally:
        release.touch()
        holder.wait(timeout=60)

    partial.unlink()  # the holder's download would have been renamed into place or removed
    code, document = doctor("--prune-unused", "1", env=later)
    assert code == 0 and not repo.snapshot_dir(commit).exists(), document
