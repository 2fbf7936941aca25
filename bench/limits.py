"""The workloads that meet the Hub's limits: a rate limit, and an outage during a warm run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from .runner import Bench, Row, Target, step, task, wall

#: Allowed requests per window and process: a run needs a few windows whatever the count.
RATE_LIMIT_PER_PROCESS = 8
RATE_FILES = 6
#: A request arriving this long after a window's first 429 was sent after that 429 reached its process.
IN_FLIGHT = 0.25


def window_counts(records: list[tuple[float, str, str, str, int]], window: float) -> tuple[list[int], list[int]]:
    """Per window of the Hub's file resolvers: the requests that arrived after its first 429, and of
    those the ones more than :data:`IN_FLIGHT` after it (sent once the 429 was known). Windows are
    replayed from the log as the local Hub opens them (at the first request after the last one closed).
    """
    into: list[int] = []
    late: list[int] = []
    opened, first_429 = float("-inf"), None
    for at, _origin, _method, _path, status in sorted(r for r in records if r[1] == "hub" and "/resolve/" in r[3]):
        if at >= opened + window:
            opened, first_429 = at, None
            into.append(0)
            late.append(0)
        if first_429 is not None:
            into[-1] += 1
            late[-1] += int(at > first_429 + IN_FLIGHT)
        if status == 429 and first_429 is None:
            first_429 = at
    return into, late


def rate_limit_window(bench: Bench) -> None:
    """1, 4 and 8 processes of one session fetch their own repos under a fixed-window rate limit on
    the file resolvers, over HTTP.

    Guards "no process of the session sends another request to that endpoint until the reset": the
    requests that reach a window after its first 429 are only those already in flight.
    """
    window = bench.profile.rate_window
    for procs in bench.profile.rate_processes:
        limit = RATE_LIMIT_PER_PROCESS * procs
        into: dict[str, int] = {}
        late: dict[str, int] = {}
        walls: dict[str, float] = {}
        for tool in ("plugin", "hf"):
            repos = [f"bench/rate-{tool}-{procs}-{n}" for n in range(procs)]
            for repo in repos:
                files = {f"part-{k}.txt": f"{repo} {k}\n" * 20 for k in range(RATE_FILES)}
                bench.hub.add_repo(repo, {"config.json": '{"model_type": "bench"}', **files})
            cache = bench.new_cache(f"rate-{tool}")
            session = {"session": "bench-rate-" + os.urandom(6).hex()} if tool == "plugin" else {}
            bench.hub.reset()
            bench.hub.rate_limit(limit, window, pattern="*/resolve/*")
            try:
                walls[tool] = wall(bench.run(cache, [task(step(tool, repo_id=r, **session)) for r in repos], "http"))
            finally:
                records = bench.hub.records()
                bench.hub.clear_faults()
                bench.drop(cache)
            counts = window_counts(records, window)
            into[tool], late[tool] = sum(counts[0]), sum(counts[1])
        note = (
            f"more than {IN_FLIGHT:g}s after the 429: plugin {late['plugin']}, A {late['hf']}; wall: plugin "
            f"{walls['plugin'] / window:.1f} windows, A {walls['hf'] / window:.1f}"
        )
        bench.rows.append(
            Row(f"rate-limit-window, {procs} proc, {limit} per {window:g}s",
                "requests into a window after its first 429", float(into["plugin"]), float(into["hf"]), None,
                Target("info", 0, "only those in flight"),
                fmt="{:.0f}", note=note)
        )  # fmt: skip


# --- outage-warm-n4 ---------------------------------------------------------------------------------
OUTAGE_REPOS = ("bench/down-a", "bench/down-b", "bench/down-c")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _outage_suite(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    fixtures = "".join(f"snap_{n} = snapshot_fixture({repo!r})\n" for n, repo in enumerate(OUTAGE_REPOS))
    (folder / "conftest.py").write_text("from pytest_hfsnapshot import snapshot_fixture\n" + fixtures, "utf-8")
    tests = "".join(
        f"def test_{n}_{k}(snap_{n}):\n    assert snap_{n}.files\n" for n in range(len(OUTAGE_REPOS)) for k in range(4)
    )
    (folder / "test_down.py").write_text(tests, encoding="utf-8")


def outage_warm(bench: Bench) -> None:
    """A warm ``pytest -n 4`` of 3 branch snapshots with the Hub unreachable (a closed port).

    Guards "within a bounded total time (no retry layer multiplies another's)": its wall against one
    retry budget (one snapshot, one process).
    """
    for repo in OUTAGE_REPOS:
        bench.hub.add_repo(repo, {"config.json": '{"model_type": "bench"}', "model.safetensors": 64 * 1024})
    suite = bench.workdir / "suite-down"
    _outage_suite(suite)
    env = bench.env(bench.new_cache("down"))
    retries = f"--hf-retries={bench.profile.outage_retries}"
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", retries, str(suite)]

    def timed(extra: list[str], environ: dict[str, str]) -> float:
        started = time.perf_counter()
        done = subprocess.run([*base, *extra], env=environ, cwd=suite, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"outage-warm-n4: pytest {' '.join(extra)} failed:\n{done.stdout[-2000:]}")
        return time.perf_counter() - started

    timed([], env)  # online: fills the cache
    down = {**env, "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    one_budget = timed(["-k", "test_0_0"], down)
    n4 = timed(["-n", "4"], down)
    bench.rows.append(
        Row(f"outage-warm-n4, 3 branch snapshots, {retries}", "wall / one retry budget (1 snapshot, 1 process)",
            n4 / one_budget, None, None, Target("<=", 1.5, "about 1"),
            note=f"-n 4 {n4:.1f}s, one budget {one_budget:.1f}s")
    )  # fmt: skip
