"""Shared helpers of the reliability suite: child processes, repo contents, digests.

Children are separate interpreters (``python -c``), never forks: each one imports
huggingface_hub fresh and finds the local Hub through the environment that the ``local_hub``
fixture sets (``HF_ENDPOINT``, ``HF_HUB_CACHE``, ...), like an xdist worker or a parallel CI job.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import file_fetches, xet_in_use
from hosts import host_prefix

from pytest_hfsnapshot import Snapshot
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.testing.hub import LocalHub, is_lfs

# The child reports "ready" once its imports are done, optionally waits for a "go" file so that
# several children start at the same moment, then does one action: "materialize" (says "started"
# as it calls it, then reports a JSON line), "lock" (holds the repo lock until killed; with
# "markers", filelock's SoftFileLock on each of those paths too, as huggingface_hub locks its
# blobs where flock fails; with "release_when", until that file exists, then it lets go as the
# engine's holder does) or "hf_download" (a plain hf_hub_download). "no_flock_under": flock
# fails with ENOSYS for files below that folder, as on a filesystem without flock (some network
# mounts). "log": the plugin's log records, DEBUG and up, go to stderr as "<time.time()> <message>".
CHILD = r"""
import json, os, socket, sys, time
spec = json.loads(sys.argv[1])
if spec.get("no_flock_under"):
    import errno, fcntl
    no_flock_root, real_flock = os.path.join(spec["no_flock_under"], ""), fcntl.flock
    def flock(fd, operation):
        number = fd if isinstance(fd, int) else fd.fileno()
        if os.readlink(f"/proc/self/fd/{number}").startswith(no_flock_root):
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
        return real_flock(fd, operation)
    fcntl.flock = flock
if spec.get("log"):
    import logging
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(created).6f %(message)s"))
    logging.getLogger("pytest_hfsnapshot").addHandler(handler)
    logging.getLogger("pytest_hfsnapshot").setLevel(logging.DEBUG)
from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core.cache.layout import RepoCache
from pytest_hfsnapshot.core.cache.locking import RepoLock
from filelock import SoftFileLock
from huggingface_hub import hf_hub_download
print("ready", os.getpid(), socket.gethostname(), flush=True)
go = spec.get("go")
deadline = time.monotonic() + 60
while go and not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.005)
if spec["action"] == "hf_download":
    print("result " + json.dumps({"ok": True, "path": hf_hub_download(spec["repo_id"], spec["filename"])}), flush=True)
    sys.exit(0)
if spec["action"] == "lock":
    repo = RepoCache(spec["cache_dir"], spec["repo_id"], spec.get("repo_type", "model"))
    with RepoLock(repo, timeout=30, watch=repo.records_dir if spec.get("release_when") else None) as lock:
        markers = [SoftFileLock(path, is_singleton=False) for path in spec.get("markers", [])]
        for marker in markers:
            marker.acquire(timeout=0)
        print("locked", lock.mode, flush=True)
        until = time.monotonic() + 120
        while time.monotonic() < until and not (spec.get("release_when") and os.path.exists(spec["release_when"])):
            time.sleep(0.01)
    print("released", flush=True)
    sys.exit(0)
started = time.time()
print("started", started, flush=True)
try:
    snap = materialize(spec["repo_id"], **spec.get("kwargs", {}))
except Exception as error:
    kinds = [cls.__name__ for cls in type(error).__mro__]
    out = {"ok": False, "error": type(error).__name__, "kinds": kinds, "message": str(error)}
else:
    out = {
        "ok": True,
        "path": str(snap.path),
        "commit": snap.commit,
        "files": list(snap.files),
        "source": snap.source,
        "lock_wait": snap.lock_wait,
        "seconds": snap.seconds,
    }
