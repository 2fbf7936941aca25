"""Read-only cache layers (CONTRACT section 7): what a layer holds is linked, never fetched or copied,
and nothing is ever written into it.

Each layer here is made as a fleet makes one: a prefetch from the local Hub into a scratch cache,
then a copy of that cache, with its symlinks, with them followed (``shutil.copytree(symlinks=False)``),
or without any (what ``rclone copy`` leaves, or a mount of a bucket shows: blobs and records, no links;
``rclone copy --links`` leaves ``NAME.rclonelink`` files instead).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import file_fetches
from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download

from pytest_hfsnapshot import HfSnapshotWarning, InvalidRequestError, Snapshot, materialize
from pytest_hfsnapshot.core.cache.layout import OWN_DIR, RepoCache
from pytest_hfsnapshot.core.engine.engine import plan_request
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.settings import Settings
from pytest_hfsnapshot.testing.hub import LocalHub

ALL = pytest.mark.transports("xet", "xet-noshare", "http")
WEIGHTS = bytes(range(256)) * 256  # 64 KiB, LFS by name
FILES: dict[str, bytes | str] = {
    "config.json": '{"model_type": "bert"}',
    "tokenizer_config.json": "{}",
    "model.safetensors": WEIGHTS,
    "nested/vocab.txt": "a\nb\nc\n",
    "special_tokens_map.json": "{}",  # the same blob as tokenizer_config.json
}
COPIES = ("symlinks", "followed", "no-links", "rclonelink")
#: Blobs of the repo: what a cold download fetches.
BLOBS = len({value if isinstance(value, bytes) else value.encode() for value in FILES.values()})


def content(path: str) -> bytes:
    value = FILES[path]
    return value.encode() if isinstance(value, str) else value


def copy_cache(source: Path, dest: Path, how: str) -> Path:
    """A copy of the cache ``source`` at ``dest``, the way ``how`` names (see the module docstring)."""
    if how == "symlinks":
        shutil.copytree(source, dest, symlinks=True)
    elif how == "followed":
        shutil.copytree(source, dest, symlinks=False)
    else:
        for folder, dirs, names in os.walk(source):
            target = dest / Path(folder).relative_to(source)
            target.mkdir(parents=True, exist_ok=True)
            for name in dirs + names:
                path = Path(folder, name)
                if path.is_symlink():
                    if how == "rclonelink":
                        (target / f"{name}.rclonelink").write_text(os.readlink(path))
                elif path.is_file():
                    shutil.copy2(path, target / name)
            dirs[:] = [d for d in dirs if not Path(folder, d).is_symlink()]
    return dest


def digest(root: Path) -> dict[str, str]:
    """Every entry under ``root``: its kind, mode and link target or content hash (times aside)."""
    out: dict[str, str] = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(folder, name)
            st = os.lstat(path)
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "-> " + os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = f"dir {st.st_mode:o}"
            else:
                out[rel] = f"{st.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


def transfers(hub: LocalHub) -> int:
    """Body bytes of file contents the local Hub sent (resolve, CDN and CAS)."""
    return hub.served("*/resolve/*") + hub.served("*/xorbs/*") + hub.served("*/reconstructions/*")


def layer_files(snap: Snapshot, layer: Path) -> list[str]:
    """The snapshot's files whose bytes are read from ``layer``."""
    return sorted(f for f in snap.files if os.path.realpath(snap / f).startswith(str(layer) + os.sep))


@pytest.fixture
def commit(local_hub: LocalHub) -> str:
    return local_hub.add_repo("org/tiny", FILES)


@pytest.fixture
def scratch(local_hub: LocalHub, commit: str, tmp_path: Path) -> Path:
    """A cache a prefetch filled (the writer job's), then the counters reset."""
    cache = tmp_path / "scratch"
    materialize("org/tiny", cache_dir=cache)
    local_hub.reset_counters()
    return cache


