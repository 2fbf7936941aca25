"""Each half-written state is what huggingface_hub really leaves, and ``materialize`` repairs it.

Every cache here is filled by a real ``snapshot_download`` from the local Hub. A test damages it,
checks the damage on disk, shows what the client alone does with it, then proves that
``materialize`` returns a verified snapshot, fetching only the damaged file and restoring the
cache to exactly its pristine state (our ``.hfsnapshot/``, the client's ``.locks/`` and
``CACHEDIR.TAG`` aside).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import pytest
from conftest import file_fetches, xet_in_use
from filelock import SoftFileLease
from huggingface_hub import snapshot_download
from huggingface_hub.errors import LocalEntryNotFoundError

from pytest_hfsnapshot import LockTimeoutError, OfflineMissingError, Snapshot, materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.cache.locking import RepoLock
from pytest_hfsnapshot.testing import half_written as hw
from pytest_hfsnapshot.testing.half_written import HalfWritten
from pytest_hfsnapshot.testing.hub import LocalHub

OURS_OR_CLIENTS = {".locks", "CACHEDIR.TAG"}
ORPHAN_RE = re.compile(r"^(?P<etag>[0-9a-f]{40}|[0-9a-f]{64})\.[0-9a-f]{8}\.incomplete$")

# Each state is made of blobs and links, which each transfer path lays out its own way; the tests of
# locks and of the helpers' argument checks run once.
pytestmark = pytest.mark.transports("xet", "xet-noshare", "http")

# Per repo type: the files, the largest one (what an interrupted download loses) and a small one.
REPOS: dict[str, tuple[str, dict[str, bytes | str], str, str]] = {
    "model": (
        "org/tiny",
        {
            "config.json": '{"model_type": "bert"}',
            "tokenizer.json": '{"vocab": ' + '"x", ' * 200 + '"y"}',
            "model.safetensors": bytes(range(256)) * 96,
        },
        "model.safetensors",
        "config.json",
    ),
    "dataset": (
        "org/tiny-set",
        {"README.md": "# tiny set\n", "data/train.csv": "a,b\n" + "1,2\n" * 3000, "data/test.csv": "a,b\n1,2\n"},
        "data/train.csv",
        "data/test.csv",
    ),
    "space": (
        "org/tiny-space",
        {"README.md": "---\nsdk: gradio\n---\n", "app.py": "print('hi')\n" * 400, "requirements.txt": "gradio\n"},
        "app.py",
        "requirements.txt",
    ),
}


@dataclass
class Cached:
    """One repo fetched by ``snapshot_download`` into the local Hub's cache, beside a neighbour repo."""

    hub: LocalHub
    cache: Path
    repo_id: str
    repo_type: str
    commit: str
    files: dict[str, bytes]
    largest: str
    small: str
    pristine: dict[str, str]

    @property
    def repo(self) -> RepoCache:
        return RepoCache(self.cache, self.repo_id, self.repo_type)

    def resolve_path(self, filename: str) -> str:
        prefix = "" if self.repo_type == "model" else f"/{self.repo_type}s"
        return f"{prefix}/{self.repo_id}/resolve/{self.commit}/{filename}"

    def materialize(self, **kwargs: object) -> Snapshot:
        # A fresh session id resolves the branch again, as a new test session would.
        kwargs.setdefault("session", "after")
        return materialize(self.repo_id, repo_type=self.repo_type, cache_dir=self.cache, **kwargs)  # type: ignore[arg-type]