out.update(started=started, ended=time.time(), pid=os.getpid())
print("result " + json.dumps(out), flush=True)
"""


class Child:
    """One child interpreter running ``CHILD``; its stdout lines are read by a thread."""

    def __init__(
        self, spec: Mapping[str, Any], *, prefix: Sequence[str] = (), env: Mapping[str, str] | None = None
    ) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-c", CHILD, json.dumps(dict(spec))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = ""
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def expect(self, word: str, timeout: float = 30.0) -> list[str]:
        """Wait for the next stdout line starting with ``word``; return its fields after ``word``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, remaining))
            except queue.Empty:
                pytest.fail(f"child {self.pid} printed no {word!r} line within {timeout}s")
            if line is None:
                self.proc.wait(5)
                pytest.fail(f"child {self.pid} exited ({self.proc.returncode}) before {word!r}: {self.stderr[-2000:]}")
            if line.startswith(word + " ") or line == word:
                return line.split(" ", 1)[1].split() if " " in line else []

    def result(self, timeout: float = 60.0) -> dict[str, Any]:
        """The JSON outcome of a ``materialize`` child."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"child {self.pid} gave no result within {timeout}s")
            if line is None:
                self.proc.wait(5)
                pytest.fail(f"child {self.pid} exited ({self.proc.returncode}) without a result: {self.stderr[-2000:]}")
            if line.startswith("result "):
                out: dict[str, Any] = json.loads(line[len("result ") :])
                return out

    def kill(self) -> None:
        """SIGKILL this child (by its own pid) and reap it."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def children() -> Iterator[Any]:
    """A factory of :class:`Child`; every child still running at teardown is killed."""
    started: list[Child] = []

    def start(spec: Mapping[str, Any], **kwargs: Any) -> Child:
        child = Child(spec, **kwargs)
        started.append(child)
        return child

    yield start
    for child in started:
        child.kill()


#: The host name of the processes ``other_host`` runs.
OTHER_HOST = "hfsnapshot-elsewhere"


@pytest.fixture
def other_host() -> list[str]:
    """A command prefix that runs a program under another hostname (``unshare -u``, needs root)."""
    return host_prefix(OTHER_HOST)


def start_together(children_: Sequence[Child], go: Path) -> None:
    """Release children that wait on ``go`` once each has finished importing."""
    for child in children_:
        child.expect("ready")
    go.touch()


def repo_files(seed: int, *, weight_size: int = 48 * 1024, extra: Mapping[str, bytes | str] = ()) -> dict[str, bytes]:
    """A small loadable model repo: config, a git-sha1 text file and an LFS weight file."""
    rng = random.Random(seed)
    files: dict[str, bytes] = {
        "config.json": json.dumps({"model_type": "bert", "seed": seed}).encode(),
        "tokenizer.json": rng.randbytes(8 * 1024).hex().encode()[: 8 * 1024],
        "model.safetensors": rng.randbytes(weight_size),
    }
    for path, data in dict(extra).items():
        files[path] = data.encode() if isinstance(data, str) else data
    return files


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_snapshot_matches(path: str | os.PathLike[str], files: Mapping[str, bytes]) -> None:
    """Every file under ``path`` reads back byte for byte as the Hub serves it, and nothing else is there."""
    root = Path(path)
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())
    assert found == sorted(files), f"snapshot holds {found}, the Hub has {sorted(files)}"
    for rel, data in files.items():
        got = (root / rel).read_bytes()
        assert sha256(got) == sha256(data), f"{rel}: {len(got)} bytes that differ from the Hub's {len(data)}"


def incomplete_files(cache_dir: Path, repo_id: str, repo_type: str = "model") -> list[str]:
    """``*.incomplete`` names left in the repo's ``blobs/``."""
    blobs = RepoCache(cache_dir, repo_id, repo_type).blobs
    return sorted(p.name for p in blobs.glob("*.incomplete")) if blobs.is_dir() else []


