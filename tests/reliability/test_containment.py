"""Hostile caches and listings: nothing outside the repo's cache folder may change.

Each test digests, before and after, a sentinel folder outside the cache and the cache minus
the repo's own folder, ``.locks`` (huggingface_hub's locks and the plugin's own folder) and the
shared-store entries of the repo's own Xet files (never following a symlink), and compares.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import huggingface_hub.constants as hf_constants
import pytest
from conftest import xet_in_use
from huggingface_hub import HfApi

from pytest_hfsnapshot import UnsafeCacheError, materialize
from pytest_hfsnapshot.core.cache.layout import OWN_DIR, STORE_DIR, RepoCache
from pytest_hfsnapshot.testing.hub import LocalHub, git_blob_sha1, is_lfs

from .conftest import assert_snapshot_matches, repo_files, sha256, tree_digest

REPO = "org/target"
NEIGHBOUR = "org/neighbour"
OWN = ("models--org--target", ".locks")


def etag_of(path: str, data: bytes) -> str:
    return sha256(data) if is_lfs(path, len(data)) else git_blob_sha1(data)


def xet_hashes(repo_id: str, commit: str) -> set[str]:
    """The xet hashes of a repo's files, as the Hub lists them."""
    tree = HfApi().list_repo_tree(repo_id, revision=commit, recursive=True)
    return {h for h in (getattr(entry, "xet_hash", None) for entry in tree) if h}


def store_entry_of(rel: str, hashes: set[str]) -> bool:
    """Whether ``rel`` (relative to the cache) is a shared-store entry of one of ``hashes``: the
    file ``blobs/<xx>/<hash>`` or a file beside it named after it (``.refs``, ``.lock``, ...)."""
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] != STORE_DIR:
        return False
    name = parts[2].split(".", 1)[0]
    return name in hashes and parts[1] == name[:2]


class Scene:
    """A cache holding the target repo and a neighbour repo, and a sentinel folder beside the cache."""

    def __init__(self, hub: LocalHub, outside: Path) -> None:
        self.hub = hub
        self.files = repo_files(50, extra={"sub/extra.json": '{"nested": true}'})
        self.commit = hub.add_repo(REPO, self.files)
        self.neighbour_files = repo_files(51)
        neighbour_commit = hub.add_repo(NEIGHBOUR, self.neighbour_files)
        # The contract lets a repo's materialize change the store entries of its own files only.
        self.own_xet = xet_hashes(REPO, self.commit)
        self.neighbour_xet = xet_hashes(NEIGHBOUR, neighbour_commit)
        assert not self.own_xet & self.neighbour_xet, "the two repos must not share a store entry"
        materialize(REPO)
        materialize(NEIGHBOUR)
        self.repo = RepoCache(hub.cache_dir, REPO, "model")
        self.snapshot = self.repo.snapshot_dir(self.commit)
        self.outside = outside
        outside.mkdir()
        # Same size as the weight file, so that a size check alone would accept it.
        self.victim = outside / "victim.bin"
        self.victim.write_bytes(b"\xa5" * len(self.files["model.safetensors"]))
        (outside / "notes.txt").write_text("keep me")

    def etag(self, path: str) -> str:
        return etag_of(path, self.files[path])

    def digests(self) -> tuple[dict[str, str], dict[str, str]]:
        cache = tree_digest(self.hub.cache_dir, skip=OWN)
        return tree_digest(self.outside), {k: v for k, v in cache.items() if not store_entry_of(k, self.own_xet)}

    def shared_store(self) -> bool:
        """Whether Xet files are kept in huggingface_hub's shared blob store in this test."""
        return xet_in_use(self.hub) and not getattr(hf_constants, "HF_HUB_DISABLE_SHARED_BLOBS", True)


@pytest.fixture
def scene(local_hub: LocalHub, tmp_path: Path) -> Scene:
    return Scene(local_hub, tmp_path / "outside")


def _replace_with_link(path: Path, target: Path | str) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.symlink_to(target)


def _copy_to_outside(scene: Scene, folder: Path, name: str) -> Path:
    copy = scene.outside / name
    shutil.copytree(folder, copy, symlinks=True)
    return copy


Plant = Callable[[Scene], None]

