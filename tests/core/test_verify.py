"""The verification table of ``verify.check_file`` and of its warm-path shortcut ``all_fine``: each
cached state and the problem it gets.

Most states are laid out on disk as huggingface_hub lays them out (relative links from
``snapshots/`` to ``blobs/``, and for Xet files from ``blobs/`` into the shared store); the last
tests take a cache a real client filled and damage it with ``half_written``. What ``materialize``
then does is covered by the download and half-written suites.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
from pathlib import Path

import pytest
from huggingface_hub import snapshot_download

from pytest_hfsnapshot.core.cache.layout import RepoCache, store_file
from pytest_hfsnapshot.core.cache.repair import Repairer
from pytest_hfsnapshot.core.cache.verify import (
    CHUNK,
    Entry,
    ExpectedFile,
    Problem,
    ProblemKind,
    all_fine,
    check_file,
    content_hash,
    hash_mismatches,
    hash_problem,
    link_target,
    read_buffer,
)
from pytest_hfsnapshot.core.engine import listing
from pytest_hfsnapshot.testing import half_written
from pytest_hfsnapshot.testing.hub import LocalHub

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


def verdict(repo: RepoCache, f: ExpectedFile | None = None) -> Problem | None:
    f = f or expected()
    snapshot_dir = str(repo.snapshot_dir(COMMIT))
    problem = check_file(repo, snapshot_dir, f)
    # The warm path's shortcut (all_fine) must agree with the whole check on every state of the table.
    assert all_fine(repo, snapshot_dir, [f]) is (problem is None)
    return problem


def kind_and_words(repo: RepoCache, f: ExpectedFile | None = None) -> tuple[ProblemKind, str]:
    problem = verdict(repo, f)
    assert problem is not None
    assert problem.path == (f or expected()).path
    return problem.kind, problem.describe()


def test_regular_blob_of_the_listed_size(repo: RepoCache) -> None:
    repo.blob(SHA).write_bytes(DATA)
    link_snapshot(repo)
    assert verdict(repo) is None


def test_blob_of_another_size(repo: RepoCache) -> None:
    repo.blob(SHA).write_bytes(DATA[:10])
    link_snapshot(repo)
    assert kind_and_words(repo) == (ProblemKind.WRONG_SIZE, f"size 10 instead of {len(DATA)}")


def test_missing_and_dangling(repo: RepoCache) -> None:
    assert kind_and_words(repo) == (ProblemKind.MISSING, "missing")
    link_snapshot(repo)
    assert kind_and_words(repo) == (ProblemKind.DANGLING_LINK, "dangling link (blob missing)")
    assert verdict(repo) == Problem(ProblemKind.DANGLING_LINK, "model.safetensors", Entry.BLOB)


def test_link_to_another_blob(repo: RepoCache) -> None:
    repo.blob("d" * 64).write_bytes(DATA)
    link_snapshot(repo, etag="d" * 64)
    target = link_target("model.safetensors", "d" * 64)
    assert kind_and_words(repo) == (ProblemKind.OTHER_BLOB, f"link points at {target!r} instead of blobs/{SHA}")


@pytest.mark.parametrize("target", ["/etc/hostname", "../../refs/main", "../../../models--org--y/blobs/" + SHA])
def test_link_out_of_the_blobs_folder(repo: RepoCache, target: str) -> None:
    repo.link(COMMIT, "model.safetensors").symlink_to(target)
    assert kind_and_words(repo) == (ProblemKind.LINK_OUTSIDE, f"link points at {target!r} instead of blobs/{SHA}")


def test_something_else_than_a_file(repo: RepoCache) -> None:
    repo.blob(SHA).mkdir()
    link_snapshot(repo)
    assert kind_and_words(repo) == (ProblemKind.NOT_REGULAR, "not a regular file")


def test_unreadable_entries_name_where_and_why(repo: RepoCache) -> None:
    # A plain file where a folder must be: every lstat below it fails with ENOTDIR, not ENOENT.
    nested = expected(path="sub/model.safetensors")
    repo.link(COMMIT, "sub").write_bytes(b"")
    assert kind_and_words(repo, nested) == (ProblemKind.UNREADABLE, "unreadable (Not a directory)")

    link_snapshot(repo)
    repo.blobs.rmdir()
    repo.blobs.write_bytes(b"")
    assert kind_and_words(repo) == (ProblemKind.UNREADABLE, "unreadable blob (Not a directory)")


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
    assert kind_and_words(repo) == (ProblemKind.WRONG_SIZE, f"size 100 instead of {len(DATA)}")
    assert store.exists()


def test_store_file_missing(repo: RepoCache) -> None:
    store = put_in_store(repo)
    store.unlink()
    link_snapshot(repo)
    assert kind_and_words(repo) == (ProblemKind.DANGLING_LINK, "dangling link (store file missing)")


def test_unreadable_store_file(repo: RepoCache) -> None:
    store = put_in_store(repo)
    store.unlink()
    store.parent.rmdir()
    store.parent.write_bytes(b"")
    link_snapshot(repo)
    assert kind_and_words(repo) == (ProblemKind.UNREADABLE, "unreadable store file (Not a directory)")


def test_link_to_another_store_file(repo: RepoCache) -> None:
    put_in_store(repo)
    link_snapshot(repo)
    other = "ab" + "2" * 62
    assert kind_and_words(repo, expected(xet=other)) == (
        ProblemKind.OTHER_STORE_FILE,
        f"blob links to the store file {XET[:12]} instead of {other[:12]}",
    )


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
    assert kind_and_words(repo) == (
        ProblemKind.BLOB_LINK_OUTSIDE,
        "blob is a link that does not lead into the shared blob store or a cache layer",
    )


def test_a_store_reached_through_a_planted_link_is_refused(repo: RepoCache, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / XET[:2]).mkdir(parents=True)
    (elsewhere / XET[:2] / XET).write_bytes(DATA)
    (repo.cache_dir / "blobs").symlink_to(elsewhere)
    os.symlink(f"../../blobs/{XET[:2]}/{XET}", repo.blob(SHA))
    link_snapshot(repo)
    assert repo.store.target(SHA) is None
    assert verdict(repo) == Problem(
        ProblemKind.BLOB_LINK_OUTSIDE, "model.safetensors", Entry.BLOB, found=f"../../blobs/{XET[:2]}/{XET}"
    )


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


# --- the one way out of the cache: a blob linking to a read-only layer's copy ------------------------


@pytest.fixture
def layer(tmp_path: Path) -> Path:
    """A layer holding the file as a repo blob and as a store file (rclone may leave either)."""
    root = tmp_path / "layer"
    blob = RepoCache(root, "org/x", "model").blob(SHA)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(DATA)
    store = store_file(root, XET)
    store.parent.mkdir(parents=True)
    store.write_bytes(DATA)
    return root


@pytest.mark.parametrize("where", ["blob", "store"])
def test_a_blob_linking_to_a_configured_layer_copy_is_fine(repo: RepoCache, layer: Path, where: str) -> None:
    target = RepoCache(layer, "org/x", "model").blob(SHA) if where == "blob" else store_file(layer, XET)
    os.symlink(target, repo.blob(SHA))
    link_snapshot(repo)
    f = expected(xet=XET)

    assert check_file(repo, str(repo.snapshot_dir(COMMIT)), f, [layer]) is None
    # In a session without that layer the same link is damage, and so is a file of another layer.
    assert check_file(repo, str(repo.snapshot_dir(COMMIT)), f) == Problem(
        ProblemKind.BLOB_LINK_OUTSIDE, f.path, Entry.BLOB, found=str(target)
    )
    assert check_file(repo, str(repo.snapshot_dir(COMMIT)), f, [layer.parent / "other"]) is not None


def test_a_blob_linking_to_another_file_of_a_layer_is_refused(repo: RepoCache, layer: Path) -> None:
    other = layer / "models--org--x" / "blobs" / ("e" * 64)
    other.write_bytes(DATA)
    os.symlink(other, repo.blob(SHA))
    link_snapshot(repo)

    problem = check_file(repo, str(repo.snapshot_dir(COMMIT)), expected(xet=XET), [layer])
    assert problem is not None and problem.kind is ProblemKind.BLOB_LINK_OUTSIDE


def test_a_layer_copy_gets_the_checks_of_any_file(repo: RepoCache, layer: Path) -> None:
    target = RepoCache(layer, "org/x", "model").blob(SHA)
    os.symlink(target, repo.blob(SHA))
    link_snapshot(repo)

    def layered() -> tuple[ProblemKind, str]:
        problem = check_file(repo, str(repo.snapshot_dir(COMMIT)), expected(), [layer])
        assert problem is not None and problem.at is Entry.LAYER
        return problem.kind, problem.describe()

    os.truncate(target, 10)
    assert layered() == (ProblemKind.WRONG_SIZE, f"size 10 instead of {len(DATA)}")
    target.unlink()
    target.mkdir()
    assert layered() == (ProblemKind.NOT_REGULAR, "not a regular file")
    target.rmdir()
    assert layered() == (ProblemKind.DANGLING_LINK, "dangling link (layer file missing)")


def test_repairing_a_link_into_a_layer_never_touches_the_layer(repo: RepoCache, layer: Path) -> None:
    target = RepoCache(layer, "org/x", "model").blob(SHA)
    os.truncate(target, 10)
    os.symlink(target, repo.blob(SHA))
    link = link_snapshot(repo)
    problem = check_file(repo, str(repo.snapshot_dir(COMMIT)), expected(), [layer])
    assert problem is not None and problem.blob_damaged

    Repairer(repo, "org/x@main", lock_timeout=5).remove(COMMIT, expected(), problem)

    assert not os.path.lexists(link) and not os.path.lexists(repo.blob(SHA))
    assert target.stat().st_size == 10


def test_an_unfinished_download_names_its_file() -> None:
    problem = Problem(ProblemKind.INCOMPLETE_LEFT, "config.json", found="e" * 40 + ".0123abcd.incomplete")
    assert problem.describe() == f"an unfinished download {'e' * 40}.0123abcd.incomplete lies beside its blob"


def test_hash_problems_name_the_hash_that_failed() -> None:
    assert hash_problem(expected()).describe() == "sha256 mismatch"
    small = expected(path="config.json", etag="e" * 40, lfs=False)
    assert hash_problem(small) == Problem(ProblemKind.WRONG_HASH, "config.json", wanted="git-sha1")
    assert hash_problem(small).describe() == "git-sha1 mismatch"


@pytest.mark.parametrize(
    ("problem", "blob_goes"),
    [
        (Problem(ProblemKind.MISSING, "model.safetensors"), False),
        (Problem(ProblemKind.OTHER_BLOB, "model.safetensors", found="x", wanted=SHA), False),
        (Problem(ProblemKind.LINK_OUTSIDE, "model.safetensors", found="/x", wanted=SHA), False),
        (Problem(ProblemKind.WRONG_SIZE, "model.safetensors", found="3", wanted="4"), True),
        (hash_problem(expected()), True),
    ],
)
def test_repair_removes_the_blob_exactly_when_its_bytes_are_at_fault(
    repo: RepoCache, problem: Problem, blob_goes: bool
) -> None:
    repo.blob(SHA).write_bytes(DATA)
    link = link_snapshot(repo)

    Repairer(repo, "org/x@main", lock_timeout=5).remove(COMMIT, expected(), problem)

    assert not link.is_symlink()
    assert repo.blob(SHA).exists() is not blob_goes


# --- states a real client left, damaged the way real failures damage them ----------------------------


@pytest.fixture
def cached(local_hub: LocalHub) -> tuple[RepoCache, str, dict[str, ExpectedFile]]:
    """A repo fetched by ``snapshot_download``, with what its listing says each file must be."""
    commit = local_hub.add_repo("org/real", {"config.json": "{}", "model.safetensors": DATA})
    snapshot_download("org/real")
    repo = RepoCache(local_hub.cache_dir, "org/real", "model")
    raw = repo.listings.read(commit)
    assert raw is not None
    return repo, commit, listing.parse(repo, raw)


def real_verdict(cached: tuple[RepoCache, str, dict[str, ExpectedFile]], path: str) -> Problem | None:
    repo, commit, files = cached
    return check_file(repo, str(repo.snapshot_dir(commit)), files[path])


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_each_half_written_state_gets_its_problem(
    cached: tuple[RepoCache, str, dict[str, ExpectedFile]], transport: str
) -> None:
    repo, _, files = cached
    cache = repo.cache_dir
    weights = "model.safetensors"
    assert real_verdict(cached, weights) is None
    assert real_verdict(cached, "config.json") is None
    in_store = repo.store.target(files[weights].blob_name) is not None
    assert in_store is (transport == "xet")

    half_written.truncated_blob(cache, "org/real", weights)
    assert real_verdict(cached, weights) == Problem(
        ProblemKind.WRONG_SIZE, weights, found=str(len(DATA) // 2), wanted=str(len(DATA))
    )

    half_written.dangling_link(cache, "org/real", weights)
    at = Entry.STORE if in_store else Entry.BLOB
    assert real_verdict(cached, weights) == Problem(ProblemKind.DANGLING_LINK, weights, at)

    half_written.missing_file(cache, "org/real", "config.json")
    assert real_verdict(cached, "config.json") == Problem(ProblemKind.MISSING, "config.json")


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_a_flipped_byte_passes_the_cheap_check_and_fails_the_hash(
    cached: tuple[RepoCache, str, dict[str, ExpectedFile]],
) -> None:
    repo, commit, files = cached
    half_written.corrupted_blob(repo.cache_dir, "org/real", "model.safetensors")

    assert real_verdict(cached, "model.safetensors") is None
    findings = Repairer(repo, "org/real@main", lock_timeout=5).inspect(commit, list(files.values()), hash_all=True)
    assert findings.problems == {"model.safetensors": hash_problem(files["model.safetensors"])}


def test_read_buffer_starts_on_a_page_so_reads_into_it_are_not_misaligned(tmp_path: Path) -> None:
    # The kernel's copy into a destination 16 bytes past a cache line (where a 1 MiB bytearray
    # starts) cost about 4x the system CPU; streamed hashes read into this buffer instead.
    view = read_buffer()
    assert len(view) == CHUNK and not view.readonly
    assert ctypes.addressof(ctypes.c_char.from_buffer(view)) % mmap.PAGESIZE == 0
    data = os.urandom(3 * CHUNK + 5)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert content_hash(path, lfs=True) == hashlib.sha256(data).hexdigest()
