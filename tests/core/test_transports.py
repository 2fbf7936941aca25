"""What the engine promises on every transfer path: Xet with huggingface_hub's shared blob store,
Xet with repo-local blobs, and plain HTTP (see ``tests/conftest.py`` for the switch).

The shared blob store keeps a Xet file's bytes at ``<cache>/blobs/<xx>/<xet hash>`` (read-only),
and the repo's ``blobs/<sha256>`` is a relative link to it. These tests damage that store file
the way a disk or a killed process does and check that ``materialize`` repairs it, for every
repo that links to it, without ever deleting a good one.
"""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import scan_cache_dir, snapshot_download

from pytest_hfsnapshot import OfflineMissingError, materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.testing.hub import LocalHub

# 256 KiB, LFS by name: Xet-backed when the hub serves Xet. Random, so that Xet can neither
# compress nor deduplicate it: the bytes on the wire are the file's.
WEIGHTS = random.Random(0).randbytes(256 * 1024)
FILES = {"config.json": '{"model_type": "bert"}', "tokenizer_config.json": "{}", "model.safetensors": WEIGHTS}

pytestmark = pytest.mark.transports("xet", "xet-noshare", "http")


def store_file(cache: Path, repo_id: str, path: str = "model.safetensors") -> Path | None:
    """The shared-store file a cached repo file resolves to, or None when its blob is repo-local."""
    link = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    (snapshot,) = link.iterdir()
    blob = Path(os.path.realpath(snapshot / path))
    return blob if blob.parent.parent == cache / "blobs" else None


def damage(path: Path, how: str) -> None:
    """Truncate or flip a byte of a (read-only) cached file as a failing disk would."""
    mode = stat.S_IMODE(path.stat().st_mode)
    path.chmod(mode | stat.S_IWUSR)
    try:
        if how == "truncate":
            os.truncate(path, path.stat().st_size // 2)
        else:
            with open(path, "r+b") as handle:
                handle.seek(10)
                byte = handle.read(1)
                handle.seek(10)
                handle.write(bytes([byte[0] ^ 0xFF]))
    finally:
        path.chmod(mode)


def test_cold_materialize_sends_no_more_requests_than_snapshot_download(
    local_hub: LocalHub, tmp_path: Path, transport: str
) -> None:
    local_hub.add_repo("org/tiny", FILES)
    snapshot_download("org/tiny", cache_dir=tmp_path / "plain")
    plain = list(local_hub.requests)
    local_hub.reset_counters()

    snap = materialize("org/tiny")

    assert snap.source == "download"
    ours = list(local_hub.requests)
    assert len(ours) <= len(plain), f"materialize sent {ours}, snapshot_download {plain}"
    heads = sorted(path for method, path, _ in ours if method == "HEAD")
    plain_heads = sorted(path for method, path, _ in plain if method == "HEAD")
    assert heads == plain_heads, "no HEAD the client would not send itself"
    if local_hub.xet and transport != "http" and int(huggingface_hub.__version__.split(".")[0]) >= 2:
        # The listing describes the Xet file (xetHash): the client sends no HEAD for it (1.x still does).
        assert not [p for p in heads if p.endswith("model.safetensors")], heads


def test_xet_file_links_into_the_shared_store_and_is_served_warm(local_hub: LocalHub, transport: str) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)

    snap = materialize("org/tiny", revision=commit)

    assert (snap / "model.safetensors").read_bytes() == WEIGHTS
    store = store_file(local_hub.cache_dir, "org/tiny")
    if local_hub.xet and transport == "xet":
        assert store is not None and store.parent.name == store.name[:2]
        assert stat.S_IMODE(store.stat().st_mode) & 0o222 == 0, "the store file is read-only"
    else:
        assert store is None
    local_hub.reset_counters()
    again = materialize("org/tiny", revision=commit)
    again_sha = materialize("org/tiny", revision=commit, verify="sha256")
    assert again.source == again_sha.source == "cache"
    assert local_hub.requests == []


