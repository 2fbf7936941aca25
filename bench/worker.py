"""One measured process: ``python -m bench.worker`` with the Hub environment already set.

Protocol on stdin/stdout, one JSON line each way: the parent sends the task, the worker imports
everything (untimed), prints ``READY``, waits for ``GO``, runs the task and prints its result.
``HF_ENDPOINT``/``HF_HUB_CACHE``/... are in the environment before huggingface_hub is imported,
as in an xdist worker. Times are ``time.monotonic()`` (one clock for every process on Linux).

Tools (the same work done three ways, plus references):

- ``plugin``: :func:`pytest_hfsnapshot.materialize`, what the plugin's fixtures call;
- ``hf``: baseline A, plain ``snapshot_download``;
- ``handrolled``: baseline B, :func:`handrolled`;
- ``statwalk``: ``os.walk`` + ``os.stat`` of a snapshot, the floor of a warm check;
- ``sha256``: a plain single-stream ``hashlib.sha256`` read loop over a snapshot's blobs;
- ``sha256_procs``: that loop in N processes at once (what the cores can give right now);
- ``hf_verify``: ``HfApi.verify_repo_checksums`` (the client's own deep check);
- ``hf_beside``: A with a bare sha256 pass over another file beside it, in a thread or a process
  (:func:`hash_beside`: what any hashing costs the client on these cores);
- ``paced_pass``: a bare sha256 pass over a file in the page cache, paced or not (:func:`paced_pass`);
- ``follow_writer``: the plugin's hashing on arrival following a local writer process, with no
  client and no Hub (:func:`follow_writer`: what following costs by itself);
- ``noop``: nothing (the RSS of an idle worker with everything imported).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: How many attempts and the base delay of the hand-rolled baseline.
HANDROLLED_ATTEMPTS = 3
HANDROLLED_BACKOFF = 1.0


def handrolled(repo_id: str, revision: str = "main", **kwargs: Any) -> str:
    """Baseline B: what suites commonly hand-roll around ``snapshot_download`` for xdist.

    A file lock per repo, three attempts with linear backoff, and one metadata file checked.
    """
    from filelock import FileLock
    from huggingface_hub import constants, snapshot_download

    cache = kwargs.get("cache_dir") or constants.HF_HUB_CACHE
    lock_dir = os.path.join(cache, ".handrolled-locks")
    os.makedirs(lock_dir, exist_ok=True)
    lock = FileLock(os.path.join(lock_dir, repo_id.replace("/", "--") + ".lock"))
    for attempt in range(1, HANDROLLED_ATTEMPTS + 1):
        try:
            with lock:
                path = snapshot_download(repo_id, revision=revision, **kwargs)
            if not os.path.isfile(os.path.join(path, "config.json")):
                raise RuntimeError(f"{repo_id}: config.json missing from {path}")
            return str(path)
        except Exception:
            if attempt == HANDROLLED_ATTEMPTS:
                raise
            time.sleep(HANDROLLED_BACKOFF * attempt)
    raise AssertionError("unreachable")


def stat_walk(snapshot: str) -> int:
    """Stat every file of a snapshot, following links: the least a warm check can do."""
    total = 0
    for root, _, files in os.walk(snapshot):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_size
    return total


def plain_sha256(snapshot: str, patterns: list[str] | None = None) -> int:
    """A plain single-stream sha256 read loop over the blobs behind a snapshot; returns bytes read."""
    total = 0
    for root, _, files in os.walk(snapshot):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(root, name), snapshot)
            if patterns and not any(fnmatch.fnmatchcase(rel, p) for p in patterns):
                continue
            digest = hashlib.sha256()
            with open(os.path.realpath(os.path.join(root, name)), "rb") as handle:
                while chunk := handle.read(1 << 20):
                    digest.update(chunk)
                    total += len(chunk)
    return total


def _hash_files(paths: list[str]) -> int:
    total = 0
    for path in paths:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                total += len(chunk)
    return total


def plain_sha256_processes(snapshot: str, processes: int) -> int:
    """The same read loop in ``processes`` processes (files dealt out by size): what the cores give."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    blobs = sorted(
        (os.path.realpath(os.path.join(root, name)) for root, _, files in os.walk(snapshot) for name in files),
        key=os.path.getsize,
        reverse=True,
    )
    shares: list[list[str]] = [[] for _ in range(processes)]
    for n, blob in enumerate(blobs):
        shares[n % processes].append(blob)
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork")) as pool:
        return sum(pool.map(_hash_files, shares))


