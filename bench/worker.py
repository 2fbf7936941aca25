"""One measured process: ``python -m bench.worker`` with the Hub environment already set.

One JSON line each way on stdin/stdout: the parent sends the task, the worker imports everything
(untimed), prints ``READY``, waits for ``GO``, runs the task and prints its result. The
environment (``HF_ENDPOINT``, ``HF_HUB_CACHE``...) is set before huggingface_hub is imported, as
in an xdist worker. Times are ``time.monotonic()``: one clock for every process on Linux.

Tools, the same work three ways and a floor:

- ``plugin``: :func:`pytest_hfsnapshot.materialize`, what the plugin's fixtures call;
- ``hf``: A, plain ``snapshot_download``;
- ``handrolled``: B, :func:`handrolled`;
- ``statwalk``: ``os.walk`` + ``os.stat`` of a snapshot, the least a warm check can do.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

#: Attempts and base delay (seconds) of the hand-rolled baseline.
HANDROLLED_ATTEMPTS = 3
HANDROLLED_BACKOFF = 1.0


def handrolled(repo_id: str, revision: str = "main", **kwargs: Any) -> str:
    """B: what suites commonly hand-roll around ``snapshot_download`` for xdist: a file lock per
    repo, three attempts with linear backoff, and one metadata file checked."""
    from filelock import FileLock
    from huggingface_hub import constants, snapshot_download

    lock_dir = os.path.join(kwargs.get("cache_dir") or constants.HF_HUB_CACHE, ".handrolled-locks")
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
    return sum(os.stat(os.path.join(root, name)).st_size for root, _, files in os.walk(snapshot) for name in files)


def _tools() -> dict[str, Callable[..., Any]]:
    from huggingface_hub import snapshot_download

    from pytest_hfsnapshot import materialize

    return {"plugin": materialize, "hf": snapshot_download, "handrolled": handrolled, "statwalk": stat_walk}


def _hwm_kib() -> int:
    """Peak resident set size of this process so far (VmHWM), KiB."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def _describe(value: Any, inspect: bool) -> dict[str, Any]:
    """A returned snapshot as JSON: its path, source and bytes hashed after their transfer, and with
    ``inspect`` every file's size (-1: a link to nothing)."""
    path = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    out: dict[str, Any] = {"path": path, "source": getattr(value, "source", None)}
    out["rehashed"] = getattr(value, "rehashed", None)
    if inspect and path:
        sizes: dict[str, int] = {}
        for root, _, files in os.walk(path):
            for name in files:
                full = os.path.join(root, name)
                sizes[os.path.relpath(full, path)] = os.stat(full).st_size if os.path.exists(full) else -1
        out["sizes"] = sizes
    return out


def run(task: dict[str, Any], tools: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Run ``task`` (see :func:`bench.runner.task`); returns each step's durations and last result."""
    steps = task["steps"]
    durations: dict[str, list[float]] = {step["name"]: [] for step in steps}
    results: dict[str, Any] = {}
    for _ in range(task["warmup"]):
        for step in steps:
            tools[step["tool"]](**step["args"])
    start = time.monotonic()
    for _ in range(task["rounds"]):
        for step in steps:
            began = time.perf_counter()
            value = tools[step["tool"]](**step["args"])
            durations[step["name"]].append(time.perf_counter() - began)
            results[step["name"]] = _describe(value, task["inspect"])
    return {"start": start, "end": time.monotonic(), "durations": durations, "results": results}


def main() -> int:
    task = json.loads(sys.stdin.readline())
    tools = _tools()
    cpu_ready = time.process_time()
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 2
    try:
        out = {**run(task, tools), "ok": True}
    except Exception as error:
        out = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    out["cpu_s"] = time.process_time() - cpu_ready
    out["rss_peak_kib"] = _hwm_kib()
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
