"""CONTRACT §7, read-only cache layers, as the core serves them (``materialize(..., cache_layers=[...])``).

A layer here is what a fleet really mounts: a cache that ``pytest-hfsnapshot prefetch --repo``
filled against the local Hub, uploaded by ``rclone copy`` (with ``--links`` or without) to moto's S3
server and mounted with ``rclone mount --read-only``; or that prefetched folder itself (a layer baked
into a runner image), also bind-mounted read-only inside ``unshare -m``. The writable cache is the
local Hub's fresh one (``HF_HUB_CACHE``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import file_fetches
from huggingface_hub import snapshot_download
from reliability.conftest import Child, assert_snapshot_matches, repo_files, tree_digest

from pytest_hfsnapshot import InvalidRequestError, Snapshot, materialize
from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import Mount

REPO = "org/layered"
OTHER = "org/second"
#: Every file byte the Hub sends, whichever origin: ``resolve``, and the CDN and CAS requests of a file.
FILE_BYTES = "*/resolve/*"
REVISION_REQUESTS = "/api/models/*/revision/*"
ALL = pytest.mark.transports("xet", "xet-noshare", "http")
LINKS = pytest.mark.parametrize("links", [True, False], ids=["rclone-links", "rclone-no-links"])

Prefetched = Callable[..., Path]
S3Layer = Callable[..., Mount]


def within(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, root]) == root


def resolved(snap: Snapshot) -> dict[str, str]:
    """Where each file of the snapshot really is."""
    return {path: os.path.realpath(snap.path / path) for path in snap.files}


def writable_snapshot(hub: LocalHub, commit: str, repo_id: str = REPO) -> Path:
    assert hub.cache_dir is not None
    return hub.cache_dir / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit


def stored_blob(cache: Path, commit: str, path: str, repo_id: str = REPO) -> Path:
    """The file a cache's snapshot entry resolves to (the repo blob, or the shared store's file)."""
    return Path(os.path.realpath(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit / path))


def assert_served_from(
    snap: Snapshot, layer: Path, files: dict[str, bytes], hub: LocalHub, commit: str, repo_id: str = REPO
) -> None:
    """A snapshot served by ``layer``: in the writable cache, every link resolving into the layer."""
    assert snap.source == "layer", snap
    assert snap.commit == commit
    assert snap.path == writable_snapshot(hub, commit, repo_id), "the snapshot is not the writable cache's folder"
    outside = {path: real for path, real in resolved(snap).items() if not within(real, layer)}
    assert not outside, f"files not served from the layer {layer}: {outside}"
    assert_snapshot_matches(snap.path, files)


@ALL
@LINKS
def test_bucket_mounted_read_only_serves_a_prefetched_snapshot_with_no_file_byte(
    local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer, links: bool
) -> None:
    files = repo_files(50)
    commit = local_hub.add_repo(REPO, files)
    mount = s3_layer(prefetched(f"{REPO}@{commit}"), links=links)
    local_hub.reset_counters()

    snap = materialize(REPO, revision=commit, cache_layers=[mount.layer])

    assert local_hub.served(FILE_BYTES) == 0, local_hub.requests
    assert_served_from(snap, mount.layer, files, local_hub, commit)
    # Code that loads the repo by id from HF_HUB_CACHE finds it, offline too.
    assert snapshot_download(REPO, revision=commit, local_files_only=True) == str(snap.path)
    again = materialize(REPO, revision=commit, cache_layers=[mount.layer])
    assert (again.path, local_hub.served(FILE_BYTES)) == (snap.path, 0)


@ALL
def test_branch_is_resolved_once_then_its_commit_comes_from_the_layer(
    local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer
) -> None:
    files = repo_files(51)
    commit = local_hub.add_repo(REPO, files)
    mount = s3_layer(prefetched(REPO), links=False)
    local_hub.reset_counters()

    snap = materialize(REPO, cache_layers=[mount.layer], session="before-the-move")

    assert local_hub.request_count(REVISION_REQUESTS) == 1, local_hub.requests
    assert local_hub.served(FILE_BYTES) == 0, local_hub.requests
    assert_served_from(snap, mount.layer, files, local_hub, commit)
    assert snap.revision == "main"
    assert snapshot_download(REPO, local_files_only=True) == str(snap.path)

    # The branch moves on: a later session's commit is not in the layer, so it comes from the Hub.
    moved = {**files, "config.json": b'{"model_type": "bert", "moved": true}'}
    new_commit = local_hub.add_repo(REPO, moved)
    newer = materialize(REPO, cache_layers=[mount.layer], session="after-the-move")
    assert (newer.commit, newer.source) == (new_commit, "download")
    assert_snapshot_matches(newer.path, moved)


def _damage(blob: Path, how: str) -> None:
    os.chmod(blob, 0o644)  # the shared store's files are read-only
    if how == "missing":
        blob.unlink()
    elif how == "truncated":
        os.truncate(blob, blob.stat().st_size // 2)
    else:
        data = bytearray(blob.read_bytes())
        data[len(data) // 3] ^= 0xFF
        blob.write_bytes(bytes(data))


@ALL
@pytest.mark.parametrize(
    ("damage", "verify"),
    [
        ({"tokenizer.json": "missing", "model.safetensors": "truncated"}, "size"),
        ({"model.safetensors": "flipped"}, "sha256"),
    ],
    ids=["missing-and-truncated", "flipped-byte-sha256"],
)
def test_files_missing_or_damaged_in_the_layer_are_fetched_into_the_writable_cache_and_only_those(
    local_hub: LocalHub,
    prefetched: Prefetched,
    s3_layer: S3Layer,
    damage: dict[str, str],
    verify: str,
) -> None:
    files = repo_files(52)
    commit = local_hub.add_repo(REPO, files)
    writer = prefetched(f"{REPO}@{commit}")
    for path, how in damage.items():
        _damage(stored_blob(writer, commit, path), how)
    mount = s3_layer(writer, links=True)
    before = tree_digest(mount.layer)
    local_hub.reset_counters()

    snap = materialize(REPO, revision=commit, cache_layers=[mount.layer], verify=verify)

    assert snap.source in ("download", "repair"), snap
    assert_snapshot_matches(snap.path, files)
    fetches = {path: file_fetches(local_hub, f"/{REPO}/resolve/*/{path}") for path in files}
    assert fetches == {path: int(path in damage) for path in files}, f"file fetches: {fetches}"
    where = resolved(snap)
    for path in files:
        if path in damage:
            assert within(where[path], local_hub.cache_dir), f"{path} is not in the writable cache: {where[path]}"
        else:
            assert within(where[path], mount.layer), f"{path} was not served from the layer: {where[path]}"
    assert tree_digest(mount.layer) == before


@ALL
def test_nothing_is_written_into_a_layer_even_a_writable_one(local_hub: LocalHub, prefetched: Prefetched) -> None:
    files = repo_files(53)
    commit = local_hub.add_repo(REPO, files)
    local_hub.add_repo(OTHER, repo_files(54))
    layer = prefetched(f"{REPO}@{commit}", REPO, f"{OTHER}")
    _damage(stored_blob(layer, commit, "tokenizer.json"), "truncated")
    before = tree_digest(layer)

    by_commit = materialize(REPO, revision=commit, cache_layers=[layer])
    by_branch = materialize(REPO, cache_layers=[layer], lock_timeout=30)
    other = materialize(OTHER, cache_layers=[layer], verify="sha256")

    assert by_commit.source in ("download", "repair") and by_branch.commit == commit
    assert other.source == "layer"
    assert_snapshot_matches(by_branch.path, files)
    assert tree_digest(layer) == before, "the layer changed"


@ALL
def test_layer_bind_mounted_read_only_serves_a_host_that_cannot_write_it(
    local_hub: LocalHub,
    prefetched: Prefetched,
    read_only_bind: Callable[..., tuple[list[str], Path]],
    children: Callable[..., Child],
) -> None:
    files = repo_files(55)
    commit = local_hub.add_repo(REPO, files)
    baked = prefetched(f"{REPO}@{commit}")
    before = tree_digest(baked)
    prefix, layer = read_only_bind(baked, hostname="fleet-image")
    local_hub.reset_counters()

    child = children(
        {"action": "materialize", "repo_id": REPO, "kwargs": {"revision": commit, "cache_layers": [str(layer)]}},
        prefix=prefix,
    )
    result = child.result(timeout=120)

    assert result["ok"], result
    assert result["source"] == "layer" and local_hub.served(FILE_BYTES) == 0, result
    assert result["path"] == str(writable_snapshot(local_hub, commit))
    links = {path: os.readlink(Path(result["path"]) / path) for path in files}
    assert all(within(os.path.join(result["path"], os.path.dirname(p), t), layer) for p, t in links.items()), links
    assert tree_digest(baked) == before


@ALL
def test_links_into_a_layer_are_repaired_in_a_session_without_it(
    local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer
) -> None:
    files = repo_files(56)
    commit = local_hub.add_repo(REPO, files)
    mount = s3_layer(prefetched(f"{REPO}@{commit}"), links=False)
    materialize(REPO, revision=commit, cache_layers=[mount.layer])
    local_hub.reset_counters()

    alone = materialize(REPO, revision=commit)

    assert alone.source == "repair", alone
    assert all(within(real, local_hub.cache_dir) for real in resolved(alone).values()), resolved(alone)
    assert_snapshot_matches(alone.path, files)
    assert local_hub.served(FILE_BYTES) >= sum(len(data) for data in files.values())


@ALL
def test_layers_are_searched_in_the_order_given(local_hub: LocalHub, prefetched: Prefetched) -> None:
    files, other_files = repo_files(57), repo_files(58)
    commit = local_hub.add_repo(REPO, files)
    other_commit = local_hub.add_repo(OTHER, other_files)
    first = prefetched(f"{REPO}@{commit}")
    second = prefetched(f"{REPO}@{commit}", f"{OTHER}@{other_commit}")
    local_hub.reset_counters()

    snap = materialize(REPO, revision=commit, cache_layers=[first, second])
    other = materialize(OTHER, revision=other_commit, cache_layers=[first, second])

    assert local_hub.served(FILE_BYTES) == 0
    assert_served_from(snap, first, files, local_hub, commit)
    assert_served_from(other, second, other_files, local_hub, other_commit, OTHER)


@pytest.mark.transports("xet")
def test_layer_path_that_is_missing_or_unreadable_is_an_invalid_request_naming_it(
    local_hub: LocalHub, tmp_path: Path, s3_layer: S3Layer
) -> None:
    commit = local_hub.add_repo(REPO, repo_files(59))
    missing = tmp_path / "no-such-layer"
    cache = tmp_path / "cache"
    cache.mkdir()
    dead = s3_layer(cache)
    dead.crash()
    local_hub.reset_counters()

    for layer in (missing, dead.layer):
        with pytest.raises(InvalidRequestError) as caught:
            materialize(REPO, revision=commit, cache_layers=[layer])
        assert str(layer) in str(caught.value)
    assert local_hub.requests == [], "went to the Hub with a bad layer"
