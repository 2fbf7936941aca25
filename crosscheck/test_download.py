"""huggingface_hub's downloads give the same cache from LocalHub as from olah.

Commit ids differ between servers (each makes its own), so expectations name commits by
label; everything else (file set, bytes, blob names, refs written) must be identical.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download, snapshot_download

from .content import DATASET, MODEL
from .expect import assert_snapshot, refs, storage
from .servers import Target


@pytest.mark.parametrize(
    ("revision", "label"),
    [("main", "v2"), ("v1.0", "v1"), ("dev", "dev")],
    ids=["branch-main", "tag", "branch-dev"],
)
def test_snapshot_by_name(server: Target, revision: str, label: str) -> None:
    path = Path(snapshot_download(MODEL.repo_id, revision=revision))

    commit = server.commit(MODEL, label)
    assert_snapshot(server.cache_dir, MODEL, commit, path, MODEL.commit(label).files)
    assert refs(server.cache_dir, MODEL) == {revision: commit}
    assert (storage(server.cache_dir, MODEL) / "trees" / f"{commit}.json").is_file()


def test_snapshot_by_commit_writes_no_ref(server: Target) -> None:
    commit = server.commit(MODEL, "v1")

    path = Path(snapshot_download(MODEL.repo_id, revision=commit))

    assert_snapshot(server.cache_dir, MODEL, commit, path, MODEL.commit("v1").files)
    assert refs(server.cache_dir, MODEL) == {}


def test_snapshot_allow_patterns(server: Target) -> None:
    path = Path(snapshot_download(MODEL.repo_id, allow_patterns=["*.json", "tokenizer/*"]))

    files = MODEL.commit("v2").files
    wanted = {name: data for name, data in files.items() if name.endswith(".json") or name.startswith("tokenizer/")}
    assert set(wanted) == {"config.json", "tokenizer/vocab.txt", "tokenizer/merges.txt"}
    assert_snapshot(server.cache_dir, MODEL, server.commit(MODEL, "v2"), path, wanted)


def test_snapshot_ignore_patterns(server: Target) -> None:
    path = Path(snapshot_download(MODEL.repo_id, revision="dev", ignore_patterns=["*.safetensors", "*.bin"]))

    files = MODEL.commit("dev").files
    wanted = {name: data for name, data in files.items() if not name.endswith((".safetensors", ".bin"))}
    assert_snapshot(server.cache_dir, MODEL, server.commit(MODEL, "dev"), path, wanted)


def test_snapshot_twice_downloads_nothing_new(server: Target) -> None:
    first = Path(snapshot_download(MODEL.repo_id))
    blobs = storage(server.cache_dir, MODEL) / "blobs"
    before = {p.name: p.stat().st_mtime_ns for p in blobs.iterdir()}

    second = Path(snapshot_download(MODEL.repo_id))

    assert second == first
    assert {p.name: p.stat().st_mtime_ns for p in blobs.iterdir()} == before


@pytest.mark.parametrize(
    ("filename", "revision", "label"),
    [
        ("model.safetensors", "main", "v2"),
        ("tokenizer/vocab.txt", "v1.0", "v1"),
        ("pytorch_model.bin", "dev", "dev"),
    ],
    ids=["lfs-main", "regular-tag", "lfs-branch"],
)
def test_hf_hub_download_one_file(server: Target, filename: str, revision: str, label: str) -> None:
    path = Path(hf_hub_download(MODEL.repo_id, filename, revision=revision))

    commit = server.commit(MODEL, label)
    data = MODEL.commit(label).files[filename]
    assert_snapshot(server.cache_dir, MODEL, commit, path.parents[filename.count("/")], {filename: data})
    assert refs(server.cache_dir, MODEL) == {revision: commit}
    # A single-file download lists no tree, so offline snapshot_download could not prove completeness.
    assert not (storage(server.cache_dir, MODEL) / "trees").exists()


def test_hf_hub_download_by_commit(server: Target) -> None:
    commit = server.commit(MODEL, "v1")

    path = Path(hf_hub_download(MODEL.repo_id, "model.safetensors", revision=commit))

    data = MODEL.commit("v1").files["model.safetensors"]
    assert_snapshot(server.cache_dir, MODEL, commit, path.parent, {"model.safetensors": data})
    assert refs(server.cache_dir, MODEL) == {}


def test_dataset_snapshot(server: Target) -> None:
    path = Path(snapshot_download(DATASET.repo_id, repo_type="dataset"))

    commit = server.commit(DATASET, "v1")
    assert_snapshot(server.cache_dir, DATASET, commit, path, DATASET.commit("v1").files)
    assert refs(server.cache_dir, DATASET) == {"main": commit}
    assert storage(server.cache_dir, DATASET).name == "datasets--crosscheck--tiny-dataset"


def test_dataset_single_file(server: Target) -> None:
    path = Path(hf_hub_download(DATASET.repo_id, "data/train.csv", repo_type="dataset"))

    data = DATASET.commit("v1").files["data/train.csv"]
    assert_snapshot(server.cache_dir, DATASET, server.commit(DATASET, "v1"), path.parents[1], {"data/train.csv": data})