def digest(cache: Path) -> dict[str, str]:
    """Every entry of the cache (ours and the client's lock folder aside): link target, or content hash."""
    out: dict[str, str] = {}
    for folder, dirs, names in os.walk(cache):
        rel = Path(folder).relative_to(cache)
        if rel == Path("."):
            dirs[:] = [d for d in dirs if d not in OURS_OR_CLIENTS]
            names = [n for n in names if n not in OURS_OR_CLIENTS]
        for name in dirs:
            out[(rel / name).as_posix()] = "dir"
        for name in names:
            path = Path(folder, name)
            if path.is_symlink():
                out[(rel / name).as_posix()] = "-> " + os.readlink(path)
            else:
                out[(rel / name).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def shared_store_file(cached: Cached, filename: str) -> Path | None:
    """The shared-store file a cached file resolves to (Xet path), or None for a repo-local blob."""
    target = Path(os.path.realpath(cached.repo.link(cached.commit, filename)))
    return target if target.parent.parent == cached.cache / "blobs" else None


def orphans(repo: RepoCache) -> list[str]:
    return sorted(p.name for p in repo.blobs.iterdir() if p.name.endswith(".incomplete"))


@pytest.fixture(params=["model", "model-verified", "dataset", "space"])
def cached(request: pytest.FixtureRequest, local_hub: LocalHub) -> Cached:
    """``-verified``: ``materialize`` had already recorded the snapshot as complete before the damage."""
    repo_type = request.param.split("-")[0]
    repo_id, files, largest, small = REPOS[repo_type]
    commit = local_hub.add_repo(repo_id, files, repo_type=repo_type)
    local_hub.add_repo("org/neighbour", {"config.json": "{}", "model.safetensors": b"n" * 1000})
    assert local_hub.cache_dir is not None
    snapshot_download(repo_id, repo_type=repo_type)
    snapshot_download("org/neighbour")
    if request.param.endswith("-verified"):
        assert materialize(repo_id, repo_type=repo_type, cache_dir=local_hub.cache_dir, session="before").files
    raw = {path: data.encode() if isinstance(data, str) else data for path, data in files.items()}
    cache = local_hub.cache_dir
    return Cached(local_hub, cache, repo_id, repo_type, commit, raw, largest, small, digest(cache))


def assert_repaired(cached: Cached, snap: Snapshot, fetched: list[str], *, source: str = "repair") -> None:
    """A verified snapshot, only ``fetched`` downloaded, the cache back to its pristine state."""
    assert snap.source == source
    assert snap.commit == cached.commit
    assert snap.files == tuple(sorted(cached.files))
    for path, data in cached.files.items():
        assert (snap / path).read_bytes() == data
    assert [f for f in sorted(cached.files) if file_fetches(cached.hub, cached.resolve_path(f))] == sorted(fetched)
    assert all(file_fetches(cached.hub, cached.resolve_path(f)) == 1 for f in fetched)
    if not xet_in_use(cached.hub):
        # Over plain HTTP the bytes on the wire are the files' (Xet compresses and deduplicates).
        assert cached.hub.served("*/resolve/*") == sum(len(cached.files[f]) for f in fetched)
    assert orphans(cached.repo) == []
    assert digest(cached.cache) == cached.pristine


# --- interrupted_download --------------------------------------------------------------------------


def test_interrupted_download(cached: Cached, half_written: HalfWritten) -> None:
    repo = cached.repo
    store = shared_store_file(cached, cached.largest)
    touched = half_written.interrupted_download(cached.repo_id, repo_type=cached.repo_type)

    link, blob, orphan = touched[0], touched[1], touched[-1]
    assert link == repo.link(cached.commit, cached.largest) and not os.path.lexists(link)
    assert blob.parent == repo.blobs and not os.path.lexists(blob)
    # On the Xet path a killed download has published nothing to the shared store yet.
    assert touched[2:-1] == ([] if store is None else [store.with_name(store.name + ".refs"), store])
    assert store is None or not store.exists()
    match = ORPHAN_RE.match(orphan.name)
    assert match and match["etag"] == blob.name and orphan.parent == repo.blobs
    data = cached.files[cached.largest]
    assert orphan.read_bytes() == data[: len(data) // 2]
    assert repo.refs.read("main") == cached.commit and repo.tree_cache(cached.commit).is_file()
    assert all(repo.link(cached.commit, f).exists() for f in cached.files if f != cached.largest)

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [cached.largest])


def test_interrupted_download_hf_alone_leaves_the_orphan_forever(local_hub: LocalHub) -> None:
    repo_id, files, largest, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    orphan = hw.interrupted_download(local_hub.cache_dir, repo_id)[-1]

    for _ in range(2):
        folder = snapshot_download(repo_id)
        assert Path(folder, largest).read_bytes() == files[largest]
    assert orphan.exists()


def test_interrupted_download_offline_names_the_missing_file(cached: Cached, half_written: HalfWritten) -> None:
    half_written.interrupted_download(cached.repo_id, repo_type=cached.repo_type)
    cached.hub.reset_counters()
    with pytest.raises(OfflineMissingError) as excinfo:
        cached.materialize(offline=True)
    assert excinfo.value.missing == (cached.largest,)
    assert cached.hub.requests == []


# --- missing_file ----------------------------------------------------------------------------------


def test_missing_file(cached: Cached, half_written: HalfWritten) -> None:
    repo = cached.repo
    blob_before = os.path.realpath(repo.link(cached.commit, cached.largest))
    (link,) = half_written.missing_file(cached.repo_id, cached.largest, repo_type=cached.repo_type)

    assert link == repo.link(cached.commit, cached.largest) and not os.path.lexists(link)
    assert Path(blob_before).read_bytes() == cached.files[cached.largest]

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [])
    assert snap.repaired == (cached.largest,)