PLANTS: dict[str, tuple[Plant, str]] = {
    "snapshot-file->outside-file": (
        lambda s: _replace_with_link(s.snapshot / "model.safetensors", s.victim),
        "repaired",
    ),
    "snapshot-file->neighbour-blob": (
        lambda s: _replace_with_link(
            s.snapshot / "config.json",
            s.hub.cache_dir
            / "models--org--neighbour"
            / "blobs"
            / etag_of("config.json", s.neighbour_files["config.json"]),
        ),
        "repaired",
    ),
    "blob->outside-file": (
        lambda s: _replace_with_link(s.repo.blob(s.etag("model.safetensors")), s.victim),
        "repaired",
    ),
    "blob->neighbour-blob": (
        lambda s: _replace_with_link(
            s.repo.blob(s.etag("tokenizer.json")),
            Path("../../models--org--neighbour/blobs") / etag_of("tokenizer.json", s.neighbour_files["tokenizer.json"]),
        ),
        "repaired",
    ),
    "blob->outside-missing-path": (
        lambda s: _replace_with_link(s.repo.blob(s.etag("model.safetensors")), s.outside / "created-through-link"),
        "repaired",
    ),
    "incomplete->outside-file": (
        lambda s: (s.repo.blobs / f"{s.etag('model.safetensors')}.0badc0de.incomplete").symlink_to(s.victim),
        "repaired",
    ),
    "ref->outside-file": (
        lambda s: _replace_with_link(s.repo.ref("main"), s.outside / "notes.txt"),
        "repaired",
    ),
    "tree-listing->outside-file": (
        lambda s: _replace_with_link(s.repo.tree_cache(s.commit), s.outside / "notes.txt"),
        "repaired",
    ),
    # huggingface_hub never links a snapshot folder: the planted link itself is removed and rebuilt.
    "snapshot-dir->outside-copy": (
        lambda s: _replace_with_link(s.snapshot, _copy_to_outside(s, s.snapshot, "snapshot-copy")),
        "repaired",
    ),
    "snapshot-subdir->outside-dir": (
        lambda s: _replace_with_link(s.snapshot / "sub", _copy_to_outside(s, s.snapshot / "sub", "sub-copy")),
        "repaired",
    ),
    # The repo folder, blobs/ and snapshots/ are refused instead.
    "snapshots-dir->outside-copy": (
        lambda s: _replace_with_link(s.repo.root / "snapshots", _copy_to_outside(s, s.repo.root / "snapshots", "sn")),
        "unsafe",
    ),
    "blobs-dir->outside-copy": (
        lambda s: _replace_with_link(s.repo.blobs, _copy_to_outside(s, s.repo.blobs, "blobs-copy")),
        "unsafe",
    ),
    "repo-dir->outside-copy": (
        lambda s: _replace_with_link(s.repo.root, _copy_to_outside(s, s.repo.root, "repo-copy")),
        "unsafe",
    ),
}