@pytest.mark.parametrize("how", ["truncate", "flip"])
def test_damaged_cached_weight_is_repaired(local_hub: LocalHub, transport: str, how: str) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)
    snap = materialize("org/tiny", revision=commit)
    target = Path(os.path.realpath(snap / "model.safetensors"))
    damage(target, how)
    local_hub.reset_counters()

    repaired = materialize("org/tiny", revision=commit, verify="sha256")

    assert repaired.source == "repair" and repaired.repaired == ("model.safetensors",)
    assert (repaired / "model.safetensors").read_bytes() == WEIGHTS
    assert local_hub.bytes_served >= len(WEIGHTS)
    assert local_hub.served("*config.json") == 0, "only the damaged file is fetched again"
    store = store_file(local_hub.cache_dir, "org/tiny")
    if store is not None:
        assert stat.S_IMODE(store.stat().st_mode) & 0o222 == 0, "the new store file is read-only again"
        # The client's manifest of links to the store file names this repo's link once, as before.
        refs = store.with_name(store.name + ".refs").read_text().splitlines()
        assert refs == [f"models--org--tiny/blobs/{Path(os.readlink(snap / 'model.safetensors')).name}"]


def test_store_file_shared_by_two_repos_is_repaired_once_and_serves_both(local_hub: LocalHub, transport: str) -> None:
    first = local_hub.add_repo("org/first", FILES)
    second = local_hub.add_repo("org/second", {**FILES, "config.json": '{"model_type": "gpt2"}'})
    materialize("org/first", revision=first)
    materialize("org/second", revision=second)
    target = Path(
        os.path.realpath(local_hub.cache_dir / "models--org--first" / "snapshots" / first / "model.safetensors")
    )
    damage(target, "flip")
    local_hub.reset_counters()

    a = materialize("org/first", revision=first, verify="sha256")
    fetched_for_first = local_hub.bytes_served
    b = materialize("org/second", revision=second, verify="sha256")

    assert a.source == "repair"
    assert (a / "model.safetensors").read_bytes() == WEIGHTS == (b / "model.safetensors").read_bytes()
    assert fetched_for_first >= len(WEIGHTS)
    if store_file(local_hub.cache_dir, "org/first") is not None:
        # One store file for both repos: repaired once, the second repo finds it good.
        assert b.source == "cache"
        assert local_hub.bytes_served == fetched_for_first
        assert store_file(local_hub.cache_dir, "org/first") == store_file(local_hub.cache_dir, "org/second")


@pytest.mark.transports("xet")
def test_a_good_store_file_is_never_deleted(local_hub: LocalHub) -> None:
    first = local_hub.add_repo("org/first", FILES)
    second = local_hub.add_repo("org/second", FILES)
    materialize("org/first", revision=first)
    materialize("org/second", revision=second)
    store = store_file(local_hub.cache_dir, "org/first")
    if store is None:
        pytest.skip("the local Hub serves no Xet here (hf_xet is not installed)")
    inode = store.stat().st_ino
    # The second repo's own link into the store is gone: only that link is remade.
    repo = RepoCache(local_hub.cache_dir, "org/second", "model")
    for blob in repo.blobs.iterdir():
        if blob.is_symlink():
            blob.unlink()
    local_hub.reset_counters()

    snap = materialize("org/second", revision=second, verify="sha256")

    assert snap.source == "repair"
    assert store.stat().st_ino == inode
    assert local_hub.bytes_served == 0


def test_cache_tools_see_no_inconsistency_of_ours(local_hub: LocalHub, transport: str) -> None:
    local_hub.add_repo("org/tiny", FILES)
    local_hub.add_repo("org/gated", FILES, gated=True)
    materialize("org/tiny", session="s1")
    assert scan_cache_dir(local_hub.cache_dir).warnings == []
    with pytest.raises(Exception, match="gated"):
        materialize("org/gated")

    info = scan_cache_dir(local_hub.cache_dir)

    # A refused repo leaves what the client left (refs/ and trees/, and on the Xet path an empty
    # snapshots/ folder), as a bare snapshot_download does; our record of the refusal adds nothing
    # the tools would report, and no repo of ours appears.
    assert [str(w) for w in info.warnings if "models--org--gated" not in str(w)] == []
    assert {repo.repo_id for repo in info.repos} <= {"org/tiny", "org/gated"}


def test_a_repo_removed_by_the_cache_tools_leaves_nothing_misleading(local_hub: LocalHub, transport: str) -> None:
    commit = local_hub.add_repo("org/tiny", FILES)
    materialize("org/tiny", revision=commit)
    info = scan_cache_dir(local_hub.cache_dir)
    info.delete_revisions(commit).execute()
    assert not (local_hub.cache_dir / "models--org--tiny").exists()

    with pytest.raises(OfflineMissingError):
        materialize("org/tiny", revision=commit, offline=True)
    local_hub.reset_counters()
    again = materialize("org/tiny", revision=commit)

    assert again.source == "download"
    assert (again / "model.safetensors").read_bytes() == WEIGHTS
