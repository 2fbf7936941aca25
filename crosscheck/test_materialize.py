"""``materialize`` gives the same verified snapshot from LocalHub as from olah, cold and warm."""

from __future__ import annotations

import pytest

from pytest_hfsnapshot import AuthError, RevisionNotFoundError, Snapshot, materialize

from .content import DATASET, MODEL, Repo
from .expect import assert_snapshot, blob_name, storage
from .servers import Target


def _assert_matches(snap: Snapshot, server: Target, repo: Repo, label: str, files: dict[str, bytes]) -> None:
    commit = server.commit(repo, label)
    assert snap.commit == commit
    assert snap.repo_id == repo.repo_id
    assert snap.files == tuple(sorted(files))
    assert snap.size == sum(len(data) for data in files.values())
    assert_snapshot(server.cache_dir, repo, commit, snap.path, files)


@pytest.mark.parametrize(
    ("repo", "revision", "label"),
    [(MODEL, "main", "v2"), (MODEL, "v1.0", "v1"), (MODEL, "dev", "dev"), (DATASET, "main", "v1")],
    ids=["model-branch", "model-tag", "model-dev", "dataset"],
)
def test_cold_then_warm(server: Target, repo: Repo, revision: str, label: str) -> None:
    files = repo.commit(label).files

    cold = materialize(repo.repo_id, revision=revision, repo_type=repo.repo_type, cache_dir=server.cache_dir)
    warm = materialize(repo.repo_id, revision=revision, repo_type=repo.repo_type, cache_dir=server.cache_dir)

    assert (cold.source, warm.source) == ("download", "cache")
    _assert_matches(cold, server, repo, label, files)
    _assert_matches(warm, server, repo, label, files)
    assert warm.path == cold.path


def test_pinned_commit_cold_then_warm_sha256_and_offline(server: Target) -> None:
    commit = server.commit(MODEL, "v1")
    files = MODEL.commit("v1").files

    cold = materialize(MODEL.repo_id, revision=commit, cache_dir=server.cache_dir)
    rehashed = materialize(MODEL.repo_id, revision=commit, cache_dir=server.cache_dir, verify="sha256")
    offline = materialize(MODEL.repo_id, revision=commit, cache_dir=server.cache_dir, offline=True)

    assert [s.source for s in (cold, rehashed, offline)] == ["download", "cache", "cache"]
    for snap in (cold, rehashed, offline):
        _assert_matches(snap, server, MODEL, "v1", files)


def test_selections(server: Target) -> None:
    files = MODEL.commit("dev").files
    weights = (".safetensors", ".bin")

    metadata = materialize(MODEL.repo_id, revision="dev", metadata_only=True, cache_dir=server.cache_dir)
    allowed = materialize(MODEL.repo_id, revision="dev", allow_patterns=["*.bin"], cache_dir=server.cache_dir)

    assert metadata.source == allowed.source == "download"
    assert metadata.files == tuple(sorted(n for n in files if not n.endswith(weights)))
    assert allowed.files == ("pytorch_model.bin",)
    assert metadata.path == allowed.path
    fetched = {n: d for n, d in files.items() if n in metadata.files + allowed.files}
    assert_snapshot(server.cache_dir, MODEL, server.commit(MODEL, "dev"), metadata.path, fetched)


def test_truncated_lfs_blob_is_repaired(server: Target) -> None:
    """Repair re-downloads the whole file: olah has no Range, LocalHub has, the result must agree."""
    files = MODEL.commit("v2").files
    materialize(MODEL.repo_id, cache_dir=server.cache_dir)
    blob = storage(server.cache_dir, MODEL) / "blobs" / blob_name("model.safetensors", files["model.safetensors"])
    blob.write_bytes(blob.read_bytes()[: blob.stat().st_size // 2])

    repaired = materialize(MODEL.repo_id, cache_dir=server.cache_dir)

    assert repaired.source == "repair"
    assert "model.safetensors" in repaired.repaired
    _assert_matches(repaired, server, MODEL, "v2", files)


def test_unknown_revision(server: Target) -> None:
    """olah offline answers 401 RepoNotFound for an unknown revision: an auth error to us."""
    expected = AuthError if server.name == "olah" else RevisionNotFoundError

    with pytest.raises(expected) as excinfo:
        materialize(MODEL.repo_id, revision="nope", cache_dir=server.cache_dir, retries=0)

    assert type(excinfo.value) is expected
    assert MODEL.repo_id in str(excinfo.value)
