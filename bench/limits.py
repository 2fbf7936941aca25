"""Workloads of issue 13: the Hub's rate limit and an outage, met by a whole session.

- 13, ``rate_window``: a fixed-window rate limit on the file resolvers, 1, 4 and 8 processes of one
  session fetching their own repos cold: how many requests each tool sends into a window after
  its first 429, and the wall time against the window.
- 14, ``outage_warm``: a warm ``pytest -n 4`` of 3 branch snapshots with the Hub unreachable (a closed
  port): the wall time against one retry budget, with this code and, when ``HFSNAPSHOT_BEFORE``
  names an older checkout, with that one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .runner import Bench, Row, Target, log, step, task, wall

RATE_PROCESSES = (1, 4, 8)
RATE_WINDOW = 3.0
#: Allowed requests per window and process: a run needs about three windows whatever the count.
RATE_LIMIT_PER_PROCESS = 8
_RATE_FILES = 6
#: A request arriving this long after a window's first 429 was sent after that 429 reached its process.
IN_FLIGHT = 0.25


def _window_counts(records: list[tuple[float, str, str, str, int]], window: float) -> tuple[list[int], list[int]]:
    """Per window of the Hub's file resolvers: requests that arrived after its first 429, and of
    those the ones that arrived more than :data:`IN_FLIGHT` seconds after it (sent after the 429
    was known, rather than already on their way).

    Windows are replayed from the log as the local Hub opens them (at the first request after the
    last one closed).
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
    keep = [i for i, n in enumerate(into) if n]
    return [into[i] for i in keep], [late[i] for i in keep]


def rate_window(bench: Bench) -> None:
    figures: dict[str, Any] = {}
    for procs in RATE_PROCESSES:
        limit = RATE_LIMIT_PER_PROCESS * procs
        per_tool: dict[str, dict[str, Any]] = {}
        for tool in ("plugin", "hf"):
            repos = [f"bench/rate-{tool}-{procs}-{n}" for n in range(procs)]
            for repo in repos:
                files: dict[str, int | str] = {"config.json": '{"model_type": "bench"}'}
                files.update({f"part-{k}.txt": f"{repo} {k}\n" * 20 for k in range(_RATE_FILES)})
                bench.hub.add_repo(repo, files)
            cache = bench.new_cache(f"rate-{tool}-{procs}")
            session = "bench-rate-" + os.urandom(6).hex()
            specs = [
                task(step(tool, repo_id=repo, **({"session": session} if tool == "plugin" else {}))) for repo in repos
            ]
            bench.hub.reset()
            bench.hub.rate_limit(limit, RATE_WINDOW, pattern="*/resolve/*")
            error = ""
            try:
                results = bench.run(cache, specs, transport="http")
                seconds: float | None = wall(results)
            except RuntimeError as failed:
                seconds, error = None, str(failed).splitlines()[0][:160]
            records = bench.hub.records()
            bench.hub.clear_faults()
            into, late = _window_counts(records, RATE_WINDOW)
            per_tool[tool] = {
                "into_windows": into,
                "late_into_windows": late,
                "refused": sum(1 for r in records if r[4] == 429),
                "requests": len(records),
                "wall_s": seconds,
                "error": error,
            }
            bench.drop(cache)
            log(f"rate window, {procs} proc, {tool}: into windows {into}, late {late}, wall {seconds}")
        figures[str(procs)] = per_tool
        plugin, hf = per_tool["plugin"], per_tool["hf"]
        bench.rows.append(
            Row(
                f"13.rate.{procs}",
                f"13 rate limit ({limit}/{RATE_WINDOW:g}s window), {procs} proc",
                "requests into a window after its first 429",
                float(sum(plugin["into_windows"])),
                float(sum(hf["into_windows"])),
                None,
                Target("info", 0, "only those in flight"),
                fmt="{:.0f}",
                note=(
                    f"per window: plugin {plugin['into_windows']}, A {hf['into_windows']}; of them more than "
                    f"{IN_FLIGHT:g}s after the 429: plugin {sum(plugin['late_into_windows'])}, "
                    f"A {sum(hf['late_into_windows'])}; refused: plugin "
                    f"{plugin['refused']}, A {hf['refused']}; wall: plugin {_seconds(plugin)}, A {_seconds(hf)} "
                    f"= {_windows(plugin)} / {_windows(hf)} windows"
                ),
            )
        )
    bench.figures["13_rate_window"] = {"window_s": RATE_WINDOW, "by_processes": figures}