# --- truncated_blob --------------------------------------------------------------------------------


def test_truncated_blob(cached: Cached, half_written: HalfWritten) -> None:
    data = cached.files[cached.largest]
    (blob,) = half_written.truncated_blob(cached.repo_id, cached.largest, repo_type=cached.repo_type)

    assert blob == Path(os.path.realpath(cached.repo.link(cached.commit, cached.largest)))
    assert blob.read_bytes() == data[: len(data) // 2]

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [cached.largest])
    assert snap.repaired == (cached.largest,)


def test_truncated_blob_hf_alone_serves_it(local_hub: LocalHub) -> None:
    repo_id, files, largest, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    hw.truncated_blob(local_hub.cache_dir, repo_id, largest)

    for offline in (False, True):
        folder = snapshot_download(repo_id, local_files_only=offline)
        assert os.path.getsize(Path(folder, largest)) == len(files[largest]) // 2


# --- corrupted_blob --------------------------------------------------------------------------------


def test_corrupted_blob(cached: Cached, half_written: HalfWritten) -> None:
    data = cached.files[cached.largest]
    (blob,) = half_written.corrupted_blob(cached.repo_id, cached.largest, repo_type=cached.repo_type)

    damaged = blob.read_bytes()
    assert len(damaged) == len(data)
    assert [i for i in range(len(data)) if damaged[i] != data[i]] == [len(data) // 2]

    cached.hub.reset_counters()
    assert cached.materialize(verify="size").source != "repair"  # a size check cannot see it
    snap = cached.materialize(verify="sha256", session="again")
    assert_repaired(cached, snap, [cached.largest])
    assert snap.repaired == (cached.largest,)


def test_corrupted_blob_hf_alone_serves_it(local_hub: LocalHub) -> None:
    repo_id, files, largest, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    hw.corrupted_blob(local_hub.cache_dir, repo_id, largest)

    for offline in (False, True):
        got = Path(snapshot_download(repo_id, local_files_only=offline), largest).read_bytes()
        assert len(got) == len(files[largest]) and got != files[largest]


# --- dangling_link ---------------------------------------------------------------------------------


def test_dangling_link(cached: Cached, half_written: HalfWritten) -> None:
    link = cached.repo.link(cached.commit, cached.largest)
    (blob,) = half_written.dangling_link(cached.repo_id, cached.largest, repo_type=cached.repo_type)

    assert link.is_symlink() and not link.exists()
    assert Path(os.path.realpath(link)) == blob
    # The repo's blob, or on the Xet path the shared-store file its blob links to.
    assert blob.parent == cached.repo.blobs or blob.parent.parent == cached.cache / "blobs"

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [cached.largest])
    assert snap.repaired == (cached.largest,)


# --- orphan_incomplete -----------------------------------------------------------------------------


def test_orphan_incomplete(cached: Cached, half_written: HalfWritten) -> None:
    data = cached.files[cached.largest]
    (orphan,) = half_written.orphan_incomplete(cached.repo_id, cached.largest, repo_type=cached.repo_type)

    match = ORPHAN_RE.match(orphan.name)
    assert match and orphan.parent == cached.repo.blobs
    assert match["etag"] == os.path.basename(os.readlink(cached.repo.link(cached.commit, cached.largest)))
    assert orphan.read_bytes() == data[: len(data) // 2]
    assert cached.repo.link(cached.commit, cached.largest).read_bytes() == data

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [])