# A xorb stores each chunk behind an 8-byte header; hf_xet's content-defined chunks are at least
# 8 KiB (but the last). Data it cannot compress (``repo_files``' random weights) is stored as is.
XET_CHUNK_HEADER = 8
XET_MIN_CHUNK = 8 * 1024


def content_bytes(hub: LocalHub, pattern: str) -> int:
    """File bytes the Hub sent for the requests matching ``pattern`` (path or alias), every origin.

    The 2xx bodies of ``resolve``, the CDN and xorb ranges; error bodies and Xet reconstruction
    answers (JSON telling where the bytes are, not the bytes) are left out. Cut bodies count what
    was sent.
    """
    return sum(
        r.body_bytes
        for r in hub.counters().records
        if r.matches(pattern) and 200 <= r.status < 300 and "/reconstructions/" not in r.path
    )


def xet_backed(hub: LocalHub, path: str, data: bytes) -> bool:
    """Whether the client fetches this repo file through hf_xet in this test."""
    return xet_in_use(hub) and is_lfs(path, len(data))


def one_fetch_bytes(hub: LocalHub, path: str, data: bytes) -> tuple[int, int]:
    """The least and most :func:`content_bytes` that one fetch of an incompressible file sends.

    Exactly its size over HTTP; through Xet its size plus one chunk header per chunk (at most
    ``size // 8 KiB + 1`` chunks), well below the size of a second fetch.
    """
    if not xet_backed(hub, path, data):
        return len(data), len(data)
    return len(data), len(data) + XET_CHUNK_HEADER * (len(data) // XET_MIN_CHUNK + 1)


def assert_each_file_crossed_once(hub: LocalHub, repo_id: str, files: Mapping[str, bytes]) -> None:
    """Each repo file was fetched once (one answer with its bytes, whichever path the client took:
    ``resolve``, the CDN or a Xet reconstruction) and its bytes crossed the network once."""
    patterns = {path: f"/{repo_id}/resolve/*/{path}" for path in files}
    fetches = {path: file_fetches(hub, pattern) for path, pattern in patterns.items()}
    assert fetches == dict.fromkeys(files, 1), f"file fetches per file: {fetches}"
    for path, data in files.items():
        low, high = one_fetch_bytes(hub, path, data)
        got = content_bytes(hub, patterns[path])
        assert low <= got <= high, f"{path}: {got} bytes served for {len(data)} (one fetch: {low}..{high})"


def tree_digest(root: Path, *, skip: Sequence[str] = ()) -> dict[str, str]:
    """What a folder holds, never following a symlink: relpath -> kind and content hash or link target.

    ``skip`` names top-level entries to leave out (the repo folder, ``.hfsnapshot``, ``.locks``).
    """
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(full)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = f"dir:{stat.S_IMODE(st.st_mode):o}"
            else:
                out[rel] = f"file:{stat.S_IMODE(st.st_mode):o}:{sha256(full.read_bytes())}"
    return out


def snapshot_of(snap: Snapshot) -> dict[str, Any]:
    """The comparable identity of a Snapshot (what every process must agree on)."""
    return {"path": str(snap.path), "commit": snap.commit, "files": list(snap.files)}


class ClientClock:
    """Stands in for the ``time`` module inside huggingface_hub's HTTP layer: records its backoff sleeps.

    huggingface_hub retries HEAD and listing requests itself (1, 2, 4, 8, 8 s) and resumes cut bodies
    after 1 s; recording instead of sleeping keeps fault tests fast while every request still happens.
    """

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def client_clock(monkeypatch: pytest.MonkeyPatch) -> ClientClock:
    """Record, instead of sleeping, the backoff sleeps of huggingface_hub's own retry loop (this process),
    and of the engine's transfers that stand in for its file GET (``core.engine.resume``)."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    from pytest_hfsnapshot.core.engine import resume

    clock = ClientClock()
    for module in (_http, file_download, resume):
        if hasattr(module, "time"):
            monkeypatch.setattr(module, "time", clock)
    return clock