@dataclass(frozen=True)
class Beside:
    """What :func:`hash_beside` did: the snapshot, and the CPU seconds of the pass beside it."""

    path: str
    beside_cpu: float


def hash_beside(other: str, place: str, bytes_per_second: float | None = None, **kwargs: Any) -> Beside:
    """``snapshot_download(**kwargs)`` while a bare sha256 pass over ``other`` (a file in the page
    cache) runs beside it, at most ``bytes_per_second``, in a ``thread`` of this process or in a
    ``process`` of its own (no GIL shared): the plugin's hashing on arrival without the plugin."""
    from huggingface_hub import snapshot_download

    from .paced_hash import paced_sha256

    if place == "thread":
        spent: list[float] = []
        thread = threading.Thread(target=lambda: spent.append(paced_sha256(other, bytes_per_second)))
        thread.start()
        try:
            path = snapshot_download(**kwargs)
        finally:
            thread.join()
        return Beside(str(path), spent[0])
    if place != "process":
        raise ValueError(f"place must be 'thread' or 'process', got {place!r}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.paced_hash", other, str(bytes_per_second or 0)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        path = snapshot_download(**kwargs)
        out, _ = proc.communicate(timeout=600)
    finally:
        proc.kill()
    return Beside(str(path), float(out))


@dataclass(frozen=True)
class Passed:
    """What :func:`paced_pass` did: the CPU seconds of its pass."""

    pass_cpu: float


def paced_pass(path: str, bytes_per_second: float | None = None) -> Passed:
    """A bare sha256 pass over ``path``, at most ``bytes_per_second`` (:func:`bench.paced_hash.paced_sha256`)."""
    from .paced_hash import paced_sha256

    return Passed(paced_sha256(path, bytes_per_second))


@dataclass(frozen=True)
class Followed:
    """What :func:`follow_writer` did: the bytes its follower read after the writer had finished."""

    rehashed: int


def follow_writer(blobs: str, nbytes: int, bytes_per_second: float | None = None) -> Followed:
    """The plugin's hashing on arrival (:class:`pytest_hfsnapshot.core.hashing.ArrivalHasher`)
    following a writer process (:mod:`bench.writer`) that writes ``nbytes`` into the blob folder
    ``blobs`` at most ``bytes_per_second``, as a download would. The follower's CPU is the worker's
    ``follower_cpu_s``."""
    from pathlib import Path

    from pytest_hfsnapshot.core.hashing import ArrivalHasher
    from pytest_hfsnapshot.core.verify import ExpectedFile

    etag = "0" * 64  # a blob name only: nothing compares the digest here
    hasher = ArrivalHasher(Path(blobs), [ExpectedFile(path="model.safetensors", size=nbytes, etag=etag, lfs=True)])
    writer = [sys.executable, "-m", "bench.writer", os.path.join(blobs, etag), str(nbytes), str(bytes_per_second or 0)]
    hasher.run(subprocess.run, writer, check=True)
    return Followed(hasher.rehashed)


def _tools() -> dict[str, Callable[..., Any]]:
    from huggingface_hub import HfApi, snapshot_download

    from pytest_hfsnapshot import materialize

    return {
        "plugin": materialize,
        "hf": snapshot_download,
        "handrolled": handrolled,
        "statwalk": stat_walk,
        "sha256": plain_sha256,
        "sha256_procs": plain_sha256_processes,
        "hf_verify": lambda **kw: HfApi().verify_repo_checksums(**kw),
        "hf_beside": hash_beside,
        "paced_pass": paced_pass,
        "follow_writer": follow_writer,
        "noop": lambda **kw: None,
    }


#: CPU seconds spent on the plugin's hashing-on-arrival threads (see :func:`_clock_the_follower`).
FOLLOWER_CPU = [0.0]


def _clock_the_follower() -> bool:
    """Count the CPU time of the plugin's follower thread (``ArrivalHasher._follow``, which hashes a
    download while it arrives) into :data:`FOLLOWER_CPU`: the plugin's own cost of hashing, apart
    from the client's. False where the plugin code in use has no follower (another revision's)."""
    try:
        from pytest_hfsnapshot.core import hashing
    except ImportError:
        try:
            from pytest_hfsnapshot import hashing  # type: ignore[no-redef]  # the flat layout of older revisions
        except ImportError:
            return False
    follow = getattr(getattr(hashing, "ArrivalHasher", None), "_follow", None)
    if follow is None:
        return False

    def clocked(self: Any) -> None:
        began = time.thread_time()
        try:
            follow(self)
        finally:
            FOLLOWER_CPU[0] += time.thread_time() - began

    hashing.ArrivalHasher._follow = clocked
    return True


def _hwm_kib() -> int:
    """Peak resident set size of this process so far (VmHWM), KiB."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def _machine_busy() -> float | None:
    """CPU seconds every core of the machine has spent busy since boot (``/proc/stat``: user,
    nice, system, irq, softirq); None where it cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _describe(value: Any) -> dict[str, Any]:
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    out: dict[str, Any] = {"path": path if isinstance(path, str) else None}
    for name in ("source", "seconds", "lock_wait", "rehashed", "beside_cpu", "pass_cpu"):
        if hasattr(value, name):
            out[name] = getattr(value, name)
    return out


def _inspect(snapshot: str) -> dict[str, int]:
    """Size of every file the snapshot folder shows (-1: a link to nothing)."""
    sizes: dict[str, int] = {}
    for root, _, files in os.walk(snapshot):
        for name in files:
            full = os.path.join(root, name)
            try:
                sizes[os.path.relpath(full, snapshot)] = os.stat(full).st_size
            except OSError:
                sizes[os.path.relpath(full, snapshot)] = -1
    return sizes


def run(task: dict[str, Any], tools: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Run ``task``: ``steps`` (a list of ``{"name", "tool", "args"}``), round-robin ``rounds`` times.

    ``warmup`` rounds run first and are not timed. Returns per-step durations.
    """
    steps = task["steps"]
    durations: dict[str, list[float]] = {step["name"]: [] for step in steps}
    results: dict[str, Any] = {}
    for _ in range(task.get("warmup", 0)):
        for step in steps:
            tools[step["tool"]](**step["args"])
    start = time.monotonic()
    busy = _machine_busy()
    for _ in range(task.get("rounds", 1)):
        for step in steps:
            began = time.perf_counter()
            value = tools[step["tool"]](**step["args"])
            durations[step["name"]].append(time.perf_counter() - began)
            results[step["name"]] = _describe(value)
    end = time.monotonic()
    after = _machine_busy()
    # What every process on the machine used meanwhile (the Hub's and the others' too): how much of
    # the cores the timed steps left idle.
    machine: dict[str, Any] = {}
    if busy is not None and after is not None:
        machine = {"machine_busy_s": after - busy, "machine_cpus": os.cpu_count()}
    if task.get("inspect"):
        for described in results.values():
            if described.get("path"):
                described["sizes"] = _inspect(described["path"])
    return {"start": start, "end": end, "durations": durations, "results": results, **machine}


def main() -> int:
    # bench.compare's base side: another version's pytest_hfsnapshot, imported before this tree's.
    if code := os.environ.get("HFSNAPSHOT_BENCH_CODE"):
        sys.path.insert(0, code)
    task = json.loads(sys.stdin.readline())
    tools = _tools()
    clocked = _clock_the_follower()
    rss_ready = _hwm_kib()
    cpu_ready = time.process_time()
    times_ready = os.times()
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 2
    try:
        out = run(task, tools)
        out["ok"] = True
    except Exception as error:
        out = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    out["cpu_s"] = time.process_time() - cpu_ready
    times = os.times()
    out["cpu_user_s"] = times.user - times_ready.user
    out["cpu_sys_s"] = times.system - times_ready.system
    out["follower_cpu_s"] = FOLLOWER_CPU[0] if clocked else None
    out["rss_ready_kib"] = rss_ready
    out["rss_peak_kib"] = _hwm_kib()
    out["pid"] = os.getpid()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