def test_orphan_incomplete_hf_alone_keeps_it(local_hub: LocalHub) -> None:
    repo_id, files, _, small = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    (orphan,) = hw.orphan_incomplete(local_hub.cache_dir, repo_id, small)

    snapshot_download(repo_id)
    snapshot_download(repo_id, force_download=True)
    assert orphan.exists()


def test_orphan_incomplete_offline(cached: Cached, half_written: HalfWritten) -> None:
    # Was a bug: offline, materialize handed out the snapshot and left the orphan beside it.
    half_written.orphan_incomplete(cached.repo_id, cached.largest, repo_type=cached.repo_type)
    cached.hub.reset_counters()
    snap = cached.materialize(offline=True)
    assert snap.files == tuple(sorted(cached.files)) and cached.hub.requests == []
    assert orphans(cached.repo) == []


# --- empty_ref and garbage_ref ---------------------------------------------------------------------


@pytest.mark.parametrize("state", ["empty_ref", "garbage_ref"])
def test_broken_ref(cached: Cached, half_written: HalfWritten, state: str) -> None:
    (ref,) = getattr(half_written, state)(cached.repo_id, repo_type=cached.repo_type)

    assert ref == cached.repo.ref("main")
    assert ref.read_bytes() == (b"" if state == "empty_ref" else b"\0" * 40)
    assert cached.repo.refs.read("main") is None

    cached.hub.reset_counters()
    snap = cached.materialize()
    assert_repaired(cached, snap, [])
    assert ref.read_text() == cached.commit


def test_empty_ref_hf_alone_offline_returns_the_snapshots_folder(local_hub: LocalHub) -> None:
    repo_id, files, _, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    hw.empty_ref(local_hub.cache_dir, repo_id)

    folder = snapshot_download(repo_id, local_files_only=True)
    assert Path(folder) == RepoCache(local_hub.cache_dir, repo_id, "model").root / "snapshots"


def test_garbage_ref_hf_alone_offline_loses_a_complete_snapshot(local_hub: LocalHub) -> None:
    repo_id, files, _, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    hw.garbage_ref(local_hub.cache_dir, repo_id)

    with pytest.raises(LocalEntryNotFoundError):
        snapshot_download(repo_id, local_files_only=True)


# --- stale_lock ------------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.transports("xet")
@pytest.mark.parametrize(("host", "lease"), [(None, None), ("ci-runner-7", None), ("ci-runner-7", "30")])
def test_stale_lock_state(
    local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch, host: str | None, lease: str | None
) -> None:
    if lease is not None:
        monkeypatch.setenv("HFSNAPSHOT_LOCK_LEASE", lease)
    repo_id, files, _, _ = REPOS["dataset"]
    local_hub.add_repo(repo_id, files, repo_type="dataset")
    snapshot_download(repo_id, repo_type="dataset")
    assert local_hub.cache_dir is not None
    repo = RepoCache(local_hub.cache_dir, repo_id, "dataset")

    holder, marker = hw.stale_lock(local_hub.cache_dir, repo_id, repo_type="dataset", host=host)

    assert (holder, marker) == (repo.holder_path, repo.soft_lock_path)
    record = json.loads(holder.read_text())
    assert record["host"] == (host or socket.gethostname()) and record["repo"] == f"dataset:{repo_id}"
    assert record["mode"] == "lease"
    assert not pid_alive(record["pid"])
    # filelock reads it as a lease of that process, on that host, for the configured length.
    owner = SoftFileLease(str(marker)).owner
    assert owner is not None
    assert (owner.pid, owner.mode, owner.lease_duration) == (record["pid"], "lease", float(lease or 60))
    assert owner.hostname == host if host is not None else owner.hostname.startswith(socket.gethostname())
    assert owner.token
    assert not repo.lock_path.exists()  # no kernel lock: the kernel frees those