@pytest.fixture
def layer(scratch: Path, tmp_path: Path) -> Path:
    """The writer job's cache copied without any symlink, as rclone leaves it."""
    return copy_cache(scratch, tmp_path / "layer", "no-links")


# --- serving -------------------------------------------------------------------------------------


@ALL
@pytest.mark.parametrize("how", COPIES)
def test_a_complete_layer_is_served_with_no_transfer_and_no_copy(
    local_hub: LocalHub, scratch: Path, tmp_path: Path, commit: str, how: str
) -> None:
    layer = copy_cache(scratch, tmp_path / "layer", how)
    before = digest(layer)

    snap = materialize("org/tiny", cache_layers=[layer])

    assert snap.source == "layer"
    assert snap.layers == (str(layer),)
    assert snap.path == local_hub.cache_dir / "models--org--tiny" / "snapshots" / commit
    assert snap.files == tuple(sorted(FILES))
    assert all((snap / name).read_bytes() == content(name) for name in FILES)
    assert layer_files(snap, layer) == sorted(FILES)
    # No copy: the writable cache holds links only (its blobs are links into the layer).
    repo = RepoCache(local_hub.cache_dir, "org/tiny", "model")
    assert all(entry.is_symlink() for entry in repo.blobs.iterdir())
    assert transfers(local_hub) == 0
    assert [path for _, path, _ in local_hub.requests] == ["/api/models/org/tiny/revision/main"]
    assert digest(layer) == before
    # huggingface_hub's cache tools read the links as they read any cache.
    scan = scan_cache_dir(local_hub.cache_dir)
    assert scan.warnings == []
    assert [(r.repo_id, r.nb_files) for r in scan.repos] == [("org/tiny", BLOBS)]


@ALL
def test_test_code_loading_by_repo_id_finds_the_layer_files(local_hub: LocalHub, layer: Path, commit: str) -> None:
    snap = materialize("org/tiny", cache_layers=[layer])
    local_hub.reset_counters()

    assert snapshot_download("org/tiny", local_files_only=True) == str(snap.path)
    assert Path(hf_hub_download("org/tiny", "model.safetensors", local_files_only=True)).read_bytes() == WEIGHTS
    # Online, the client asks for the revision and finds every file in place.
    assert snapshot_download("org/tiny") == str(snap.path)
    assert transfers(local_hub) == 0


@ALL
def test_deleting_the_revision_with_the_cache_tools_leaves_the_layer_whole(
    local_hub: LocalHub, layer: Path, commit: str
) -> None:
    before = digest(layer)
    materialize("org/tiny", cache_layers=[layer])

    scan_cache_dir(local_hub.cache_dir).delete_revisions(commit).execute()

    assert not RepoCache(local_hub.cache_dir, "org/tiny", "model").root.exists()
    assert digest(layer) == before


