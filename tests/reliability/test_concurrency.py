"""Several processes asking at once: one transfer per file, one snapshot, no cross-repo waiting."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import file_fetches, xet_in_use

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import (
    assert_each_file_crossed_once,
    assert_snapshot_matches,
    incomplete_files,
    repo_files,
    start_together,
)

pytestmark = pytest.mark.transports("xet", "xet-noshare", "http")


def test_four_processes_one_repo_empty_cache_fetch_each_file_once(
    local_hub: LocalHub, children: Any, tmp_path: Path
) -> None:
    files = repo_files(1)
    commit = local_hub.add_repo("org/shared", files)
    # Slow enough that all four are inside materialize while the first one downloads.
    local_hub.slow(256 * 1024)
    go = tmp_path / "go"
    kids = [children({"action": "materialize", "repo_id": "org/shared", "go": str(go)}) for _ in range(4)]
    start_together(kids, go)
    results = [kid.result() for kid in kids]

    assert all(r["ok"] for r in results), results
    assert {(r["path"], r["commit"], tuple(r["files"])) for r in results} == {
        (results[0]["path"], commit, tuple(sorted(files)))
    }
    assert_snapshot_matches(results[0]["path"], files)
    # One fetch per file for the four of them, whichever way the client fetched it.
    assert_each_file_crossed_once(local_hub, "org/shared", files)
    if not xet_in_use(local_hub):
        # Without Xet nothing but the files' bytes is served for them (no error bodies either).
        assert local_hub.served("*/resolve/*") == sum(len(d) for d in files.values())
    assert sorted(r["source"] for r in results) == ["cache", "cache", "cache", "download"]
    # The three that did not download waited for the one that did.
    downloader = next(r for r in results if r["source"] == "download")
    waits = sorted(r["lock_wait"] for r in results if r is not downloader)
    assert waits[-1] > 0.5 * downloader["seconds"], (waits, downloader["seconds"])
    assert incomplete_files(local_hub.cache_dir, "org/shared") == []


def test_two_repos_do_not_wait_for_each_other(local_hub: LocalHub, children: Any, tmp_path: Path) -> None:
    content = {name: repo_files(seed, weight_size=96 * 1024) for seed, name in enumerate(("org/left", "org/right"))}
    for name, files in content.items():
        local_hub.add_repo(name, files)
    # ~112 KiB per repo over one shared 224 KiB/s link: about one second per repo when both run together.
    local_hub.slow(224 * 1024)
    go = tmp_path / "go"
    kids = {
        (name, i): children({"action": "materialize", "repo_id": name, "go": str(go)})
        for name in content
        for i in range(2)
    }
    start_together(list(kids.values()), go)
    results = {key: kid.result() for key, kid in kids.items()}
    assert all(r["ok"] for r in results.values()), results

    by_repo = {name: [r for (n, _), r in results.items() if n == name] for name in content}
    downloaders = {}
    for name, outs in by_repo.items():
        assert_snapshot_matches(outs[0]["path"], content[name])
        assert sorted(r["source"] for r in outs) == ["cache", "download"], outs
        downloaders[name] = next(r for r in outs if r["source"] == "download")
    left, right = downloaders["org/left"], downloaders["org/right"]
    transfer = min(left["seconds"], right["seconds"])
    assert transfer > 0.5, f"the throttled transfer took only {transfer:.2f}s: the test proves nothing"
    # Serialized repos would make one downloader wait for the other's whole transfer.
    for r in (left, right):
        assert r["lock_wait"] < 0.25 * transfer, (r["lock_wait"], transfer)
    overlap = min(left["ended"], right["ended"]) - max(left["started"], right["started"])
    assert overlap > 0.5 * transfer, f"downloads overlapped {overlap:.2f}s of {transfer:.2f}s"


def test_cleanup_never_touches_a_download_in_flight(local_hub: LocalHub, children: Any) -> None:
    # A plain huggingface_hub download (no repo lock of ours) is writing a blob while materialize,
    # which removes orphaned *.incomplete files of the repo, runs for another selection.
    files = repo_files(3, weight_size=64 * 1024)
    commit = local_hub.add_repo("org/busy", files)
    local_hub.slow(32 * 1024)
    size = len(files["model.safetensors"])
    downloader = children({"action": "hf_download", "repo_id": "org/busy", "filename": "model.safetensors"})
    deadline = time.monotonic() + 20
    while local_hub.served("*/model.safetensors") < 8 * 1024:
        assert time.monotonic() < deadline, "the plain download never started"
        time.sleep(0.01)
    in_flight = incomplete_files(local_hub.cache_dir, "org/busy")
    assert in_flight

    snap = materialize("org/busy", allow_patterns=["*.json"], lock_timeout=5)

    assert local_hub.served("*/model.safetensors") < size, "the download ended before materialize: proves nothing"
    assert incomplete_files(local_hub.cache_dir, "org/busy") == in_flight
    assert_snapshot_matches(snap.path, {p: d for p, d in files.items() if p.endswith(".json")})
    assert downloader.result()["ok"]
    local_hub.slow(None)
    full = materialize("org/busy", lock_timeout=5, verify="sha256")
    assert full.commit == commit
    assert_snapshot_matches(full.path, files)
    assert file_fetches(local_hub, "*/model.safetensors") == 1
    assert incomplete_files(local_hub.cache_dir, "org/busy") == []