@pytest.mark.transports("xet")
@pytest.mark.parametrize("host", [None, "ci-runner-7"])
def test_stale_lock_never_blocks_the_kernel_lock(
    cached: Cached, half_written: HalfWritten, monkeypatch: pytest.MonkeyPatch, host: str | None
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_MODE", "kernel")
    holder, _ = half_written.stale_lock(cached.repo_id, repo_type=cached.repo_type, host=host)

    cached.hub.reset_counters()
    snap = cached.materialize(lock_timeout=1)
    assert_repaired(cached, snap, [], source="cache")
    assert json.loads(holder.read_text())["pid"] == os.getpid()


@pytest.mark.transports("xet")
def test_stale_lock_leaves_the_holder_record_a_real_holder_writes(
    cached: Cached, half_written: HalfWritten, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder, _ = half_written.stale_lock(cached.repo_id, repo_type=cached.repo_type)
    stale = json.loads(holder.read_text())
    monkeypatch.setenv("HFSNAPSHOT_LOCK_MODE", "lease")
    with RepoLock(cached.repo, timeout=5):
        live = json.loads(holder.read_text())
    assert sorted(stale) == sorted(live) and stale["repo"] == live["repo"]
    assert (stale["mode"], live["mode"], stale["pid"] != live["pid"]) == ("lease", "lease", True)


@pytest.mark.transports("xet")
@pytest.mark.parametrize("mode", ["lease", "soft"])
def test_stale_lock_dead_holder_on_this_host_is_taken_over_at_once(
    cached: Cached, half_written: HalfWritten, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_MODE", mode)
    _, marker = half_written.stale_lock(cached.repo_id, repo_type=cached.repo_type)

    cached.hub.reset_counters()
    snap = cached.materialize(lock_timeout=5)
    assert snap.lock_wait < 1
    assert_repaired(cached, snap, [], source="cache")
    assert not marker.exists()


@pytest.mark.transports("xet")
def test_stale_lock_other_host_is_waited_for_then_named(
    cached: Cached, half_written: HalfWritten, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_MODE", "lease")
    _, marker = half_written.stale_lock(cached.repo_id, repo_type=cached.repo_type, host="ci-runner-7")
    before = marker.read_bytes()
    owner = SoftFileLease(str(marker)).owner
    assert owner is not None

    with pytest.raises(LockTimeoutError) as excinfo:
        cached.materialize(lock_timeout=1)
    message = str(excinfo.value)
    assert f"pid {owner.pid} on host ci-runner-7" in message, message
    runs_out = re.search(r"its lease runs out at (\S+Z) unless renewed again", message)
    assert runs_out is not None, message
    left = datetime.strptime(runs_out.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    assert marker.stat().st_mtime + 59 <= left <= marker.stat().st_mtime + 61, message
    assert marker.read_bytes() == before  # never broken before its lease runs out


@pytest.mark.transports("xet")
def test_stale_lock_other_host_is_taken_over_once_its_lease_runs_out(
    cached: Cached, half_written: HalfWritten, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HFSNAPSHOT_LOCK_MODE", "lease")
    monkeypatch.setenv("HFSNAPSHOT_LOCK_LEASE", "5")
    holder, _ = half_written.stale_lock(cached.repo_id, repo_type=cached.repo_type, host="ci-runner-7")

    cached.hub.reset_counters()
    snap = cached.materialize(lock_timeout=30)
    # Not before the lease has run out (it was written just now), and within 1.5 leases.
    assert 5 * 0.6 <= snap.lock_wait <= 5 * 1.5, snap.lock_wait
    assert_repaired(cached, snap, [], source="cache")
    assert json.loads(holder.read_text())["host"] == socket.gethostname()


# --- errors ----------------------------------------------------------------------------------------


class Call(Protocol):
    def __call__(
        self, cache: Path, repo_id: str, filename: str, /, *, revision: str = ..., repo_type: str = ...
    ) -> list[Path]: ...


def _no_file(function: Callable[..., list[Path]]) -> Call:
    def call(cache: Path, repo_id: str, filename: str, /, **kwargs: str) -> list[Path]:
        return function(cache, repo_id, **kwargs)

    return call


def _no_revision(
    cache: Path, repo_id: str, filename: str, /, *, revision: str = "main", repo_type: str = "model"
) -> list[Path]:
    return hw.stale_lock(cache, repo_id, repo_type=repo_type)


CALLS: dict[str, Call] = {
    "interrupted_download": _no_file(hw.interrupted_download),
    "missing_file": hw.missing_file,
    "truncated_blob": hw.truncated_blob,
    "corrupted_blob": hw.corrupted_blob,
    "dangling_link": hw.dangling_link,
    "orphan_incomplete": hw.orphan_incomplete,
    "empty_ref": _no_file(hw.empty_ref),
    "garbage_ref": _no_file(hw.garbage_ref),
    "stale_lock": _no_revision,
}
FILE_CALLS = {"missing_file", "truncated_blob", "corrupted_blob", "dangling_link", "orphan_incomplete"}


@pytest.fixture
def tiny(local_hub: LocalHub) -> Path:
    """The model repo cached by snapshot_download; returns the cache folder."""
    repo_id, files, _, _ = REPOS["model"]
    local_hub.add_repo(repo_id, files)
    snapshot_download(repo_id)
    assert local_hub.cache_dir is not None
    return local_hub.cache_dir


@pytest.mark.transports("xet")
@pytest.mark.parametrize("name", CALLS)
def test_paths_reaching_outside_are_value_errors(tiny: Path, name: str) -> None:
    call, before = CALLS[name], digest(tiny)
    for repo_id in ["../evil", "/abs/evil", "org/../../evil", "org/a/b", ""]:
        with pytest.raises(ValueError):
            call(tiny, repo_id, "config.json")
    if name != "stale_lock":
        for revision in ["../../etc", "/main", "main/../../x"]:
            with pytest.raises(ValueError):
                call(tiny, "org/tiny", "config.json", revision=revision)
    if name in FILE_CALLS:
        for filename in ["../../../refs/main", "/etc/passwd", "a/../../config.json", "", "./config.json"]:
            with pytest.raises(ValueError):
                call(tiny, "org/tiny", filename)
    assert digest(tiny) == before


def test_symlinks_leading_out_are_value_errors(tiny: Path, tmp_path: Path) -> None:
    repo = RepoCache(tiny, "org/tiny", "model")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"do not touch")

    link = repo.link(repo.refs.commit_of("main") or "", "config.json")
    link.unlink()
    link.symlink_to(outside / "secret")
    for name in FILE_CALLS - {"missing_file"}:
        with pytest.raises(ValueError):
            CALLS[name](tiny, "org/tiny", "config.json")
    with pytest.raises(ValueError):
        hw.interrupted_download(tiny, "org/tiny")

    RepoCache(tiny, "org/away", "model").root.symlink_to(outside)
    for call in CALLS.values():
        with pytest.raises(ValueError):
            call(tiny, "org/away", "config.json")

    repo.ref("v1").symlink_to(outside / "secret")
    for name in ["empty_ref", "garbage_ref", "missing_file"]:
        with pytest.raises(ValueError):
            CALLS[name](tiny, "org/tiny", "tokenizer.json", revision="v1")
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_bytes() == b"do not touch"


@pytest.mark.transports("xet")
@pytest.mark.parametrize("name", CALLS)
def test_what_is_not_cached_is_file_not_found(tiny: Path, name: str) -> None:
    call = CALLS[name]
    with pytest.raises(FileNotFoundError):
        call(tiny, "org/elsewhere", "config.json")
    with pytest.raises(FileNotFoundError):
        call(tiny, "org/tiny", "config.json", repo_type="dataset")
    if name != "stale_lock":
        with pytest.raises(FileNotFoundError):
            call(tiny, "org/tiny", "config.json", revision="v2")
    if name in FILE_CALLS:
        with pytest.raises(FileNotFoundError):
            call(tiny, "org/tiny", "pytorch_model.bin")


def test_helpers_work_without_pytest_on_any_cache(tmp_path: Path) -> None:
    repo_id, files, largest, _ = REPOS["space"]
    with LocalHub() as hub, hub.configure_client(tmp_path / "cache") as cache:
        hub.add_repo(repo_id, files, repo_type="space")
        snapshot_download(repo_id, repo_type="space")
        paths = HalfWritten(cache).truncated_blob(repo_id, largest, repo_type="space")
        assert all(p.is_absolute() for p in paths)
        snap = materialize(repo_id, repo_type="space", cache_dir=cache)
        assert snap.source == "repair" and snap.repaired == (largest,)
