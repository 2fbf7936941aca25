"""The verification table of ``verify.check_file``: each cached state and the verdict it gets.

The states are laid out on disk as huggingface_hub lays them out (relative links from
``snapshots/`` to ``blobs/``, and for Xet files from ``blobs/`` into the shared store); what a
real client leaves is covered by the download and half-written suites.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from pytest_hfsnapshot.core.layout import RepoCache, store_file
from pytest_hfsnapshot.core.verify import ExpectedFile, check_file, content_hash, hash_mismatches, link_target

COMMIT = "c" * 40
DATA = b"weights" * 1000
SHA = hashlib.sha256(DATA).hexdigest()
XET = "ab" + "1" * 62


@pytest.fixture
def repo(tmp_path: Path) -> RepoCache:
    repo = RepoCache(tmp_path / "cache", "org/x", "model")
    repo.blobs.mkdir(parents=True)
    repo.snapshot_dir(COMMIT).mkdir(parents=True)
    return repo


def expected(**changes: object) -> ExpectedFile:
    fields: dict[str, object] = {"path": "model.safetensors", "size": len(DATA), "etag": SHA, "lfs": True}
    fields.update(changes)
    return ExpectedFile(**fields)  # type: ignore[arg-type]


def link_snapshot(repo: RepoCache, relpath: str = "model.safetensors", etag: str = SHA) -> Path:
    link = repo.link(COMMIT, relpath)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(link_target(relpath, etag))
    return link


def put_in_store(repo: RepoCache, data: bytes = DATA, xet: str = XET) -> Path:
    store = store_file(repo.cache_dir, xet)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(data)
    store.chmod(0o444)
    os.symlink(os.path.relpath(store, repo.blobs), repo.blob(SHA))
    return store


def verdict(repo: RepoCache, f: ExpectedFile | None = None) -> str | None:
    return check_file(repo, str(repo.snapshot_dir(COMMIT)), f or expected())


def test_regular_blob_of_the_listed_size(repo: RepoCache) -> None:
    repo.blob(SHA).write_bytes(DATA)
    link_snapshot(repo)
    assert verdict(repo) is None


def test_blob_of_another_size(repo: RepoCache) -> None:
    repo.blob(SHA).write_bytes(DATA[:10])
    link_snapshot(repo)
    assert verdict(repo) == f"size 10 instead of {len(DATA)}"


def test_missing_and_dangling(repo: RepoCache) -> None:
    assert verdict(repo) == "missing"
    link_snapshot(repo)
    assert verdict(repo) == "dangling link (blob missing)"


def test_link_to_another_blob(repo: RepoCache) -> None:
    repo.blob("d" * 64).write_bytes(DATA)
    link_snapshot(repo, etag="d" * 64)
    assert (verdict(repo) or "").startswith("link points at")


def test_nested_path_links_climb_one_more_level(repo: RepoCache) -> None:
    repo.blob(SHA).write_bytes(DATA)
    link = link_snapshot(repo, "sub/dir/model.safetensors")
    assert os.readlink(link) == "../../../../blobs/" + SHA
    assert verdict(repo, expected(path="sub/dir/model.safetensors")) is None


def test_plain_file_where_symlinks_are_missing_gets_the_size_check(repo: RepoCache) -> None:
    repo.link(COMMIT, "model.safetensors").write_bytes(DATA)
    assert verdict(repo) is None


def test_blob_linked_into_the_shared_store_is_checked_through(repo: RepoCache) -> None:
    put_in_store(repo)
    link_snapshot(repo)
    assert verdict(repo) is None
    assert verdict(repo, expected(xet=XET)) is None


def test_truncated_store_file(repo: RepoCache) -> None:
    store = put_in_store(repo, DATA[:100])
    link_snapshot(repo)
    assert verdict(repo) == f"size 100 instead of {len(DATA)}"
    assert store.exists()


def test_store_file_missing(repo: RepoCache) -> None:
    store = put_in_store(repo)
    store.unlink()
    link_snapshot(repo)
    assert verdict(repo) == "dangling link (store file missing)"


def test_link_to_another_store_file(repo: RepoCache) -> None:
    put_in_store(repo)
    link_snapshot(repo)
    assert (verdict(repo, expected(xet="ab" + "2" * 62)) or "").startswith("blob links to the store file")


@pytest.mark.parametrize(
    "target",
    [
        "/etc/passwd",  # absolute, out of the cache
        "../../../outside/" + XET,  # relative, out of the cache
        "../../blobs/zz/" + XET,  # not the store's prefix folder
        "../../blobs/ab/not-a-hash",  # not a store name
    ],
)
def test_other_links_out_of_the_repo_are_refused(repo: RepoCache, target: str) -> None:
    os.symlink(target, repo.blob(SHA))
    link_snapshot(repo)
    assert verdict(repo) == "blob is a link that does not lead into the shared blob store"


def test_a_store_reached_through_a_planted_link_is_refused(repo: RepoCache, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / XET[:2]).mkdir(parents=True)
    (elsewhere / XET[:2] / XET).write_bytes(DATA)
    (repo.cache_dir / "blobs").symlink_to(elsewhere)
    os.symlink(f"../../blobs/{XET[:2]}/{XET}", repo.blob(SHA))
    link_snapshot(repo)
    assert repo.store_target(SHA) is None
    assert verdict(repo) == "blob is a link that does not lead into the shared blob store"


def test_hashes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert content_hash(path, lfs=True) == SHA
    assert content_hash(path, lfs=False) == hashlib.sha1(b"blob %d\0" % len(DATA) + DATA).hexdigest()
    good = expected()
    bad = expected(path="other", etag="0" * 64)
    assert hash_mismatches([(good, path), (bad, path), (expected(path="gone"), tmp_path / "gone")]) == ["gone", "other"]


def test_record_entries_round_trip_and_reject_bad_names() -> None:
    f = expected(blob="e" * 40, xet=XET)
    assert ExpectedFile.from_json(f.to_json()) == f
    for raw in ([*f.to_json()[:4], "../x", ""], [*f.to_json()[:5], "not-hex"], f.to_json()[:4], "x"):
        with pytest.raises(ValueError):
            ExpectedFile.from_json(raw)
