"""The fleet tests' storage on its own: what a bucket, a mount, a read-only bind and another host really do."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from reliability.conftest import Child, repo_files

from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import Mount, wait_until
from .storage import DEAD_MOUNT_ERRNOS, MotoServer, Rclone, mounted, read_error

REPO = "org/stored"


def walk(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under ``root``, links not followed: relpath -> ("file", sha256) or ("link", target)."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISREG(mode):
                out[rel] = ("file", hashlib.sha256(full.read_bytes()).hexdigest())
    return out


def test_moto_server_takes_a_bucket_from_rclone(moto_server: MotoServer, rclone: Rclone, tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file.bin").write_bytes(b"\x01" * 1000)

    bucket = rclone.make_bucket()
    rclone.copy(folder, bucket, links=False)

    assert rclone.objects(bucket) == {"hf-cache/sub/file.bin": 1000}
    assert moto_server.proc is not None and moto_server.proc.poll() is None


@pytest.mark.transports("xet", "xet-noshare", "http")
@pytest.mark.parametrize("links", [True, False], ids=["links", "no-links"])
def test_mounted_bucket_of_a_prefetched_cache_shows_its_files_and_no_symlink(
    local_hub: LocalHub, prefetched: Callable[..., Path], s3_layer: Callable[..., Mount], links: bool
) -> None:
    files = repo_files(1)
    commit = local_hub.add_repo(REPO, files)
    writer = prefetched(f"{REPO}@{commit}")

    mount = s3_layer(writer, links=links)

    source, shown = walk(writer), walk(mount.layer)
    assert not [rel for rel, (kind, _) in shown.items() if kind == "link"], "the mount shows a symlink"
    regular = {rel: entry for rel, entry in source.items() if entry[0] == "file"}
    assert {rel: shown.get(rel) for rel in regular} == regular, "a file of the cache is missing or differs"
    symlinks = {rel: target for rel, (kind, target) in source.items() if kind == "link"}
    snapshot = f"models--org--stored/snapshots/{commit}"
    assert {f"{snapshot}/{path}" for path in files} <= set(symlinks)
    for rel, target in symlinks.items():
        assert rel not in shown
        marker = mount.layer / f"{rel}.rclonelink"
        if links:
            assert marker.read_text(encoding="utf-8") == target
        else:
            assert not marker.exists()
    for path, data in files.items():
        blob = Path(os.path.realpath(writer / snapshot / path)).relative_to(writer)
        assert (mount.layer / blob).read_bytes() == data, f"{path}: its blob {blob} does not read back"


@pytest.mark.transports("xet")
def test_mount_refuses_writes(local_hub: LocalHub, tmp_path: Path, s3_layer: Callable[..., Mount]) -> None:
    cache = tmp_path / "cache"
    (cache / "models--org--stored").mkdir(parents=True)
    (cache / "models--org--stored" / "file").write_text("x")
    mount = s3_layer(cache)

    for attempt in (
        lambda: (mount.layer / "new").write_text("y"),
        lambda: (mount.layer / "models--org--stored" / "file").write_text("y"),
        lambda: (mount.layer / "models--org--stored" / "file").unlink(),
        lambda: (mount.layer / "dir").mkdir(),
    ):
        with pytest.raises(OSError) as caught:
            attempt()
        assert caught.value.errno == errno.EROFS
    assert (mount.layer / "models--org--stored" / "file").read_text() == "x"


def test_detached_mount_leaves_the_tree_and_rclone_exits(
    rclone: Rclone, tmp_path: Path, s3_layer: Callable[..., Mount]
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text("tag")
    mount = s3_layer(cache)
    assert (mount.layer / "CACHEDIR.TAG").read_text() == "tag"

    mount.detach()

    assert read_error(mount.layer) == errno.ENOENT
    assert not mounted(mount.path)
    wait_until(lambda: mount.rclone.proc.poll() is not None, "rclone exits once its mount is detached")


def test_crashed_mount_answers_not_connected_until_unmounted(
    rclone: Rclone, tmp_path: Path, s3_layer: Callable[..., Mount]
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text("tag")
    mount = s3_layer(cache)

    mount.crash()

    assert mount.rclone.proc.poll() is not None
    assert read_error(mount.layer / "CACHEDIR.TAG") in DEAD_MOUNT_ERRNOS
    assert mounted(mount.path)
    mount.rclone.stop()
    assert not mounted(mount.path)
    assert read_error(mount.layer) == errno.ENOENT


PROBE = r"""
import json, os, socket, sys
folder = sys.argv[1]
out = {"host": socket.gethostname(), "pid": os.getpid(), "files": sorted(os.listdir(folder))}
try:
    open(os.path.join(folder, "written-inside"), "w").close()
    out["write"] = "ok"
except OSError as error:
    out["write"] = error.errno
print(json.dumps(out))
"""


def test_read_only_bind_shows_the_folder_and_refuses_writes_inside_its_namespace_only(
    tmp_path: Path, read_only_bind: Callable[..., tuple[list[str], Path]]
) -> None:
    source = tmp_path / "baked"
    source.mkdir()
    (source / "CACHEDIR.TAG").write_text("tag")
    prefix, folder = read_only_bind(source, hostname="fleet-ro")

    done = subprocess.run([*prefix, sys.executable, "-c", PROBE, str(folder)], capture_output=True, text=True)

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"host": "fleet-ro", "pid": seen["pid"], "files": ["CACHEDIR.TAG"], "write": errno.EROFS}
    assert os.listdir(folder) == [], "the bind mount leaked out of its namespace"
    assert sorted(os.listdir(source)) == ["CACHEDIR.TAG"]


def test_two_hosts_share_one_folder_under_their_own_names(tmp_path: Path, two_hosts: dict[str, list[str]]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    seen = {}
    for name, prefix in two_hosts.items():
        child = Child({"action": "hf_download", "go": str(tmp_path / "never")}, prefix=prefix)
        pid, host = child.expect("ready")
        seen[name] = host
        assert int(pid) == child.pid, "the pid we started is not the pid that runs (signals would miss it)"
        child.kill()
        done = subprocess.run([*prefix, sys.executable, "-c", PROBE, str(shared)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert seen == {name: name for name in two_hosts}
    assert socket.gethostname() not in seen
    assert os.listdir(shared) == ["written-inside"]