def _seconds(result: dict[str, Any]) -> str:
    return "failed" if result["wall_s"] is None else f"{result['wall_s']:.1f}s"


def _windows(result: dict[str, Any]) -> str:
    return "-" if result["wall_s"] is None else f"{result['wall_s'] / RATE_WINDOW:.1f}"


# --- a warm run with the Hub unreachable -------------------------------------------------------------
_OUTAGE_REPOS = ("bench/down-a", "bench/down-b", "bench/down-c")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _outage_suite(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    fixtures = "".join(f"snap_{n} = snapshot_fixture({repo!r})\n" for n, repo in enumerate(_OUTAGE_REPOS))
    (folder / "conftest.py").write_text("from pytest_hfsnapshot import snapshot_fixture\n" + fixtures, "utf-8")
    tests = "".join(
        f"def test_{n}_{k}(snap_{n}):\n    assert snap_{n}.files\n" for n in range(len(_OUTAGE_REPOS)) for k in range(4)
    )
    (folder / "test_down.py").write_text(tests, encoding="utf-8")


def _before_checkout() -> Path | None:
    """An older checkout to time as "before" (``HFSNAPSHOT_BEFORE``); None when unset or this one."""
    given = os.environ.get("HFSNAPSHOT_BEFORE", "").strip()
    if not given:
        return None
    path = Path(given).resolve()
    this = Path(__file__).resolve().parent.parent
    return path if path != this and (path / "pytest_hfsnapshot" / "plugin.py").is_file() else None


def outage_warm(bench: Bench) -> None:
    for repo in _OUTAGE_REPOS:
        bench.hub.add_repo(repo, {"config.json": '{"model_type": "bench"}', "model.safetensors": 64 * 1024})
    suite = bench.workdir / "suite-down"
    _outage_suite(suite)
    cache = bench.new_cache("down")
    env = bench.env(cache)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
    warm = subprocess.run([*base, "-n", "4"], env=env, cwd=suite, capture_output=True, text=True, check=False)
    if warm.returncode != 0:
        raise RuntimeError(f"14 outage: the online warm-up failed:\n{warm.stdout[-2000:]}")
    down = {**env, "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}

    def timed(args: list[str], environ: dict[str, str]) -> tuple[float, str]:
        started = time.perf_counter()
        done = subprocess.run(args, env=environ, cwd=suite, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
        if done.returncode != 0:
            raise RuntimeError(f"14 outage: the run with the Hub down failed: {tail}\n{done.stdout[-2000:]}")
        return seconds, tail

    one_budget, _ = timed([*base, "-k", "test_0_0"], down)
    after, after_tail = timed([*base, "-n", "4"], down)
    before: float | None = None
    checkout = _before_checkout()
    if checkout is not None:
        older = {**down, "PYTHONPATH": str(checkout) + os.pathsep + down.get("PYTHONPATH", "")}
        before, _ = timed([*base, "-n", "4"], older)
    serial, _ = timed(base, down)
    bench.drop(cache)
    log(f"outage: one budget {one_budget:.1f}s, -n 4 {after:.1f}s, serial {serial:.1f}s, before {before}")
    bench.figures["13_outage_warm"] = {
        "one_budget_s": one_budget,
        "n4_s": after,
        "serial_s": serial,
        "n4_before_s": before,
        "before_checkout": str(checkout) if checkout else None,
        "summary": after_tail,
    }
    bench.rows.append(
        Row(
            "14.outage",
            "14 warm run, 3 branch snapshots, Hub down, -n 4",
            "wall / one retry budget (1 snapshot, serial)",
            after / one_budget,
            None if before is None else before / one_budget,
            None,
            Target("<=", 1.5, "about 1"),
            note=(
                f"-n 4 {after:.1f}s, serial {serial:.1f}s, one budget {one_budget:.1f}s"
                + ("" if before is None else f"; before ({checkout}): -n 4 {before:.1f}s")
                + " (A column: the code before this change)"
            ),
        )
    )