def test_materialize_reads_the_layers_from_the_environment_when_given_none(
    local_hub: LocalHub, layer: Path, commit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_CACHE_LAYERS", os.pathsep.join([str(tmp_path / "unused"), str(layer)]))
    (tmp_path / "unused").mkdir()

    snap = materialize("org/tiny")

    assert snap.source == "layer"
    assert snap.layers == (str(layer),)
    assert transfers(local_hub) == 0


def test_a_bad_layer_in_the_environment_names_the_variable(
    local_hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_CACHE_LAYERS", str(tmp_path / "no-such-layer"))

    with pytest.raises(InvalidRequestError, match=r"HFSNAPSHOT_CACHE_LAYERS.*no-such-layer.*does not exist"):
        materialize("org/tiny")
    assert local_hub.requests == []


@ALL
def test_a_pinned_commit_in_a_layer_costs_no_request(local_hub: LocalHub, layer: Path, commit: str) -> None:
    snap = materialize("org/tiny", revision=commit, cache_layers=[layer])

    assert snap.source == "layer"
    assert local_hub.requests == []


@ALL
@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_a_branch_in_a_pin_file_is_served_from_a_layer_with_no_request(
    local_hub: LocalHub, layer: Path, commit: str, tmp_path: Path, offline: bool
) -> None:
    pins = tmp_path / "hf-pins.json"
    entry = {"repo_id": "org/tiny", "repo_type": "model", "revision": "main", "commit": commit}
    pins.write_text(json.dumps([entry], indent=2) + "\n")
    # The branch moves on the Hub: the pin, not the Hub, says which commit the run uses.
    local_hub.add_repo("org/tiny", {**FILES, "config.json": '{"moved": true}'})
    local_hub.reset_counters()

    snap = materialize("org/tiny", pins=pins, cache_layers=[layer], offline=offline)

    assert (snap.source, snap.commit) == ("layer", commit)
    assert local_hub.requests == []


@ALL
def test_offline_with_an_empty_writable_cache_uses_the_layer_ref(local_hub: LocalHub, layer: Path, commit: str) -> None:
    snap = materialize("org/tiny", offline=True, cache_layers=[layer])

    assert (snap.source, snap.commit) == ("layer", commit)
    assert local_hub.requests == []
    # The writable cache now has the ref and the listing the client's own offline calls read.
    assert snapshot_download("org/tiny", local_files_only=True) == str(snap.path)


@ALL
def test_the_cache_fast_path_names_the_layer_in_later_sessions(local_hub: LocalHub, layer: Path, commit: str) -> None:
    materialize("org/tiny", cache_layers=[layer], session="one")
    local_hub.reset_counters()

    again = materialize("org/tiny", revision=commit, cache_layers=[layer], session="two")

    assert (again.source, again.layers) == ("layer", (str(layer),))
    assert local_hub.requests == []


@ALL
def test_layers_are_searched_in_order_each_file_from_the_first_holding_it(
    local_hub: LocalHub, scratch: Path, tmp_path: Path
) -> None:
    first = copy_cache(scratch, tmp_path / "first", "no-links")
    second = copy_cache(scratch, tmp_path / "second", "followed")
    weights = RepoCache(first, "org/tiny", "model")
    for path in [*weights.blobs.iterdir(), *(first / "blobs").rglob("*")]:
        if path.is_file() and path.stat().st_size == len(WEIGHTS):
            path.unlink()  # the first layer lacks the weights

    snap = materialize("org/tiny", cache_layers=[first, second])

    assert snap.source == "layer"
    assert snap.layers == (str(first), str(second))
    assert layer_files(snap, second) == ["model.safetensors"]
    assert transfers(local_hub) == 0


# --- what a layer lacks or holds damaged ---------------------------------------------------------


def layer_bytes(layer: Path, name: str) -> list[Path]:
    """The layer's files holding ``name``'s bytes (its repo blob, its store file, or both)."""
    wanted = content(name)
    return [p for p in layer.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes() == wanted]


@ALL
@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_only_the_files_missing_or_damaged_in_a_layer_are_fetched(
    local_hub: LocalHub, layer: Path, damage: str
) -> None:
    for path in layer_bytes(layer, "model.safetensors"):
        path.chmod(0o644)
        if damage == "missing":
            path.unlink()
        else:
            os.truncate(path, 100)
    before = digest(layer)

    snap = materialize("org/tiny", cache_layers=[layer])

    assert snap.source == "download"
    assert file_fetches(local_hub, "*/resolve/*/model.safetensors") == 1
    assert file_fetches(local_hub, "*/resolve/*") == 1
    assert layer_files(snap, layer) == sorted(set(FILES) - {"model.safetensors"})
    assert (snap / "model.safetensors").read_bytes() == WEIGHTS
    assert digest(layer) == before


def flip_a_byte(path: Path) -> None:
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@ALL
def test_a_flipped_byte_the_record_vouches_for_is_caught_by_sha256(local_hub: LocalHub, layer: Path) -> None:
    for path in layer_bytes(layer, "model.safetensors"):
        flip_a_byte(path)

    snap = materialize("org/tiny", cache_layers=[layer], verify="sha256")

    assert snap.source == "download"
    assert file_fetches(local_hub, "*/resolve/*") == 1
    assert (snap / "model.safetensors").read_bytes() == WEIGHTS


@ALL
def test_files_no_record_vouches_for_are_hashed_before_they_are_served(local_hub: LocalHub, layer: Path) -> None:
    shutil.rmtree(layer / OWN_DIR)
    for path in layer_bytes(layer, "model.safetensors"):
        flip_a_byte(path)

    snap = materialize("org/tiny", cache_layers=[layer])

    assert file_fetches(local_hub, "*/resolve/*") == 1
    assert (snap / "model.safetensors").read_bytes() == WEIGHTS
    assert layer_files(snap, layer) == sorted(set(FILES) - {"model.safetensors"})


@ALL
def test_an_unfinished_download_beside_a_layer_blob_keeps_that_file_out(
    local_hub: LocalHub, scratch: Path, tmp_path: Path, commit: str
) -> None:
    from pytest_hfsnapshot.testing import half_written

    half_written.orphan_incomplete(scratch, "org/tiny", "config.json")
    layer = copy_cache(scratch, tmp_path / "layer", "no-links")

    snap = materialize("org/tiny", cache_layers=[layer])

    assert file_fetches(local_hub, "*/resolve/*") == 1
    assert file_fetches(local_hub, "*/resolve/*/config.json") == 1
    assert "config.json" not in layer_files(snap, layer)


@ALL
def test_a_record_of_another_selection_vouches_for_the_files_it_lists(
    local_hub: LocalHub, commit: str, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    materialize("org/tiny", cache_dir=scratch, allow_patterns=["*.json"])
    layer = copy_cache(scratch, tmp_path / "layer", "no-links")
    local_hub.reset_counters()

    snap = materialize("org/tiny", cache_layers=[layer])

    assert snap.source == "download"
    assert layer_files(snap, layer) == sorted(name for name in FILES if name.endswith(".json"))
    assert file_fetches(local_hub, "*/resolve/*") == 2


@ALL
def test_a_layer_without_the_repo_changes_nothing(local_hub: LocalHub, commit: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty-layer"
    empty.mkdir()

    snap = materialize("org/tiny", cache_layers=[empty])

    assert (snap.source, snap.layers) == ("download", ())
    assert file_fetches(local_hub, "*/resolve/*") == BLOBS
    assert list(empty.iterdir()) == []


# --- links into layers, in sessions with and without them ----------------------------------------


@ALL
def test_links_into_a_layer_this_session_lacks_are_damage(local_hub: LocalHub, layer: Path, commit: str) -> None:
    materialize("org/tiny", cache_layers=[layer], session="with")
    local_hub.reset_counters()

    snap = materialize("org/tiny", session="without")

    assert snap.source == "repair"
    assert sorted(snap.repaired) == sorted(FILES)
    assert file_fetches(local_hub, "*/resolve/*") == BLOBS
    assert layer_files(snap, layer) == []
    assert all((snap / name).read_bytes() == content(name) for name in FILES)


@ALL
def test_links_into_a_layer_are_repaired_from_another_layer(
    local_hub: LocalHub, scratch: Path, layer: Path, tmp_path: Path
) -> None:
    materialize("org/tiny", cache_layers=[layer], session="with")
    other = copy_cache(scratch, tmp_path / "other", "followed")
    local_hub.reset_counters()

    snap = materialize("org/tiny", cache_layers=[other], session="other")

    assert (snap.source, snap.layers) == ("layer", (str(other),))
    assert sorted(snap.repaired) == sorted(FILES)
    assert layer_files(snap, other) == sorted(FILES)
    assert transfers(local_hub) == 0


@ALL
def test_damage_in_the_writable_cache_is_repaired_from_a_layer(local_hub: LocalHub, layer: Path) -> None:
    from pytest_hfsnapshot.testing import half_written

    materialize("org/tiny", session="before")
    half_written.truncated_blob(local_hub.cache_dir, "org/tiny", "model.safetensors")
    local_hub.reset_counters()

    snap = materialize("org/tiny", cache_layers=[layer], session="after")

    assert (snap.source, snap.repaired) == ("layer", ("model.safetensors",))
    assert layer_files(snap, layer) == ["model.safetensors"]
    assert (snap / "model.safetensors").read_bytes() == WEIGHTS
    assert transfers(local_hub) == 0


# --- bad layer paths -----------------------------------------------------------------------------


@pytest.mark.transports("xet")
def test_a_layer_that_cannot_be_used_is_an_invalid_request(local_hub: LocalHub, commit: str, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = {
        tmp_path / "nowhere": "does not exist",
        a_file: "is not a folder",
        local_hub.cache_dir: "overlaps the writable cache",
        local_hub.cache_dir.parent: "overlaps the writable cache",
    }
    for path, words in cases.items():
        with pytest.raises(InvalidRequestError, match=words) as caught:
            materialize("org/tiny", cache_layers=[path])
        assert str(path) in str(caught.value)
    with pytest.raises(InvalidRequestError, match="give a list of folders"):
        materialize("org/tiny", cache_layers=str(tmp_path))  # type: ignore[arg-type]
    assert local_hub.requests == []


# --- prefetch ------------------------------------------------------------------------------------


@ALL
def test_prefetch_fetches_nothing_a_layer_holds(
    local_hub: LocalHub, layer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_hfsnapshot.cli import main

    request = SnapshotRequest.build("org/tiny")
    assert plan_request(request, Settings(cache_layers=[layer])).blobs == ()
    local_hub.reset_counters()

    assert main(["prefetch", "--repo", "org/tiny", "--cache-layer", str(layer)]) == 0

    assert f"org/tiny@main ready (layer, {len(FILES)} files" in capsys.readouterr().out
    assert transfers(local_hub) == 0


# --- never written into --------------------------------------------------------------------------


def can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@ALL
@pytest.mark.skipif(not can_unshare(), reason="needs root and unshare -m (a private mount namespace)")
def test_a_read_only_bind_mount_is_served_and_never_written(local_hub: LocalHub, layer: Path, tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    before = digest(layer)
    script = textwrap.dedent(
        f"""
        import os, sys
        from pytest_hfsnapshot import materialize
        try:
            open(os.path.join({str(mount)!r}, "probe"), "w")
        except OSError as error:
            print("write refused:", error.strerror)
        snap = materialize("org/tiny", cache_layers=[{str(mount)!r}])
        print(snap.source, snap.layers)
        snap = materialize("org/tiny", cache_layers=[{str(mount)!r}], verify="sha256", session="again")
        print(snap.source, snap.layers)
        """
    )
    shell = (
        f"mount --bind {layer} {mount} && mount -o remount,bind,ro {mount} && {sys.executable} -c {shlex_quote(script)}"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", shell], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "write refused: Read-only file system",
        f"layer ('{mount}',)",
        f"layer ('{mount}',)",
    ]
    assert transfers(local_hub) == 0
    assert digest(layer) == before


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


# --- a layer that dies during the session ---------------------------------------------------------


def can_fuse() -> bool:
    return (
        os.geteuid() == 0
        and shutil.which("rclone") is not None
        and shutil.which("fusermount") is not None
        and os.path.exists("/dev/fuse")
    )


@pytest.fixture
def rclone_mount(tmp_path: Path) -> Iterator[Callable[[Path], tuple[Path, subprocess.Popen[bytes]]]]:
    """Serve a folder by ``rclone mount --read-only`` (rclone's local backend), as a bucket would be:
    returns the mount point and the rclone process; every mount is gone at the end."""
    started: list[tuple[Path, subprocess.Popen[bytes]]] = []
    env = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}

    def mount(source: Path) -> tuple[Path, subprocess.Popen[bytes]]:
        point = tmp_path / f"mnt-{len(started)}"
        point.mkdir()
        command = ["rclone", "mount", str(source), str(point), "--read-only", "--config", os.devnull]
        rclone = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append((point, rclone))
        deadline = time.monotonic() + 30
        while not os.path.ismount(point):
            if rclone.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"rclone mount of {source} did not come up (exit {rclone.poll()})")
            time.sleep(0.05)
        return point, rclone

    try:
        yield mount
    finally:
        for point, rclone in started:
            subprocess.run(["fusermount", "-u", "-z", str(point)], capture_output=True)
            if rclone.poll() is None:
                rclone.kill()
            rclone.wait(timeout=30)


@pytest.fixture(params=["mount point", "below it"])
def mounted(
    request: pytest.FixtureRequest,
    layer: Path,
    tmp_path: Path,
    rclone_mount: Callable[[Path], tuple[Path, subprocess.Popen[bytes]]],
) -> tuple[Path, Path, subprocess.Popen[bytes]]:
    """``layer`` on an rclone mount: ``(the layer's path, the mount point, rclone)``; the layer is the
    mount point itself, or a folder below it (a bucket's ``hf-cache/``)."""
    if request.param == "mount point":
        point, rclone = rclone_mount(layer)
        return point, point, rclone
    bucket = tmp_path / "bucket"
    shutil.copytree(layer, bucket / "hf-cache", symlinks=True)
    point, rclone = rclone_mount(bucket)
    return point / "hf-cache", point, rclone


def wait_until_dead(point: Path, below: list[str]) -> None:
    """Poll until the mount answers as a dead one at its point and at every path of ``below``: the
    kernel serves a dead FUSE mount's cached attributes until they time out, entry by entry, so a
    layer's files can still be stat'ed for a moment after the mount point fails."""
    deadline = time.monotonic() + 30
    alive = [str(point), *below]
    while time.monotonic() < deadline:
        still = []
        for path in alive:
            try:
                os.lstat(path)
            except OSError as error:
                assert error.errno == errno.ENOTCONN, (path, error)
            else:
                still.append(path)
        if not still:
            return
        alive = still
        time.sleep(0.05)
    pytest.fail(f"{alive[:3]} still answer after the rclone of {point} was killed")


@ALL
@pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse, rclone and fusermount")
@pytest.mark.parametrize("death", ["unmounted", "killed"])
def test_a_mount_that_dies_is_left_with_one_warning(
    local_hub: LocalHub, mounted: tuple[Path, Path, subprocess.Popen[bytes]], death: str
) -> None:
    root, point, rclone = mounted
    snap = materialize("org/tiny", cache_layers=[root], session="s")
    assert (snap.source, snap.layers) == ("layer", (str(root),))
    local_hub.reset_counters()

    if death == "unmounted":
        subprocess.run(["fusermount", "-u", "-z", str(point)], check=True)
    else:
        below = [os.path.join(top, name) for top, dirs, files in os.walk(root) for name in (*dirs, *files)]
        rclone.kill()
        rclone.wait(timeout=30)
        wait_until_dead(point, below)

    with pytest.warns(HfSnapshotWarning, match=re.escape(f"the cache layer {root} failed")) as caught:
        again = materialize("org/tiny", cache_layers=[root], session="s")
        other = materialize("org/tiny", cache_layers=[root], session="s", allow_patterns=["*.json"])
    assert len([w for w in caught if issubclass(w.category, HfSnapshotWarning)]) == 1
    assert (again.source, again.layers) == ("repair", ())
    assert (other.source, other.layers) == ("cache", ())
    assert file_fetches(local_hub, "*/resolve/*") == BLOBS
    assert all((again / name).read_bytes() == content(name) for name in FILES)
