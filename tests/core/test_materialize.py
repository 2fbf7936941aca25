"""The core engine against the local Hub: what it fetches, what it trusts, what it reports."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import file_byte_bodies, file_fetches

from pytest_hfsnapshot import (
    AuthError,
    InvalidRequestError,
    OfflineMissingError,
    RevisionNotFoundError,
    Snapshot,
    TransientError,
    UnverifiedRevisionError,
    VerificationError,
    materialize,
)
from pytest_hfsnapshot.core.cache.layout import own_dir
from pytest_hfsnapshot.testing.hub import LocalHub

WEIGHTS = bytes(range(256)) * 64  # 16 KiB, LFS by name
FILES = {
    "config.json": '{"model_type": "bert"}',
    "tokenizer_config.json": "{}",
    "model.safetensors": WEIGHTS,
    "nested/vocab.txt": "a\nb\nc\n",
}


@pytest.fixture
def repo(local_hub: LocalHub) -> str:
    return local_hub.add_repo("org/tiny", FILES)


def file_gets(hub: LocalHub) -> int:
    return file_fetches(hub, "*/resolve/*")


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_cold_download_is_verified_and_complete(local_hub: LocalHub, repo: str) -> None:
    snap = materialize("org/tiny")

    assert isinstance(snap, Snapshot)
    assert snap.commit == repo
    assert snap.source == "download"
    assert snap.files == tuple(sorted(FILES))
    assert snap.size == sum(len(v.encode() if isinstance(v, str) else v) for v in FILES.values())
    assert (snap / "model.safetensors").read_bytes() == WEIGHTS
    assert os.fspath(snap) == str(snap) == str(snap.path)
    assert snap.path == local_hub.cache_dir / "models--org--tiny" / "snapshots" / repo
    assert file_gets(local_hub) == len(FILES)
    assert local_hub.request_count("*/revision/*") == 1
    assert local_hub.request_count("*/tree/*") == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_warm_pinned_call_makes_no_request(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny", revision=repo)
    local_hub.reset_counters()

    snap = materialize("org/tiny", revision=repo)

    assert snap.source == "cache"
    assert local_hub.requests == []


def test_branch_is_resolved_once_per_process_without_session(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny")
    materialize("org/tiny")
    materialize("org/tiny")

    assert local_hub.request_count("*/revision/*") == 1


def test_branch_resolution_is_shared_by_a_session_across_processes(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny", session="s1")
    code = (
        "from pytest_hfsnapshot import materialize;s = materialize('org/tiny', session='s1');print(s.commit, s.source)"
    )
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == [repo, "cache"]

    assert local_hub.request_count("*/revision/*") == 1
    # A new session asks the Hub again and follows the branch to its new commit.
    newer = local_hub.add_repo("org/tiny", {**FILES, "config.json": "{}"})
    assert materialize("org/tiny", session="s2").commit == newer


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_metadata_only_then_full_fetches_only_the_rest(local_hub: LocalHub, repo: str) -> None:
    meta = materialize("org/tiny", metadata_only=True)
    assert "model.safetensors" not in meta.files
    assert file_fetches(local_hub, "*model.safetensors") == 0
    before = file_gets(local_hub)

    full = materialize("org/tiny")

    assert full.files == tuple(sorted(FILES))
    assert file_gets(local_hub) - before == 1
    assert file_fetches(local_hub, "*model.safetensors") == 1


def test_patterns_select_files(local_hub: LocalHub, repo: str) -> None:
    snap = materialize("org/tiny", allow_patterns=["*.json"], ignore_patterns="tokenizer*")
    assert snap.files == ("config.json",)
    assert not (snap / "model.safetensors").exists()


def test_patterns_matching_nothing_is_a_clear_error(local_hub: LocalHub, repo: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"No file of org/tiny@main.*\*\.gguf"):
        materialize("org/tiny", allow_patterns=["*.gguf"])
    assert file_gets(local_hub) == 0


def test_full_snapshot_without_metadata_marker_is_refused(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/bare", {"weights.bin": b"123"})
    with pytest.raises(VerificationError, match="metadata"):
        materialize("org/bare")
    assert materialize("org/bare", allow_patterns="*.bin").files == ("weights.bin",)


def test_dataset_readme_counts_as_marker(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/data", {"README.md": "# data", "train.csv": "a,b\n"}, repo_type="dataset")
    snap = materialize("org/data", repo_type="dataset")
    assert snap.repo_type == "dataset"
    assert "datasets--org--data" in str(snap)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"repo_id": "not a repo"}, "Invalid repo id"),
        ({"repo_id": "a/b/c"}, "Invalid repo id"),
        ({"repo_id": "org/x", "repo_type": "kernel"}, "Unknown repo_type"),
        ({"repo_id": "org/x", "revision": "../main"}, "Invalid revision"),
        ({"repo_id": "org/x", "revision": ""}, "Invalid revision"),
        ({"repo_id": "org/x", "allow_patterns": []}, "allow_patterns .* empty"),
        ({"repo_id": "org/x", "ignore_patterns": [3]}, "ignore_patterns"),
        ({"repo_id": "org/x", "verify": "md5"}, "verify"),
        ({"repo_id": "org/x", "retries": -1}, "retries"),
        ({"repo_id": "org/x", "lock_timeout": 0}, "lock_timeout"),
    ],
)
def test_bad_input_is_rejected_before_any_request(local_hub: LocalHub, kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        materialize(**kwargs)
    assert local_hub.requests == []


def test_unknown_revision(local_hub: LocalHub, repo: str) -> None:
    with pytest.raises(RevisionNotFoundError, match="nope"):
        materialize("org/tiny", revision="nope")


@pytest.mark.parametrize(
    ("repo_kwargs", "reason"),
    [({"gated": True}, "gated"), ({"private": True}, "not_found_or_private")],
)
def test_auth_failures_are_typed_and_not_retried(local_hub: LocalHub, repo_kwargs: dict, reason: str) -> None:
    local_hub.add_repo("org/locked", FILES, **repo_kwargs)
    with pytest.raises(AuthError) as info:
        materialize("org/locked", retries=3)
    assert info.value.reason == reason
    assert "HF_TOKEN" in str(info.value)
    assert local_hub.token not in str(info.value)
    failing = [(m, p) for m, p, status in local_hub.requests if status in (401, 403)]
    assert failing
    assert len(failing) == len(set(failing))  # never asked twice: auth failures are not retried

    snap = materialize("org/locked", token=local_hub.token)
    assert snap.source == "download"


def test_missing_repo_is_an_auth_outcome(local_hub: LocalHub) -> None:
    with pytest.raises(AuthError) as info:
        materialize("org/does-not-exist")
    assert info.value.reason == "not_found_or_private"


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_transient_failures_are_retried(local_hub: LocalHub, repo: str) -> None:
    local_hub.fail("*/revision/*", 503, times=2)
    local_hub.fail("*model.safetensors", 500, times=2)
    snap = materialize("org/tiny", retries=4)
    assert snap.commit == repo
    assert local_hub.request_count("*/revision/*", status=503) == 2


def test_transient_failures_beyond_budget_name_repo_and_attempts(local_hub: LocalHub, repo: str) -> None:
    local_hub.fail("*/revision/*", 503, times=10)
    with pytest.raises(TransientError, match=r"org/tiny@main.*after 2 attempts") as info:
        materialize("org/tiny", retries=1)
    assert info.value.attempts == 2
    assert local_hub.request_count("*/revision/*") == 2


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_corruption_in_transit_is_caught_by_hash_and_refetched(local_hub: LocalHub, repo: str) -> None:
    local_hub.corrupt("*model.safetensors", times=1)
    snap = materialize("org/tiny", retries=2)
    assert hashlib.sha256((snap / "model.safetensors").read_bytes()).hexdigest() == hashlib.sha256(WEIGHTS).hexdigest()
    # Fetched again by the engine: hf_xet keeps a flipped xorb byte, as plain HTTP keeps a flipped body byte.
    assert file_fetches(local_hub, "*model.safetensors") == file_byte_bodies(local_hub, "*model.safetensors") == 2


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_truncated_cache_file_is_repaired_alone(local_hub: LocalHub, repo: str) -> None:
    snap = materialize("org/tiny", revision=repo)
    blob = Path(os.path.realpath(snap / "model.safetensors"))
    with open(blob, "r+b") as handle:
        handle.truncate(10)
    local_hub.reset_counters()

    again = materialize("org/tiny", revision=repo)

    assert again.source == "repair"
    assert again.repaired == ("model.safetensors",)
    assert (again / "model.safetensors").read_bytes() == WEIGHTS
    assert file_fetches(local_hub, f"/org/tiny/resolve/{repo}/model.safetensors") == 1
    assert file_fetches(local_hub, "*/resolve/*") == 1, "nothing else is fetched"


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_same_size_corruption_needs_sha256(local_hub: LocalHub, repo: str) -> None:
    snap = materialize("org/tiny", revision=repo)
    blob = Path(os.path.realpath(snap / "model.safetensors"))
    data = bytearray(blob.read_bytes())
    data[5] ^= 0xFF
    blob.write_bytes(bytes(data))

    assert materialize("org/tiny", revision=repo).source == "cache"
    fixed = materialize("org/tiny", revision=repo, verify="sha256")
    assert fixed.source == "repair"
    assert (fixed / "model.safetensors").read_bytes() == WEIGHTS


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_offline_serves_a_complete_cache_and_names_what_is_missing(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny", allow_patterns="*.json")
    local_hub.reset_counters()

    snap = materialize("org/tiny", allow_patterns="*.json", offline=True)
    assert snap.commit == repo
    with pytest.raises(OfflineMissingError, match=r"model\.safetensors") as info:
        materialize("org/tiny", offline=True)
    assert "model.safetensors" in info.value.missing
    with pytest.raises(OfflineMissingError, match="refs/v9"):
        materialize("org/tiny", revision="v9", offline=True)
    assert local_hub.requests == []


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_offline_trusts_a_plain_client_cache_after_checking_it(local_hub: LocalHub, repo: str) -> None:
    from huggingface_hub import snapshot_download

    snapshot_download("org/tiny")
    local_hub.reset_counters()
    snap = materialize("org/tiny", offline=True)
    assert snap.source == "cache"
    assert local_hub.requests == []


def test_unreachable_hub_serves_cached_branch_flagged(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny")
    local_hub.reset_counters()
    local_hub.fail("*/revision/*", 503, times=10)

    snap = materialize("org/tiny", session="other", retries=1)
    assert snap.unverified_revision
    assert snap.commit == repo
    with pytest.raises(UnverifiedRevisionError, match="hf-strict"):
        materialize("org/tiny", session="third", retries=1, strict=True)


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_record_is_not_trusted_when_a_file_vanishes(local_hub: LocalHub, repo: str) -> None:
    snap = materialize("org/tiny", revision=repo)
    (snap / "nested" / "vocab.txt").unlink()
    local_hub.reset_counters()

    again = materialize("org/tiny", revision=repo)
    assert (again / "nested" / "vocab.txt").read_text() == FILES["nested/vocab.txt"]
    assert again.source == "repair"
    assert local_hub.request_count(method="GET") == 0  # the blob was still there: only the link is remade


def test_record_file_is_ours_and_deterministic(local_hub: LocalHub, repo: str) -> None:
    materialize("org/tiny", revision=repo)
    records = list((own_dir(local_hub.cache_dir) / "records" / "models--org--tiny").glob("*.json"))
    assert len(records) == 1
    data = json.loads(records[0].read_text())
    assert data["commit"] == repo
    assert sorted(f[0] for f in data["files"]) == sorted(FILES)


def test_unknown_file_in_listing_is_entry_not_found_not_retried(local_hub: LocalHub, repo: str) -> None:
    local_hub.fail("*config.json", 404, times=5, error_code="EntryNotFound")
    with pytest.raises(Exception) as info:
        materialize("org/tiny", retries=3)
    assert type(info.value).__name__ in ("EntryNotFoundError", "AuthError")
    assert local_hub.request_count("*config.json") <= 2


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_planted_folder_link_is_removed_never_followed(local_hub: LocalHub, repo: str, tmp_path: Path) -> None:
    snap = materialize("org/tiny", revision=repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "vocab.txt").write_text("precious")
    nested = snap.path / "nested"
    for child in nested.iterdir():
        child.unlink()
    nested.rmdir()
    nested.symlink_to(outside, target_is_directory=True)

    again = materialize("org/tiny", revision=repo)

    assert again.source == "repair"
    assert not nested.is_symlink()
    assert (again / "nested" / "vocab.txt").read_text() == FILES["nested/vocab.txt"]
    assert (outside / "vocab.txt").read_text() == "precious"


def test_unwritable_cache_is_a_clear_error_but_a_verified_cache_still_serves(
    local_hub: LocalHub, repo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_hfsnapshot import DiskError
    from pytest_hfsnapshot.core.cache import locking

    materialize("org/tiny", revision=repo)

    def refuse(self: object) -> None:
        raise PermissionError(13, "Permission denied", str(local_hub.cache_dir))

    monkeypatch.setattr(locking.RepoLock, "__enter__", refuse)
    assert materialize("org/tiny", revision=repo).source == "cache"  # no lock, no write needed
    with pytest.raises(DiskError, match=r"^Permission denied \(EACCES\) while writing .*--hf-cache-dir"):
        materialize("org/tiny", revision="main")


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_interrupted_download_is_a_repair_that_names_the_file(local_hub: LocalHub, repo: str) -> None:
    from pytest_hfsnapshot.testing import half_written

    materialize("org/tiny", revision=repo)
    half_written.interrupted_download(local_hub.cache_dir, "org/tiny", revision=repo)

    snap = materialize("org/tiny", revision=repo)

    assert snap.source == "repair"
    assert snap.repaired == ("model.safetensors",)
    assert not list((local_hub.cache_dir / "models--org--tiny" / "blobs").glob("*.incomplete"))


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_orphans_of_unselected_files_are_cleaned_too(local_hub: LocalHub, repo: str) -> None:
    from pytest_hfsnapshot.testing import half_written

    materialize("org/tiny", revision=repo)
    half_written.orphan_incomplete(local_hub.cache_dir, "org/tiny", "model.safetensors", revision=repo)
    local_hub.reset_counters()

    snap = materialize("org/tiny", revision=repo, allow_patterns="*.json")

    assert snap.source == "repair"
    assert not list((local_hub.cache_dir / "models--org--tiny" / "blobs").glob("*.incomplete"))
    assert local_hub.requests == []


def test_offline_after_a_refusal_is_the_same_auth_outcome(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/gated", FILES, gated=True)
    with pytest.raises(AuthError) as online:
        materialize("org/gated")
    assert local_hub.url in str(online.value)  # the conditions page of the Hub in use

    with pytest.raises(AuthError) as offline:
        materialize("org/gated", offline=True)
    assert offline.value.reason == "gated"
    assert "offline" in str(offline.value)

    materialize("org/gated", token=local_hub.token)  # access granted: the refusal is forgotten
    with pytest.raises(OfflineMissingError):
        materialize("org/gated", revision="v9", offline=True)


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_server_with_other_etags_for_small_files_still_verifies(
    local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Hub's ETag of a small file is its git blob sha1, which is also the listing's oid; a
    # server that sends another ETag (here an md5) makes the client name the blob differently.
    from pytest_hfsnapshot.testing._repos import Blob

    def md5_etag(blob: Blob) -> str:
        return blob.sha256 or hashlib.md5(blob.data).hexdigest()

    monkeypatch.setattr(Blob, "etag", property(md5_etag))
    commit = local_hub.add_repo("org/tiny", FILES)

    snap = materialize("org/tiny")
    assert snap.source == "download"
    assert (snap / "config.json").read_text() == FILES["config.json"]
    local_hub.reset_counters()
    assert materialize("org/tiny", revision=commit).source == "cache"
    assert materialize("org/tiny", revision=commit, verify="sha256").source == "cache"
    assert local_hub.requests == []
