"""A commit's listing: each raw entry parsed into what the file must be, and a request's selection of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot import InvalidRequestError, UnsafeCacheError, VerificationError
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.cache.verify import ExpectedFile
from pytest_hfsnapshot.core.engine import listing
from pytest_hfsnapshot.request import SnapshotRequest

COMMIT = "c" * 40
SHA1 = "1" * 40
SHA256 = "2" * 64
XET = "3" * 64


@pytest.fixture
def repo(tmp_path: Path) -> RepoCache:
    return RepoCache(tmp_path, "org/tiny", "model")


def small(size: int = 10) -> dict[str, Any]:
    return {"size": size, "blob_id": SHA1}


def lfs(size: int = 4096, *, xet: str | None = XET) -> dict[str, Any]:
    # An LFS entry's own size is its pointer's; the file's is lfs_size.
    entry: dict[str, Any] = {"size": 134, "blob_id": SHA1, "lfs_sha256": SHA256, "lfs_size": size}
    if xet:
        entry["xet_hash"] = xet
    return entry


def test_a_small_file_is_its_git_blob_and_an_lfs_file_its_sha256_and_xet_hash(repo: RepoCache) -> None:
    parsed = listing.parse(repo, {"config.json": small(12), "model.safetensors": lfs(4096)})

    assert parsed == {
        "config.json": ExpectedFile("config.json", 12, SHA1, False),
        "model.safetensors": ExpectedFile("model.safetensors", 4096, SHA256, True, xet=XET),
    }


def test_an_lfs_file_without_a_xet_hash_has_none(repo: RepoCache) -> None:
    assert listing.parse(repo, {"model.bin": lfs(xet=None)})["model.bin"].xet == ""


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"size": 1, "blob_id": "not-hex"}, ValueError),
        ({"size": 1, "blob_id": "A" * 40}, ValueError),  # upper case is not a blob id
        ({"size": 1, "blob_id": "1" * 39}, ValueError),
        ({**lfs(), "lfs_sha256": "2" * 63}, ValueError),
        ({**lfs(), "xet_hash": "xyz"}, ValueError),
        ({"blob_id": SHA1}, KeyError),  # no size
        ({"size": "many", "blob_id": SHA1}, ValueError),
    ],
)
def test_an_entry_that_cannot_be_trusted_is_refused(repo: RepoCache, entry: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        listing.parse(repo, {"config.json": entry})


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "a//b", "./a", "a\\b", "C:x", "nul\x00"])
def test_a_path_that_leaves_the_snapshot_folder_is_unsafe(repo: RepoCache, path: str) -> None:
    with pytest.raises(UnsafeCacheError, match="outside the snapshot folder"):
        listing.parse(repo, {path: small()})


LISTED = {
    name: ExpectedFile(name, 1, SHA1, False)
    for name in ("README.md", "config.json", "model.safetensors", "pytorch_model.bin", "tokenizer/vocab.txt")
}


def selected(request: SnapshotRequest, files: dict[str, ExpectedFile] = LISTED) -> list[str]:
    return [f.path for f in listing.select(request, files, COMMIT)]


@pytest.mark.parametrize(
    ("keywords", "paths"),
    [
        ({}, sorted(LISTED)),
        ({"allow_patterns": "*.json"}, ["config.json"]),
        ({"allow_patterns": ["tokenizer/*", "README.md"]}, ["README.md", "tokenizer/vocab.txt"]),
        # A folder pattern ending in "/" selects the folder's files, as huggingface_hub's does.
        ({"allow_patterns": "tokenizer/"}, ["tokenizer/vocab.txt"]),
        ({"ignore_patterns": ["*.bin", "*.safetensors"]}, ["README.md", "config.json", "tokenizer/vocab.txt"]),
        ({"allow_patterns": "*.json", "ignore_patterns": "config.*"}, None),
        # metadata_only leaves the weights out, whatever else is asked.
        ({"metadata_only": True}, ["README.md", "config.json", "tokenizer/vocab.txt"]),
        ({"metadata_only": True, "ignore_patterns": "README.md"}, ["config.json", "tokenizer/vocab.txt"]),
    ],
)
def test_the_selection_is_huggingface_hubs(keywords: dict[str, Any], paths: list[str] | None) -> None:
    request = SnapshotRequest.build("org/tiny", **keywords)
    if paths is None:
        with pytest.raises(InvalidRequestError):
            selected(request)
    else:
        assert selected(request) == paths


def test_an_empty_selection_names_the_patterns_the_commit_and_what_the_repo_has() -> None:
    request = SnapshotRequest.build("org/tiny", allow_patterns="*.gguf", ignore_patterns="*.md")

    with pytest.raises(InvalidRequestError) as caught:
        selected(request)

    assert str(caught.value) == (
        "No file of org/tiny@main (commit cccccccccccc) matches allow_patterns=['*.gguf'] ignore_patterns=['*.md']. "
        "The repo has: README.md, config.json, model.safetensors, pytorch_model.bin, tokenizer/vocab.txt."
    )
    assert (caught.value.repo_id, caught.value.revision) == ("org/tiny", "main")


def test_an_empty_selection_lists_at_most_ten_files() -> None:
    many = {f"f{n:02}.txt": ExpectedFile(f"f{n:02}.txt", 1, SHA1, False) for n in range(12)}
    with pytest.raises(InvalidRequestError, match=r"The repo has: f00\.txt, .*, f09\.txt\.$"):
        selected(SnapshotRequest.build("org/tiny", allow_patterns="*.json"), many)


@pytest.mark.parametrize("marker", listing.METADATA_MARKERS)
def test_a_full_model_snapshot_needs_one_metadata_marker(marker: str) -> None:
    files = {name: ExpectedFile(name, 1, SHA1, False) for name in (marker, "weights.bin")}
    assert selected(SnapshotRequest.build("org/tiny"), files) == sorted(files)


@pytest.mark.parametrize(("repo_type", "loadable"), [("model", False), ("dataset", True), ("space", True)])
def test_a_readme_is_a_marker_for_datasets_and_spaces_only(repo_type: str, loadable: bool) -> None:
    files = {name: ExpectedFile(name, 1, SHA1, False) for name in ("README.md", "weights.bin")}
    request = SnapshotRequest.build("org/tiny", repo_type=repo_type)
    if loadable:
        assert selected(request, files) == ["README.md", "weights.bin"]
    else:
        with pytest.raises(VerificationError, match=r"org/tiny@main has none of the metadata files config\.json"):
            selected(request, files)


def test_a_selection_by_pattern_needs_no_marker() -> None:
    files = {"weights.bin": ExpectedFile("weights.bin", 1, SHA1, False)}
    assert selected(SnapshotRequest.build("org/tiny", allow_patterns="*.bin"), files) == ["weights.bin"]
    with pytest.raises(VerificationError):
        selected(SnapshotRequest.build("org/tiny"), files)