@pytest.mark.transports("xet", "xet-noshare", "http")
@pytest.mark.parametrize("verify", ["size", "sha256"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_planted_symlink_changes_nothing_outside(scene: Scene, plant: str, verify: str) -> None:
    action, expected = PLANTS[plant]
    action(scene)
    before = scene.digests()

    # A new session resolves the branch again and walks the whole lock-held path.
    if expected == "unsafe":
        with pytest.raises(UnsafeCacheError) as caught:
            materialize(REPO, session="planted", verify=verify, lock_timeout=5, retries=1)
        assert caught.value.repo_id == REPO
    else:
        snap = materialize(REPO, session="planted", verify=verify, lock_timeout=5, retries=1)
        assert snap.commit == scene.commit
        assert_snapshot_matches(snap.path, scene.files)
        assert str(snap.path) == str(scene.snapshot)

    after = scene.digests()
    assert after[0] == before[0], "the sentinel folder outside the cache changed"
    assert after[1] == before[1], "the cache outside the repo's folder changed"
    # The neighbour's store entries (its file and manifest) are among what was compared.
    neighbour_entries = sorted(k for k in before[1] if store_entry_of(k, scene.neighbour_xet))
    assert bool(neighbour_entries) == scene.shared_store(), neighbour_entries
    assert scene.victim.read_bytes() == b"\xa5" * len(scene.files["model.safetensors"])
    assert not (scene.outside / "created-through-link").exists()
    # The neighbour is still whole.
    assert_snapshot_matches(materialize(NEIGHBOUR, verify="sha256"), scene.neighbour_files)


HOSTILE_PATHS = ["../evil", "/abs/evil", "a/../../evil", "../../../../evil", "./evil", "a//evil", "..\\evil"]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_listing_paths_are_refused(local_hub: LocalHub, tmp_path: Path, path: str) -> None:
    local_hub.add_repo(REPO, repo_files(52))
    local_hub.add_raw_tree_entry(REPO, path, b"pwned")
    outside_before = tree_digest(tmp_path, skip=("hf-cache",))

    with pytest.raises(UnsafeCacheError) as caught:
        materialize(REPO, retries=0)

    assert REPO in str(caught.value) and repr(path) in str(caught.value)
    assert local_hub.request_count("*/resolve/*") == 0, "downloaded files of a listing that was refused"
    assert tree_digest(tmp_path, skip=("hf-cache",)) == outside_before
    found = [p for p in tmp_path.rglob("*") if "evil" in p.name or (p.is_file() and p.read_bytes() == b"pwned")]
    assert found == []


@pytest.fixture
def without_dac_override() -> Iterator[list[str]]:
    """A command prefix under which root obeys file modes (CAP_DAC_OVERRIDE dropped); empty for other users."""
    if os.geteuid() != 0:
        yield []
        return
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-linux_immutable"]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"running as root and cannot drop CAP_DAC_OVERRIDE (setpriv: {error}): chmod would not bite")
    if probe.returncode != 0:
        pytest.skip("running as root and setpriv cannot drop CAP_DAC_OVERRIDE: chmod would not bite")
    yield prefix


def _make_read_only(root: Path) -> None:
    for folder, _, _ in os.walk(root):
        os.chmod(folder, 0o555)


def _make_writable(root: Path) -> None:
    for folder, _, _ in os.walk(root):
        os.chmod(folder, 0o755)


@pytest.mark.transports("xet", "xet-noshare", "http")
@pytest.mark.parametrize("state", ["empty", "populated-branch", "populated-commit"])
def test_read_only_cache(local_hub: LocalHub, children: Any, without_dac_override: list[str], state: str) -> None:
    files = repo_files(53)
    commit = local_hub.add_repo(REPO, files)
    if state != "empty":
        materialize(REPO)
    cache = local_hub.cache_dir
    local_hub.reset_counters()
    _make_read_only(cache)
    try:
        before = tree_digest(cache)
        revision = commit if state == "populated-commit" else "main"
        child = children(
            {"action": "materialize", "repo_id": REPO, "kwargs": {"revision": revision, "lock_timeout": 5}},
            prefix=without_dac_override,
        )
        result = child.result(timeout=60)
        after = tree_digest(cache)
    finally:
        _make_writable(cache)

    assert after == before, "a read-only cache was changed"
    if state == "populated-commit":
        # A pinned, recorded snapshot needs neither the lock nor the network.
        assert result["ok"] and result["source"] == "cache", result
        assert_snapshot_matches(result["path"], files)
        assert local_hub.requests == []
    else:
        assert not result["ok"]
        assert "HfSnapshotError" in result["kinds"], result
        assert str(cache) in result["message"] and REPO in result["message"], result["message"]
        assert local_hub.request_count("*/resolve/*") == 0


OWN_FOLDERS = {
    "own-dir": OWN_DIR,
    "records": f"{OWN_DIR}/records/models--org--target",
    "locks": f"{OWN_DIR}/locks",
    "resolutions": f"{OWN_DIR}/resolutions",
}


def _link_own_folder_outside(scene: Scene, which: str) -> tuple[Path, Path]:
    """Replace one of our own folders by a link to a folder outside the cache; return it and a lure in it."""
    own = scene.hub.cache_dir / OWN_FOLDERS[which]
    elsewhere = scene.outside / "elsewhere"
    if own.exists():
        shutil.copytree(own, elsewhere, symlinks=True)
        shutil.rmtree(own)
    else:
        elsewhere.mkdir()
    own.symlink_to(elsewhere)
    # Days-old folders where the link leads look like ended test sessions to a cleanup of resolutions.
    lure = elsewhere / ("resolutions" if which == "own-dir" else "") / "old-project" / "thesis.tex"
    lure.parent.mkdir(parents=True, exist_ok=True)
    lure.write_text("years of work")
    os.utime(lure.parent, (0, 0))
    return elsewhere, lure


@pytest.mark.parametrize("which", ["own-dir", "resolutions"])
def test_own_folder_linked_outside_never_deletes_outside(scene: Scene, which: str) -> None:
    _, lure = _link_own_folder_outside(scene, which)

    with contextlib.suppress(UnsafeCacheError):
        materialize(REPO, session="linked", lock_timeout=5)

    assert lure.exists(), "deleted a file outside the cache"


@pytest.mark.parametrize("which", sorted(OWN_FOLDERS))
def test_own_folder_linked_outside_is_not_written_through(scene: Scene, which: str) -> None:
    # Our own folder is as much the cache as the repo folder: a link there must not lead us out.
    _link_own_folder_outside(scene, which)
    before = tree_digest(scene.outside)

    with contextlib.suppress(UnsafeCacheError):
        snap = materialize(REPO, session="linked", lock_timeout=5)
        assert_snapshot_matches(snap.path, scene.files)

    after = tree_digest(scene.outside)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], f"wrote outside the cache through {OWN_FOLDERS[which]}: {changed}"
