"""The eight workloads of issue 7, the wire cost per transport (issue 10) and a fleet (issue 18), side by side.

Workload 4 also measures pin files (issue 20): the warm-branch session with ``--hf-pins``, and the
revision requests of a small fleet's CI run with and without a pin file, beside the formula.

Every workload adds its repos to the bench Hub, runs fresh worker processes (see
:mod:`bench.worker`) on fresh caches, reads the Hub's counters, and appends rows (ratios against
targets) and raw figures (every sample, plus medians) to the :class:`~bench.runner.Bench`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_hfsnapshot.core import pins, xet

from .limits import outage_warm, rate_window
from .paced_hash import paced_sha256
from .runner import TOOLS, Bench, Row, Target, WorkerResult, log, median, step, task, wall

MIB = 1 << 20
#: The fleet figure of workload 4, measured: runners (one session each) x branch snapshots per runner.
FLEET_RUNNERS = 4
FLEET_SNAPSHOTS = 3
#: The Hub's API quota the fleet figure is set against (issue 20): 500 calls per 5 minutes.
HUB_API_QUOTA = 500


@dataclass(frozen=True)
class Profile:
    """Sizes and repeat counts of one run."""

    name: str
    repeats: int
    shards: int
    shard_mib: int
    pair_shards: int
    pair_shard_mib: int
    stream_mib_s: float
    pair_repeats: int
    loopback_pair: bool
    warm_repeats: int
    small_calls: int
    many_files: int
    many_calls: int
    huge_mib: int
    rss_repeats: int
    verify_files: int
    verify_file_mib: int
    verify_rounds: int
    suite_tests: int
    suite_repeats: int


PROFILES = {
    "smoke": Profile("smoke", 1, 4, 1, 2, 1, 16, 1, False, 1, 5, 200, 3, 32, 1, 2, 8, 1, 400, 1),
    "quick": Profile("quick", 3, 4, 8, 2, 8, 16, 2, True, 2, 20, 1000, 8, 256, 1, 4, 32, 3, 2000, 3),
    "full": Profile("full", 7, 4, 32, 2, 32, 16, 3, True, 3, 40, 1000, 12, 1024, 2, 4, 128, 5, 2000, 7),
}

TOOL_LABELS = {"plugin": "plugin (materialize)", "hf": "A: snapshot_download", "handrolled": "B: hand-rolled"}


def _metadata() -> dict[str, str]:
    return {
        "config.json": json.dumps({"model_type": "bench", "hidden_size": 64, "num_hidden_layers": 2}),
        "tokenizer_config.json": json.dumps({"model_max_length": 512}),
        "generation_config.json": json.dumps({"max_new_tokens": 16}),
        "README.md": "# bench repo\n",
    }


def _sharded(shards: int, shard_bytes: int) -> dict[str, int | str]:
    files: dict[str, int | str] = dict(_metadata())
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {f"layer.{i}": n for i, n in enumerate(names)}})
    for name in names:
        files[name] = shard_bytes
    return files


def _args(tool: str, repo_id: str, revision: str, session: str | None = None, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"repo_id": repo_id, "revision": revision, **extra}
    if tool == "plugin" and session is not None:
        args["session"] = session
    return args


def _session() -> str:
    return "bench-" + uuid.uuid4().hex[:12]


def _complete(result: WorkerResult, name: str, sizes: dict[str, int]) -> bool:
    return result.result(name).get("sizes") == sizes


def _transports(bench: Bench, *names: str) -> tuple[str, ...]:
    """The transports a per-transport workload runs on (``xet`` and ``http`` unless named), those of
    ``--transport`` only when it is given (``xet`` picks ``xet-noshare`` too): Xet ones only when
    the bench Hub serves Xet storage (hf_xet installed)."""
    chosen = tuple(t for t in names or ("xet", "http") if bench.transport is None or t.startswith(bench.transport))
    return chosen if bench.hub.xet() else tuple(t for t in chosen if t == "http")


def _writable(path: Path) -> None:
    """Let us write a file the client made read-only (the shared store's files are 0444)."""
    mode = os.stat(path).st_mode
    if not mode & 0o200:
        os.chmod(path, mode | 0o200)


def _blob(cache: Path, repo_id: str, commit: str, path: str) -> Path:
    """The file behind a snapshot entry: the repo blob, or the shared store file it links to."""
    return Path(os.path.realpath(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit / path))


def _rotate(items: tuple[str, ...], n: int) -> tuple[str, ...]:
    k = n % len(items)
    return items[k:] + items[:k]


#: How much free memory a cold run primes before its workers go (:class:`bench.runner.MemoryPrimer`),
#: in multiples of the bytes it downloads: the page cache it fills and the client's buffers.
PRIME_FACTOR = 2


# --- 1. cold, 8 processes, one sharded repo --------------------------------------------------------
def _cold_eight_once(bench: Bench, repo_id: str, sizes: dict[str, int], transport: str) -> dict[str, Any]:
    p = bench.profile
    repo_bytes = sum(sizes.values())
    walls: dict[str, list[float]] = {f"{t}/{n}": [] for t in TOOLS for n in (1, 8)}
    file_ratio: dict[str, list[float]] = {k: [] for k in walls}
    all_ratio: dict[str, list[float]] = {k: [] for k in walls}
    requests: dict[str, list[int]] = {k: [] for k in walls}
    # For 8 processes: when the first worker was done (for the plugin: the one that downloaded),
    # and how long the others took after it.
    first_done: dict[str, list[float]] = {k: [] for k in walls}
    waiter_cpu: dict[str, list[float]] = {k: [] for k in walls}
    # The system CPU of the worker that downloaded (for A, of the one that was done first).
    downloader_sys: dict[str, list[float]] = {k: [] for k in walls}
    complete: dict[str, bool] = dict.fromkeys(walls, True)
    for r in range(p.repeats):
        for tool in _rotate(TOOLS, r):
            for n in (1, 8) if r % 2 == 0 else (8, 1):
                key = f"{tool}/{n}"
                cache = bench.new_cache("cold")
                bench.hub.reset()
                session = _session()
                spec = task(step(tool, **_args(tool, repo_id, "main", session)), inspect=True)
                results = bench.run(cache, [spec] * n, transport, prime=PRIME_FACTOR * repo_bytes)
                stats = bench.hub.stats()
                walls[key].append(wall(results))
                t0 = min(res.start for res in results)
                downloaders = [res for res in results if res.result(tool).get("source") == "download"]
                first = min(downloaders or results, key=lambda res: res.end)
                first_done[key].append(first.end - t0)
                downloader_sys[key].append(float(first.data["cpu_sys_s"]))
                others = [res for res in results if res not in downloaders[:1]]
                waiter_cpu[key].append(sum(res.data["cpu_s"] for res in others) / max(1, len(others)))
                file_ratio[key].append(stats["file_bytes"] / repo_bytes)
                all_ratio[key].append(stats["bytes"] / repo_bytes)
                requests[key].append(stats["requests"])
                complete[key] = complete[key] and all(_complete(res, tool, sizes) for res in results)
                bench.drop(cache)
    med = {k: median(v) for k, v in walls.items()}
    return {
        "wall_s": {k: {"median": med[k], "samples": walls[k]} for k in walls},
        "first_worker_done_s": first_done,
        "cpu_s_per_non_downloading_worker": waiter_cpu,
        "downloader_sys_cpu_s": downloader_sys,
        "file_bytes_ratio": file_ratio,
        "all_bytes_ratio": all_ratio,
        "requests": requests,
        "complete_snapshots": complete,
    }


def cold_eight(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/cold-sharded"
    info = bench.hub.add_repo(repo_id, _sharded(p.shards, p.shard_mib * MIB))
    sizes, repo_bytes = info["sizes"], sum(info["sizes"].values())
    runs = {t: _cold_eight_once(bench, repo_id, sizes, t) for t in _transports(bench)}
    bench.figures["1_cold"] = {"repo_bytes": repo_bytes, "files": len(sizes), "transports": runs}
    for transport, fig in runs.items():
        file_ratio, all_ratio = fig["file_bytes_ratio"], fig["all_bytes_ratio"]
        note = f"all endpoints incl. API JSON: {median(all_ratio['plugin/8']):.4f}"
        if transport != "http":
            note += (
                f"; Xet: file bytes are the reconstruction JSON plus the xorb ranges (chunk headers; the shards "
                f"are random bytes, so nothing is compressed or deduplicated), 1 proc: "
                f"{median(file_ratio['plugin/1']):.4f}; the target keeps its 0.5% tolerance"
            )
        bench.rows.append(
            Row(
                f"1.bytes.{transport}",
                f"1 cold, 8 proc, {repo_bytes / MIB:.0f} MiB, {transport}",
                "file bytes served / repo bytes",
                median(file_ratio["plugin/8"]),
                median(file_ratio["hf/8"]),
                median(file_ratio["handrolled/8"]),
                Target("<=", 1.005, "= 1.00"),
                fmt="{:.2f}" if transport == "http" else "{:.4f}",
                note=note,
            )
        )
    for transport, fig in runs.items():
        med = {k: v["median"] for k, v in fig["wall_s"].items()}
        # Each repeat runs a tool's 1-process and 8-process cases back to back (ABBA across
        # repeats): their ratio is a pair, and the row is the median of the pairs. hf_xet's CPU for
        # one transfer changes mode from run to run, which a ratio of two medians mixes up.
        walls = {k: v["samples"] for k, v in fig["wall_s"].items()}
        pairs = {t: [a / b for a, b in zip(walls[f"{t}/8"], walls[f"{t}/1"], strict=True)] for t in TOOLS}
        fig["wall_pairs_8_over_1"] = pairs
        first_done, waiter_cpu = fig["first_worker_done_s"], fig["cpu_s_per_non_downloading_worker"]
        bench.rows.append(
            Row(
                f"1.wall.{transport}",
                f"1 cold, 8 proc, {repo_bytes / MIB:.0f} MiB, {transport}",
                "wall 8 proc / 1-proc cold (same tool), median of pairs",
                median(pairs["plugin"]),
                median(pairs["hf"]),
                median(pairs["handrolled"]),
                Target("<=", 1.10, "<= 1.10"),
                note=(
                    f"plugin pairs {_spread(pairs['plugin'])}, ratio of the medians "
                    f"{med['plugin/8'] / med['plugin/1']:.2f}; "
                    f"plugin 8 proc: the downloading worker done at {median(first_done['plugin/8']):.2f}s, the last "
                    f"of the 7 waiting ones at {med['plugin/8']:.2f}s (each of them used "
                    f"{median(waiter_cpu['plugin/8']) * 1000:.0f} ms CPU); plugin 8 proc / A 1 proc = "
                    f"{med['plugin/8'] / med['hf/1']:.2f}; "
                    f"1-proc cold: plugin {med['plugin/1']:.2f}s, A {med['hf/1']:.2f}s, B {med['handrolled/1']:.2f}s"
                ),
            )
        )
        if not all(fig["complete_snapshots"].values()):
            bad = [k for k, ok in fig["complete_snapshots"].items() if not ok]
            bench.notes.append(f"1 ({transport}): incomplete snapshots returned: {bad}")


# --- 2. two repos, two processes each ------------------------------------------------------------
def two_repos(bench: Bench) -> None:
    p = bench.profile
    spec = _sharded(p.pair_shards, p.pair_shard_mib * MIB)
    repos = {"left": "bench/pair-left", "right": "bench/pair-right"}
    for repo_id in repos.values():
        bench.hub.add_repo(repo_id, spec)
    rate = p.stream_mib_s * MIB
    figures: dict[str, Any] = {}
    modes = (("paced", rate), ("loopback", None)) if p.loopback_pair else (("paced", rate),)
    for mode, stream_rate in modes:
        bench.hub.set_stream_rate(stream_rate)
        walls: dict[str, list[float]] = {f"{t}/{c}": [] for t in TOOLS for c in ("left", "right", "both")}
        for r in range(p.pair_repeats):
            for tool in _rotate(TOOLS, r):
                for config in _rotate(("left", "right", "both"), r):
                    chosen = list(repos.values()) if config == "both" else [repos[config]]
                    cache = bench.new_cache("pair")
                    session = _session()
                    specs = [task(step(tool, **_args(tool, repo_id, "main", session))) for repo_id in chosen]
                    results = bench.run(cache, [s for s in specs for _ in range(2)])
                    walls[f"{tool}/{config}"].append(wall(results))
                    bench.drop(cache)
        med = {k: median(v) for k, v in walls.items()}

        def ratio(tool: str, med: dict[str, float] = med) -> float:
            return med[f"{tool}/both"] / max(med[f"{tool}/left"], med[f"{tool}/right"])

        def serial(tool: str, med: dict[str, float] = med) -> float:
            return (med[f"{tool}/left"] + med[f"{tool}/right"]) / max(med[f"{tool}/left"], med[f"{tool}/right"])

        figures[mode] = {
            "stream_rate": stream_rate,
            "wall_s": {k: {"median": med[k], "samples": walls[k]} for k in med},
        }
        what = f"per-stream cap {p.stream_mib_s:g} MiB/s" if stream_rate else "raw loopback"
        bench.rows.append(
            Row(
                f"2.{mode}",
                f"2 two repos x 2 proc, {what}",
                "wall both / max(each alone)",
                ratio("plugin"),
                ratio("hf"),
                ratio("handrolled"),
                Target("<=", 1.10, "<= 1.10"),
                note=(
                    f"A and B take no cross-repo lock: their ratio is what this machine allows; "
                    f"full serialization would be {serial('plugin'):.2f}; both: plugin {med['plugin/both']:.2f}s, "
                    f"A {med['hf/both']:.2f}s, B {med['handrolled/both']:.2f}s"
                ),
            )
        )
    bench.hub.set_stream_rate(None)
    bench.figures["2_two_repos"] = figures


# --- 3. warm, pinned commit --------------------------------------------------------------------
def _many_files(n: int) -> dict[str, int | str]:
    files: dict[str, int | str] = dict(_metadata())
    for i in range(n - len(files)):
        files[f"data/{i // 100:02d}/item-{i:05d}.json"] = json.dumps({"id": i, "text": "x" * (i % 200)})
    return files


def warm_pinned(bench: Bench) -> None:
    p = bench.profile
    small_files: dict[str, int | str] = {**_metadata(), "model.safetensors": MIB}
    small_files.pop("generation_config.json")
    repos = {
        "small": ("bench/warm-small", bench.hub.add_repo("bench/warm-small", small_files), p.small_calls),
        "many": ("bench/warm-many", bench.hub.add_repo("bench/warm-many", _many_files(p.many_files)), p.many_calls),
    }
    cache = bench.new_cache("warm")
    figures: dict[str, Any] = {}
    first_row = len(bench.rows)
    requests_total = dict.fromkeys(TOOLS, 0)
    for kind, (repo_id, info, calls) in repos.items():
        commit = info["commit"]
        snapshot = str(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit)
        steps = [step(tool, **_args(tool, repo_id, commit)) for tool in TOOLS]
        bench.run(cache, [task(*steps)])  # fills the cache (plugin first: its record too)
        # Requests made by each tool's warm calls, each in a fresh process (first call included).
        reqs: dict[str, int] = {}
        for tool in TOOLS:
            bench.hub.reset()
            bench.run(cache, [task(step(tool, **_args(tool, repo_id, commit)), rounds=3)])
            reqs[tool] = bench.hub.stats()["requests"]
        per_call: dict[str, list[float]] = {t: [] for t in (*TOOLS, "statwalk")}
        first_call: dict[str, list[float]] = {t: [] for t in TOOLS}
        for _ in range(p.warm_repeats):
            # One process, the tools interleaved call by call; the first call of each is reported apart.
            first = bench.run(cache, [task(*steps, step("statwalk", snapshot=snapshot))])[0]
            for tool in TOOLS:
                first_call[tool].append(first.durations(tool)[0])
            res = bench.run(cache, [task(*steps, step("statwalk", snapshot=snapshot), rounds=calls, warmup=1)])[0]
            for name in per_call:
                per_call[name].append(median(res.durations(name)))
        med = {k: median(v) for k, v in per_call.items()}
        figures[kind] = {
            "files": len(info["sizes"]),
            "requests_in_3_warm_calls": reqs,
            "per_call_s": {k: {"median": med[k], "samples": per_call[k]} for k in med},
            "first_call_in_fresh_process_s": {k: median(v) for k, v in first_call.items()},
        }
        n = len(info["sizes"])
        label = f"3 warm pinned, {n} files"
        ms = {k: f"{v * 1000:.1f}" for k, v in med.items()}
        times = (
            f"per call: plugin {ms['plugin']} ms, A {ms['hf']} ms, B {ms['handrolled']} ms, "
            f"stat walk {ms['statwalk']} ms"
        )
        for tool in TOOLS:
            requests_total[tool] += reqs[tool]
        bench.rows.append(
            Row(
                f"3.{kind}.vs_a",
                label,
                "per-call time / A's per-call time",
                med["plugin"] / med["hf"],
                1.0,
                med["handrolled"] / med["hf"],
                Target("<=", 1.0 if kind == "small" else 0.1, "<= 1.0" if kind == "small" else "<= 0.1"),
                fmt="{:.3f}",
                note=times,
            )
        )
        bench.rows.append(
            Row(
                f"3.{kind}.vs_floor",
                label,
                "per-call time / os.stat walk (floor)",
                med["plugin"] / med["statwalk"],
                med["hf"] / med["statwalk"],
                med["handrolled"] / med["statwalk"],
                Target("<=", 1.5, "<= 1.5") if kind == "many" else Target("info", 0, "(info)"),
                fmt="{:.1f}",
            )
        )
    bench.rows.insert(
        first_row,
        Row(
            "3.requests",
            "3 warm pinned",
            "HTTP requests, 3 warm calls per repo",
            float(requests_total["plugin"]),
            float(requests_total["hf"]),
            float(requests_total["handrolled"]),
            Target("<=", 0, "= 0"),
            fmt="{:.0f}",
        ),
    )
    bench.figures["3_warm_pinned"] = figures
    bench.drop(cache)


# --- 4. warm branch, 8 workers, one session ---------------------------------------------------------
def _pin_file(bench: Bench, name: str, commits: dict[str, str]) -> Path:
    """A pin file of ``main`` of each repo (repo id -> commit), as ``--hf-update-pins`` writes it."""
    path = bench.workdir / "pins" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [
        {"repo_id": r, "repo_type": "model", "revision": "main", "commit": c} for r, c in sorted(commits.items())
    ]
    path.write_text(pins.render(entries), encoding="utf-8")
    return path


def warm_branch(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/warm-branch"
    info = bench.hub.add_repo(repo_id, {**_metadata(), "model.safetensors": MIB})
    pin_file = _pin_file(bench, "warm-branch", {repo_id: info["commit"]})
    cache = bench.new_cache("branch")
    bench.run(cache, [task(*(step(tool, **_args(tool, repo_id, "main")) for tool in TOOLS))])
    revision_requests: dict[str, list[int]] = {t: [] for t in (*TOOLS, "pinned")}
    total_requests: dict[str, list[int]] = {t: [] for t in (*TOOLS, "pinned")}
    walls: dict[str, list[float]] = {t: [] for t in (*TOOLS, "pinned")}
    calls = 2
    for r in range(p.repeats):
        for tool in _rotate(TOOLS, r):
            bench.hub.reset()
            session = _session()  # one test session: 8 workers sharing its id, as under xdist
            spec = task(step(tool, **_args(tool, repo_id, "main", session)), rounds=calls)
            results = bench.run(cache, [spec] * 8)
            stats = bench.hub.stats()
            revision_requests[tool].append(stats["revision_requests"])
            total_requests[tool].append(stats["requests"])
            walls[tool].append(wall(results))
        # The same session with the pin file (--hf-pins): main is the pinned commit, asked of no one.
        bench.hub.reset()
        spec = task(step("plugin", **_args("plugin", repo_id, "main", _session(), pins=str(pin_file))), rounds=calls)
        results = bench.run(cache, [spec] * 8)
        stats = bench.hub.stats()
        revision_requests["pinned"].append(stats["revision_requests"])
        total_requests["pinned"].append(stats["requests"])
        walls["pinned"].append(wall(results))
    med_rev = {t: median(v) for t, v in revision_requests.items()}
    bench.figures["4_warm_branch"] = {
        "workers": 8,
        "calls_per_worker": calls,
        "revision_requests": revision_requests,
        "all_requests": total_requests,
        "wall_s": {t: {"median": median(v), "samples": v} for t, v in walls.items()},
    }
    bench.rows.append(
        Row(
            "4.revision",
            f"4 warm branch, 8 proc x {calls} calls",
            "revision requests per session",
            med_rev["plugin"],
            med_rev["hf"],
            med_rev["handrolled"],
            Target("<=", 1, "<= 1"),
            fmt="{:.0f}",
            note=(
                f"all requests: plugin {median(total_requests['plugin']):.0f}, A {median(total_requests['hf']):.0f}, "
                f"B {median(total_requests['handrolled']):.0f}; wall: plugin {median(walls['plugin']):.2f}s, "
                f"A {median(walls['hf']):.2f}s, B {median(walls['handrolled']):.2f}s"
            ),
        )
    )
    bench.rows.append(
        Row(
            "4.revision.pinned",
            f"4 warm branch, pinned (--hf-pins), 8 proc x {calls} calls",
            "revision requests per session",
            med_rev["pinned"],
            None,
            None,
            Target("<=", 0, "= 0"),
            fmt="{:.0f}",
            note=(
                f"the same session without the pin file: {med_rev['plugin']:.0f}; all requests "
                f"{median(total_requests['pinned']):.0f} (without: {median(total_requests['plugin']):.0f}); "
                f"wall {median(walls['pinned']):.2f}s"
            ),
        )
    )
    bench.drop(cache)
    _fleet(bench)


def _fleet(bench: Bench) -> None:
    """Revision requests of a fleet's CI run, with and without a pin file: measured small, then the formula."""
    n, m = FLEET_RUNNERS, FLEET_SNAPSHOTS
    commits = {
        f"bench/fleet-{i}": bench.hub.add_repo(f"bench/fleet-{i}", {**_metadata(), "model.safetensors": 4096})["commit"]
        for i in range(m)
    }
    pin_file = _pin_file(bench, "fleet", commits)
    cache = bench.new_cache("fleet")
    bench.run(cache, [task(*(step("plugin", name=r, **_args("plugin", r, "main")) for r in commits))])

    def ci_run(**extra: Any) -> int:
        """One CI run: ``n`` runners, each a test session of its own materializing the ``m`` snapshots."""
        bench.hub.reset()
        runners = []
        for _ in range(n):
            session = _session()
            runners.append(
                task(*(step("plugin", name=r, **_args("plugin", r, "main", session, **extra)) for r in commits))
            )
        bench.run(cache, runners)
        return int(bench.hub.stats()["revision_requests"])

    unpinned = ci_run()
    pinned = ci_run(pins=str(pin_file))
    bench.figures["4_fleet"] = {"runners": n, "branch_snapshots": m, "unpinned": unpinned, "pinned": pinned}
    bench.rows.append(
        Row(
            "4.fleet",
            f"4 fleet, {n} runners x {m} branch snapshots",
            "revision requests per CI run, pinned",
            float(pinned),
            None,
            None,
            Target("<=", 0, "= 0"),
            fmt="{:.0f}",
            note=f"without the pin file: {unpinned} (N x M = {n * m}); see the fleet section for the formula",
        )
    )
    big_n, big_m = 500, 20
    head = (
        "| runners x branch snapshots | revision requests without a pin file | with `--hf-pins` | |\n"
        "|---|---|---|---|\n"
    )
    body = (
        f"| {n} x {m} | {unpinned} | {pinned} | measured: {n} test sessions (processes) of {m} snapshots each, "
        "warm cache, local Hub counters |\n"
        "| N x M | N x M per CI run (one per branch snapshot per session) | 0 per CI run; M per scheduled "
        "`pins check` | formula |\n"
        f"| {big_n} x {big_m} | {big_n * big_m:,} per CI run: {big_n * big_m / HUB_API_QUOTA:.0f} x the Hub's "
        f"{HUB_API_QUOTA} API calls per 5 minutes | 0; {big_m} per `pins check` | formula |\n"
    )
    text = (
        "Each runner of a CI fleet is a test session of its own, and a session asks the Hub once for each branch or "
        "tag it uses; with a pin file (`--hf-pins`) it asks for none: the pinned commits come from the file, and "
        "only the scheduled `pytest-hfsnapshot pins check` asks, once per pin.\n\n" + head + body
    )
    bench.sections.append(("4 fleet: revision requests with and without a pin file", text))
    bench.drop(cache)


# --- 5. repair one truncated shard -------------------------------------------------------------------
def repair(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/repair-sharded"
    info = bench.hub.add_repo(repo_id, _sharded(p.shards, p.shard_mib * MIB))
    sizes, commit = info["sizes"], info["commit"]
    shard = f"model-00002-of-{p.shards:05d}.safetensors"
    shard_bytes = sizes[shard]
    figures: dict[str, Any] = {"shard_bytes": shard_bytes}
    for transport in _transports(bench):
        ratio: dict[str, list[float]] = {t: [] for t in TOOLS}
        file_ratio: dict[str, list[float]] = {t: [] for t in TOOLS}
        repaired: dict[str, list[bool]] = {t: [] for t in TOOLS}
        for tool in TOOLS:
            cache = bench.new_cache("repair")
            bench.run(cache, [task(step(tool, **_args(tool, repo_id, "main")))], transport)
            blob = _blob(cache, repo_id, commit, shard)  # with the shared store: the store file
            pristine = bench.workdir / f"pristine-{tool}"
            shutil.copyfile(blob, pristine)
            for _ in range(p.repeats):
                _writable(blob)
                os.truncate(blob, shard_bytes // 2)
                bench.hub.reset()
                res = bench.run(cache, [task(step(tool, **_args(tool, repo_id, "main")), inspect=True)], transport)[0]
                stats = bench.hub.stats()
                ratio[tool].append(stats["bytes"] / shard_bytes)
                file_ratio[tool].append(stats["file_bytes"] / shard_bytes)
                repaired[tool].append(_complete(res, tool, sizes))
                blob = _blob(cache, repo_id, commit, shard)
                if os.path.getsize(blob) != shard_bytes:
                    _writable(blob)
                    shutil.copyfile(pristine, blob)  # undo what the tool left broken, for the next repeat
            pristine.unlink()
            bench.drop(cache)
        figures[transport] = {"bytes_ratio": ratio, "file_bytes_ratio": file_ratio, "snapshot_complete_after": repaired}

        def cell(tool: str, ratio: dict[str, list[float]] = ratio, repaired: dict[str, list[bool]] = repaired) -> str:
            value = f"{median(ratio[tool]):.3f}"
            return value if all(repaired[tool]) else f"{value} (left broken)"

        note = "all endpoints counted; 'left broken': the returned snapshot still has the truncated file"
        if transport != "http":
            note += (
                f"; Xet: the token route, the reconstruction JSON and the xorb chunk headers are in it (file bytes "
                f"alone: {median(file_ratio['plugin']):.4f}); the target keeps its 1% tolerance"
            )
        bench.rows.append(
            Row(
                f"5.repair.{transport}",
                f"5 repair, truncated {shard_bytes / MIB:.0f} MiB shard, {transport}",
                "bytes re-downloaded / shard size",
                median(ratio["plugin"]) if all(repaired["plugin"]) else float("inf"),
                median(ratio["hf"]),
                median(ratio["handrolled"]),
                Target("<=", 1.01, "<= 1.01"),
                fmt="{:.3f}",
                cells={t: cell(n) for t, n in (("plugin", "plugin"), ("a", "hf"), ("b", "handrolled"))},
                note=note,
            )
        )
    bench.figures["5_repair"] = figures


# --- 6. peak RSS while materializing a large file ---------------------------------------------------
def peak_rss(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/huge"
    started = time.monotonic()
    info = bench.hub.add_repo(repo_id, {**_metadata(), "model.safetensors": p.huge_mib * MIB})
    log(f"6: {p.huge_mib} MiB repo generated in {time.monotonic() - started:.1f}s")
    figures: dict[str, Any] = {
        "file_mib": p.huge_mib,
        "method": "ru_maxrss of the worker from os.wait4 (the server is another process); VmHWM cross-check",
    }
    for transport in _transports(bench):
        rss: dict[str, list[float]] = {t: [] for t in ("noop", "plugin", "hf")}
        hwm: dict[str, list[float]] = {t: [] for t in rss}
        walls: dict[str, list[float]] = {t: [] for t in rss}
        for _ in range(p.rss_repeats):
            for tool in rss:
                cache = bench.new_cache("rss")
                args = {} if tool == "noop" else _args(tool, repo_id, info["commit"])
                res = bench.run(cache, [task(step(tool, **args))], transport)[0]
                rss[tool].append(res.maxrss_kib / 1024)
                hwm[tool].append(res.data["rss_peak_kib"] / 1024)
                walls[tool].append(wall([res]))
                bench.drop(cache)
        med = {t: median(v) for t, v in rss.items()}
        figures[transport] = {"ru_maxrss_mib": rss, "vmhwm_mib": hwm, "wall_s": walls}
        bench.rows.append(
            Row(
                f"6.rss.{transport}",
                f"6 materialize one {p.huge_mib} MiB file, {transport}",
                "peak RSS of the worker, MiB",
                med["plugin"],
                med["hf"],
                None,
                Target("<=", 150, "<= 150"),
                fmt="{:.0f}",
                note=f"idle worker with everything imported: {med['noop']:.0f} MiB; download+verify "
                f"{median(walls['plugin']):.1f}s (A {median(walls['hf']):.1f}s)",
            )
        )
    bench.figures["6_peak_rss"] = figures


# --- 7. deep verify throughput ---------------------------------------------------------------------
def deep_verify(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/verify"
    info = bench.hub.add_repo(repo_id, _sharded(p.verify_files, p.verify_file_mib * MIB))
    commit = info["commit"]
    cache = bench.new_cache("verify")
    snapshot = str(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit)
    bench.run(cache, [task(step("plugin", **_args("plugin", repo_id, commit)))])
    one = ["*.json", "*.md", "model-00001-of-*"]
    steps = [
        step("sha256", "plain_all", snapshot=snapshot),
        step("plugin", "plugin_all", **_args("plugin", repo_id, commit, verify="sha256")),
        step("sha256", "plain_one", snapshot=snapshot, patterns=one),
        step("plugin", "plugin_one", **_args("plugin", repo_id, commit, verify="sha256", allow_patterns=one)),
        step("hf_verify", "hf_all", repo_id=repo_id, revision=commit),
        step(
            "sha256_procs",
            "plain_procs",
            snapshot=snapshot,
            processes=min(len(os.sched_getaffinity(0)), p.verify_files),
        ),
    ]
    res = bench.run(cache, [task(*steps, rounds=p.verify_rounds, warmup=1)])[0]
    bench.drop(cache)
    total = sum(info["sizes"].values())
    one_bytes = (
        sum(s for path, s in info["sizes"].items() if not path.endswith(".safetensors"))
        + info["sizes"][f"model-00001-of-{p.verify_files:05d}.safetensors"]
    )
    med = {s["name"]: median(res.durations(s["name"])) for s in steps}
    cores = len(os.sched_getaffinity(0))
    used = min(cores, p.verify_files)
    tp = {
        "plain_all": total / med["plain_all"],
        "plugin_all": total / med["plugin_all"],
        "plain_one": one_bytes / med["plain_one"],
        "plugin_one": one_bytes / med["plugin_one"],
        "hf_all": total / med["hf_all"],
        "plain_procs": total / med["plain_procs"],
    }
    bench.figures["7_deep_verify"] = {
        "bytes_all": total,
        "bytes_one": one_bytes,
        "cores": cores,
        "seconds": {s["name"]: res.durations(s["name"]) for s in steps},
        "throughput_mib_s": {k: v / MIB for k, v in tp.items()},
    }
    mibs = {k: f"{v / MIB:.0f}" for k, v in tp.items()}
    bench.rows.append(
        Row(
            "7.one",
            f"7 sha256 verify, 1 x {p.verify_file_mib} MiB",
            "throughput / plain 1-stream sha256",
            tp["plugin_one"] / tp["plain_one"],
            None,
            None,
            Target(">=", 0.8, ">= 0.8"),
            note=f"plugin {mibs['plugin_one']} MiB/s, plain {mibs['plain_one']} MiB/s",
        )
    )
    bench.rows.append(
        Row(
            "7.all",
            f"7 sha256 verify, {p.verify_files} x {p.verify_file_mib} MiB",
            f"throughput / (plain 1-stream x {used} cores)",
            tp["plugin_all"] / tp["plain_all"] / used,
            tp["hf_all"] / tp["plain_all"] / used,
            None,
            Target(">=", 0.8, ">= 0.8"),
            note=f"plugin {mibs['plugin_all']} MiB/s = {tp['plugin_all'] / tp['plain_all']:.2f}x plain "
            f"({mibs['plain_all']} MiB/s); what {used} cores give right now: {used} plain processes "
            f"{mibs['plain_procs']} MiB/s = {tp['plain_procs'] / tp['plain_all']:.2f}x plain, plugin / that = "
            f"{tp['plugin_all'] / tp['plain_procs']:.2f}; A = HfApi.verify_repo_checksums "
            f"({mibs['hf_all']} MiB/s, lists the tree)",
        )
    )


# --- 8. plugin overhead on a suite that uses no snapshot ----------------------------------------------
def _write_suite(folder: Path, tests: int) -> None:
    per_module = 50
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for m in range(0, tests, per_module):
        count = min(per_module, tests - m)
        body = ["import pytest", ""]
        body += [f"def test_{j}():\n    assert {j} + 1 == {j + 1}\n" for j in range(count - 10)]
        body.append("@pytest.mark.parametrize('n', range(10))\ndef test_param(n):\n    assert n >= 0\n")
        (folder / f"test_mod_{m // per_module:03d}.py").write_text("\n".join(body), encoding="utf-8")


def plugin_overhead(bench: Bench) -> None:
    p = bench.profile
    suite = bench.workdir / "suite"
    _write_suite(suite, p.suite_tests)
    cache = bench.new_cache("suite")
    env = bench.env(cache)
    modes = {"with": [], "without": ["-p", "no:hfsnapshot"]}
    walls: dict[str, list[float]] = {m: [] for m in modes}
    reported: dict[str, list[float]] = {m: [] for m in modes}
    bench.hub.reset()
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    subprocess.run([*base, "--co", str(suite)], env=env, cwd=suite, capture_output=True, check=False)  # warm .pyc
    for r in range(p.suite_repeats + 1):
        for mode in ("with", "without") if r % 2 == 0 else ("without", "with"):
            started = time.perf_counter()
            done = subprocess.run([*base, *modes[mode], str(suite)], env=env, cwd=suite, capture_output=True, text=True)
            seconds = time.perf_counter() - started
            tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            if done.returncode != 0 or f"{p.suite_tests} passed" not in tail:
                raise RuntimeError(f"8: the suite did not pass ({mode}): {tail}\n{done.stderr[-2000:]}")
            if r == 0:
                continue  # a warm-up round
            walls[mode].append(seconds)
            found = re.search(r"in ([0-9.]+)s", tail)
            reported[mode].append(float(found.group(1)) if found else float("nan"))
    requests = bench.hub.stats()["requests"]
    bench.drop(cache)
    shutil.rmtree(suite, ignore_errors=True)
    med = {m: median(v) for m, v in walls.items()}
    rep = {m: median(v) for m, v in reported.items()}
    bench.figures["8_plugin_overhead"] = {
        "tests": p.suite_tests,
        "wall_s": walls,
        "pytest_reported_s": reported,
        "hub_requests": requests,
    }
    bench.rows.append(
        Row(
            "8.overhead",
            f"8 suite of {p.suite_tests} tests, no snapshot",
            "process wall / same with -p no:hfsnapshot",
            med["with"] / med["without"],
            None,
            None,
            Target("<=", 1.02, "<= 1.02"),
            fmt="{:.3f}",
            note=(
                f"wall {med['with']:.2f}s vs {med['without']:.2f}s; pytest's own 'in Xs' "
                f"(session start to end, excludes plugin import): {rep['with']:.2f}s vs {rep['without']:.2f}s "
                f"= {rep['with'] / rep['without']:.3f}; Hub requests: {requests}"
            ),
        )
    )


# --- 9. wire cost per transport -------------------------------------------------------------------
WIRE_MIB = 32


def _flip(path: Path, offset: int) -> None:
    """Flip one byte of ``path`` in place (same size: only a hash finds it)."""
    _writable(path)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))


def _wire_once(bench: Bench, transport: str, repo_id: str, commit: str, sizes: dict[str, int]) -> dict[str, Any]:
    """Requests and body bytes of each case (a)-(e) on one transport."""
    out: dict[str, Any] = {}

    def measure(case: str, cache: Path, tool: str, revision: str) -> None:
        bench.hub.reset()
        spec = task(step(tool, **_args(tool, repo_id, revision, _session())), inspect=True)
        res = bench.run(cache, [spec], transport)[0]
        stats = bench.hub.stats(log=True)
        out[case] = {
            "requests": stats["requests"],
            "bytes": stats["bytes"],
            "file_bytes": stats["file_bytes"],
            "head": stats["head_requests"],
            "complete": _complete(res, tool, sizes),
            "log": stats["log"],
        }

    cache = bench.new_cache("wire")
    measure("cold", cache, "plugin", "main")
    measure("warm_pinned", cache, "plugin", commit)
    measure("warm_branch", cache, "plugin", "main")
    blob = _blob(cache, repo_id, commit, "model.safetensors")
    out["shared_store"] = f"models--{repo_id.replace('/', '--')}" not in str(blob)
    _writable(blob)
    os.truncate(blob, sizes["model.safetensors"] // 2)
    measure("repair", cache, "plugin", "main")
    bench.drop(cache)
    cache = bench.new_cache("wire-hf")
    measure("cold_snapshot_download", cache, "hf", "main")
    bench.drop(cache)
    return out


def _wire_shared(bench: Bench, transport: str, repos: dict[str, str], commits: dict[str, str]) -> dict[str, Any]:
    """(f): two repos, the same weight bytes; one byte of the first one's file flipped."""
    cache = bench.new_cache("wire-share")
    first, second = repos["first"], repos["second"]
    bench.run(cache, [task(*(step("plugin", r, **_args("plugin", r, "main")) for r in (first, second)))], transport)
    blobs = {k: _blob(cache, r, commits[k], "model.safetensors") for k, r in repos.items()}
    _flip(blobs["first"], WIRE_MIB * MIB // 3)
    out: dict[str, Any] = {"one_store_file": blobs["first"] == blobs["second"]}
    for key, repo_id in repos.items():
        bench.hub.reset()
        spec = task(step("plugin", **_args("plugin", repo_id, "main", _session(), verify="sha256")))
        bench.run(cache, [spec], transport)  # raises if materialize fails (e.g. a ContentMismatch)
        stats = bench.hub.stats(log=True)
        out[key] = {k: stats[k] for k in ("requests", "bytes", "file_bytes", "log")}
    bench.drop(cache)
    return out


def _mib(n: float) -> str:
    return f"{n / MIB:.2f} MiB" if n >= MIB / 100 else f"{n:.0f} B"


def wire_cost(bench: Bench) -> None:
    repo_id = "bench/wire"
    files: dict[str, Any] = {"config.json": _metadata()["config.json"], "model.safetensors": WIRE_MIB * MIB}
    info = bench.hub.add_repo(repo_id, files)
    weights = {"shared": "bench/wire-shared", "size": WIRE_MIB * MIB}
    repos = {"first": "bench/wire-share-a", "second": "bench/wire-share-b"}
    commits = {
        k: bench.hub.add_repo(r, {"config.json": json.dumps({"repo": r}), "model.safetensors": weights})["commit"]
        for k, r in repos.items()
    }
    transports = _transports(bench, "xet", "xet-noshare", "http")
    figures: dict[str, Any] = {"file_bytes": WIRE_MIB * MIB}
    for transport in transports:
        figures[transport] = _wire_once(bench, transport, repo_id, info["commit"], info["sizes"])
        figures[transport]["shared_file"] = _wire_shared(bench, transport, repos, commits)
    bench.figures["9_wire_cost"] = figures

    def pair(fig: dict[str, Any]) -> str:
        return f"{fig['requests']} / {_mib(fig['bytes'])}"

    head = (
        "| transport | (a) cold | (b) warm pinned | (c) warm branch, new session | (d) repair, truncated | "
        "(e) HEADs: cold materialize / cold snapshot_download | (f) file bytes after a flipped byte: 1st repo / 2nd |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for t in transports:
        f = figures[t]
        sf = f["shared_file"]
        store = "one store file" if sf["one_store_file"] else "a file per repo"
        body += (
            f"| {t} | {pair(f['cold'])} | {pair(f['warm_pinned'])} | {pair(f['warm_branch'])} | {pair(f['repair'])} | "
            f"{f['cold']['head']} / {f['cold_snapshot_download']['head']} (all requests {f['cold']['requests']} / "
            f"{f['cold_snapshot_download']['requests']}) | {_mib(sf['first']['file_bytes'])} / "
            f"{_mib(sf['second']['file_bytes'])} ({store}) |\n"
        )
    text = (
        f"A repo of config.json + a {WIRE_MIB} MiB random model.safetensors; each cell is requests / body bytes "
        "on every origin (Hub, CDN, CAS), from `materialize` in fresh worker processes. (f): two repos with "
        "the same weight bytes, one byte flipped in the first one's file, then sha256-verifying `materialize` "
        "of each.\n\n" + head + body
    )
    bench.sections.append(("9 wire cost per transport", text))
    for t in transports:
        f = figures[t]
        sd = f["cold_snapshot_download"]
        bench.rows.append(
            Row(
                f"9.requests.{t}",
                f"9 wire cost, cold, {t}",
                "requests (HEAD requests) of a cold fetch",
                float(f["cold"]["requests"]),
                float(sd["requests"]),
                None,
                Target("<=", sd["requests"], "<= A"),
                fmt="{:.0f}",
                cells={
                    "plugin": f"{f['cold']['requests']} ({f['cold']['head']} HEAD)",
                    "a": f"{sd['requests']} ({sd['head']} HEAD)",
                },
                note=f"bytes: plugin {_mib(f['cold']['bytes'])}, A {_mib(sd['bytes'])}",
            )
        )
    for t in transports:
        sf = figures[t]["shared_file"]
        bench.rows.append(
            Row(
                f"9.shared.{t}",
                f"9 flipped byte in a file of 2 repos, {t}",
                "file bytes fetched for the 2nd repo (sha256)",
                float(sf["second"]["file_bytes"]),
                None,
                None,
                Target("<=", 0, "= 0"),
                fmt="{:.0f}",
                note=(
                    f"1st repo: file bytes {_mib(sf['first']['file_bytes'])}, {sf['first']['requests']} requests; "
                    f"2nd repo: {sf['second']['requests']} request(s), {sf['second']['bytes']} B of API JSON in all "
                    f"({'one store file for both repos' if sf['one_store_file'] else 'each repo has its own file'})"
                ),
            )
        )


# --- 12. cold cost per transport, behind a CI runner's link and on raw loopback ------------------------
#: The link speed CI runners see (issue 13).
LINK_MIB_S = 200


#: ABBA pairs of workload 12 per profile: at least 9 where the figures are reported.
COLD_COST_PAIRS = {"smoke": 2, "quick": 9, "full": 11}


def _spread(values: list[float]) -> str:
    return f"{median(values):.3f} (min {min(values):.3f}, max {max(values):.3f}, {len(values)} pairs)"


def _wall_ratios(runs: list[dict[str, float]], against: list[dict[str, float]]) -> list[float]:
    """Each round's wall of one side over another's."""
    return [x["wall"] / y["wall"] for x, y in zip(runs, against, strict=True)]


def _cold_cost_run(
    bench: Bench,
    tool: str,
    repo_id: str,
    commit: str,
    transport: str,
    nbytes: int,
    env: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, float]:
    """One cold fetch of ``nbytes`` in its own process (``env``: added to its environment; ``extra``:
    more arguments of the tool), then one bare hashlib pass over the file it left, in another."""
    cache = bench.new_cache("cold-cost")
    os.sync()  # the last run's dirty pages must not be written back during this one
    spec = task(step(tool, **_args(tool, repo_id, commit, **extra)))
    res = bench.run(cache, [spec], transport, prime=PRIME_FACTOR * nbytes, env=env)[0]
    out = {"wall": res.durations(tool)[0], "cpu": float(res.data["cpu_s"]), "rss": res.maxrss_kib / 1024}
    if res.result(tool).get("beside_cpu") is not None:
        out["beside_cpu"] = float(res.result(tool)["beside_cpu"])
    if res.data.get("machine_busy_s") is not None:
        out["machine_busy"] = float(res.data["machine_busy_s"])
        out["cpus"] = float(res.data["machine_cpus"])
    if tool == "plugin":
        out["rehashed"] = float(res.result(tool).get("rehashed") or 0)
        if res.data.get("follower_cpu_s") is not None:
            out["follower_cpu"] = float(res.data["follower_cpu_s"])
    snapshot = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit
    os.sync()
    hashed = bench.run(cache, [task(step("sha256", snapshot=str(snapshot), patterns=["*.safetensors"]))], transport)[0]
    out["hash_cpu"] = float(hashed.data["cpu_s"])
    bench.drop(cache)
    return out


def _cpus(runs: list[dict[str, float]]) -> str:
    """The machine's core count the runs saw."""
    return "/".join(sorted({f"{r['cpus']:.0f}" for r in runs if "cpus" in r})) or "?"


def cold_cost(bench: Bench) -> None:
    """Workload 12: what hashing on arrival costs, as ABBA pairs of processes (plugin, A = snapshot_download).

    Each fetch runs in a fresh process with dirty pages flushed and free memory primed
    (:class:`~bench.runner.MemoryPrimer`) before it; after each, a bare
    ``hashlib.sha256`` pass over the file it left runs in another process. Per pair: the wall ratio
    plugin / A, and the CPU the plugin added over A in units of that bare pass (its own measure
    for this file on this run: 1.0 means exactly one extra hash pass). Medians of the pairs with
    their spread, so a noisy neighbour shows as spread instead of moving a single figure.
    """
    p = bench.profile
    pairs_n = COLD_COST_PAIRS.get(p.name, 9)
    repo_id = "bench/cold-cost"
    info = bench.hub.add_repo(repo_id, {**_metadata(), "model.safetensors": p.huge_mib * MIB})
    commit = info["commit"]
    gib = p.huge_mib / 1024
    figures: dict[str, Any] = {"file_mib": p.huge_mib, "link_mib_s": LINK_MIB_S, "pairs": pairs_n}
    for transport in _transports(bench):
        for mode, rate, goal in (("capped", LINK_MIB_S * MIB, 1.02), ("uncapped", None, 1.10)):
            bench.hub.set_link_rate(rate)
            runs: dict[str, list[dict[str, float]]] = {"plugin": [], "hf": []}
            for n in range(pairs_n):
                order = ("plugin", "hf") if n % 2 == 0 else ("hf", "plugin")  # A B, B A, A B, ...
                for tool in order:
                    runs[tool].append(_cold_cost_run(bench, tool, repo_id, commit, transport, p.huge_mib * MIB))
            plug, hf = runs["plugin"], runs["hf"]
            wall_pairs = _wall_ratios(plug, hf)
            # One bare pass: the median over every run of this cell (each run hashed its own file).
            hash_cpu = median([r["hash_cpu"] for r in plug + hf])
            added = [(a["cpu"] - b["cpu"]) / hash_cpu for a, b in zip(plug, hf, strict=True)]
            cpu_gib = {t: median([r["cpu"] for r in v]) / gib for t, v in runs.items()}
            # The plugin's own cost, apart from the client's: its hashing thread's CPU per run.
            own = [r["follower_cpu"] / hash_cpu for r in plug if "follower_cpu" in r]
            a_passes = [r["cpu"] / hash_cpu for r in hf]
            # The limit: A's run with one more sha256 pass of CPU packed into what the cores left idle
            # (every process on the machine counted: the Hub, hf_xet, the client). No hashing on arrival
            # can end sooner on these cores; what it cannot fit into idle time lengthens the wall.
            floor = [max(r["wall"], (r["machine_busy"] + hash_cpu) / r["cpus"]) / r["wall"] for r in hf if "cpus" in r]
            idle = [max(0.0, 1 - r["machine_busy"] / (r["cpus"] * r["wall"])) for r in hf if "cpus" in r]
            figures[f"{transport}/{mode}"] = {
                "runs": runs,
                "wall_pairs": wall_pairs,
                "cpu_added_passes": added,
                "hashing_thread_passes": own,
                "cpu_s_per_gib": {**cpu_gib, "sha256_pass": hash_cpu / gib},
                "floor_wall_ratios": floor,
                "idle_share_during_a": idle,
            }
            what = f"link capped at {LINK_MIB_S} MiB/s" if rate else "raw loopback"
            label = f"12 cold, one {p.huge_mib} MiB file, {transport}, {what}"
            note = (
                f"median of {pairs_n} ABBA pairs, each side in its own process, dirty pages flushed and free memory "
                f"primed before each; "
                f"wall plugin {median([r['wall'] for r in plug]):.2f}s, A {median([r['wall'] for r in hf]):.2f}s; "
                f"CPU s/GiB: plugin {cpu_gib['plugin']:.2f}, A {cpu_gib['hf']:.2f}, one sha256 pass "
                f"{hash_cpu / gib:.2f}; peak RSS plugin {median([r['rss'] for r in plug]):.0f} MiB, "
                f"A {median([r['rss'] for r in hf]):.0f} MiB; hashed after the transfer: "
                f"{median([r['rehashed'] for r in plug]) / MIB:.1f} MiB"
            )
            bench.rows.append(
                Row(
                    f"12.{mode}.{transport}",
                    label,
                    "wall / A's wall, median of pairs (min, max)",
                    median(wall_pairs),
                    1.0,
                    None,
                    Target("<=", goal, f"<= {goal:.2f}"),
                    fmt="{:.3f}",
                    note=f"pairs {_spread(wall_pairs)}; {note}",
                )
            )
            bench.rows.append(
                Row(
                    f"12.{mode}.{transport}.cpu",
                    label,
                    "CPU added over A, in sha256 passes, median of pairs",
                    median(added),
                    0.0,
                    None,
                    Target("<=", 1.15, "<= 1.15"),
                    fmt="{:.2f}",
                    note=(
                        f"pairs {_spread(added)}; A's own CPU for the same transfer ranged over "
                        f"{min(a_passes):.2f}..{max(a_passes):.2f} passes"
                    ),
                )
            )
            if floor:
                bench.rows.append(
                    Row(
                        f"12.{mode}.{transport}.floor",
                        label,
                        "least wall / A one more sha256 pass allows here, median of A's runs",
                        median(floor),
                        None,
                        None,
                        Target("info", goal, f"limit (target <= {goal:.2f})"),
                        fmt="{:.3f}",
                        note=(
                            f"runs {median(floor):.3f} (min {min(floor):.3f}, max {max(floor):.3f}); the cores were "
                            f"idle {median(idle):.0%} (min {min(idle):.0%}, max {max(idle):.0%}) of A's transfers "
                            f"({_cpus(hf)} cores, every process counted); one pass is {hash_cpu:.2f} CPU s; "
                            f"the plugin's wall ratio is {median(wall_pairs) / median(floor):.3f} x this limit"
                        ),
                    )
                )
            if own:
                bench.rows.append(
                    Row(
                        f"12.{mode}.{transport}.own",
                        label,
                        "CPU of the plugin's hashing thread, in sha256 passes, median of runs",
                        median(own),
                        None,
                        None,
                        Target("<=", 1.15, "<= 1.15"),
                        fmt="{:.2f}",
                        note=(
                            f"runs {median(own):.3f} (min {min(own):.3f}, max {max(own):.3f}, {len(own)} runs): "
                            "the thread that hashes a download while it arrives, clocked on its own "
                            "(time.thread_time), so the client's own swing is not in it"
                        ),
                    )
                )
    bench.hub.set_link_rate(None)
    bench.figures["12_cold_cost"] = figures


# --- 17. what a hash pass beside the client costs it, in the plugin and without it ----------------
#: The sides of workload 17: the tool, and its extra arguments (``other``/pace filled in per run).
#: ``bounded`` is A with the hf_xet settings the engine downloads with (Xet only): what the bounded
#: download buffer alone costs A's wall, apart from the hashing. ``again`` is A once more in each
#: round: the measure's own null, what its medians show when both sides are the same.
BESIDE_SIDES: dict[str, tuple[str, dict[str, Any]]] = {
    "hf": ("hf", {}),
    "again": ("hf", {}),
    "plugin": ("plugin", {}),
    "bounded": ("hf", {}),
    "thread": ("hf_beside", {"place": "thread"}),
    "process": ("hf_beside", {"place": "process"}),
}


def hash_beside(bench: Bench) -> None:
    """Workload 17: on each transport, A, the plugin, and A with a bare sha256 pass over another file
    of the same size beside it, in a thread (sharing the GIL) and in a process of its own, side by side;
    with them A once more (the measure's null) and, over Xet, A with the engine's hf_xet settings.

    Each run as in workload 12 (its own process, dirty pages flushed, memory primed, a bare pass
    over the file it left afterwards), the sides rotated ABBA. The bare pass beside A is paced
    as the link is (read 4 MiB, sleep until the next are due), unpaced on raw loopback. Per pair
    with A: the CPU added, and the part of it outside the hashing itself (the plugin's hashing
    thread, the bare pass's thread or process), which is what the hashing costs the client, and the
    wall ratio: what a hash pass beside the client costs its wall.
    """
    p = bench.profile
    rounds = COLD_COST_PAIRS.get(p.name, 9)
    repo_id = "bench/hash-beside"
    nbytes = p.huge_mib * MIB
    info = bench.hub.add_repo(repo_id, {**_metadata(), "model.safetensors": nbytes})
    commit = info["commit"]
    other = bench.workdir / "hash-beside-other.bin"
    with open(other, "wb") as handle:
        for _ in range(p.huge_mib):
            handle.write(os.urandom(MIB))
    figures: dict[str, Any] = {"file_mib": p.huge_mib, "link_mib_s": LINK_MIB_S, "rounds": rounds}
    figures["cores"] = _cores_beside(bench, rounds)
    for transport in _transports(bench):
        figures[transport] = _hash_beside_on(bench, transport, repo_id, commit, nbytes, other, rounds)
    other.unlink(missing_ok=True)
    bench.figures["17_hash_beside"] = figures


#: A sha256 pass over 1 GiB of memory, pinned to one core, that prints its own CPU seconds; with
#: ``spin``, a pass that never ends and says when it has begun.
_PINNED_PASS = """
import hashlib, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
block, digest = os.urandom(64 << 20), hashlib.sha256()
if sys.argv[2] == "spin":
    print("spinning", flush=True)
    while True:
        digest.update(block)
began = time.thread_time()
for _ in range(16):
    digest.update(block)
print(time.thread_time() - began)
"""


def _pinned_pass(busy_other: bool) -> float:
    """CPU seconds of one sha256 pass over 1 GiB on core 0, with the other core idle or hashing too."""
    spinner = None
    if busy_other:
        spinner = subprocess.Popen([sys.executable, "-c", _PINNED_PASS, "1", "spin"], stdout=subprocess.PIPE, text=True)
        assert spinner.stdout is not None
        spinner.stdout.readline()  # it has begun hashing
    try:
        out = subprocess.run(
            [sys.executable, "-c", _PINNED_PASS, "0", "pass"], capture_output=True, text=True, check=True
        ).stdout
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    return float(out)


def _cores_beside(bench: Bench, rounds: int) -> dict[str, Any]:
    """What a sha256 pass on the other core costs a CPU-bound pass on this one: the two cores' share
    of the host (an SMT sibling, the memory bus, a shared clock), apart from the client and the Hub.

    ABBA pairs of processes, each pinned: core 0 alone, core 0 with core 1 hashing. On one core
    there is nothing to measure.
    """
    if not {0, 1} <= os.sched_getaffinity(0):
        return {}
    runs: dict[bool, list[float]] = {False: [], True: []}
    for n in range(rounds):
        for busy in (False, True) if n % 2 == 0 else (True, False):
            runs[busy].append(_pinned_pass(busy))
    ratios = [b / a for a, b in zip(runs[False], runs[True], strict=True)]
    bench.rows.append(
        Row(
            "17.cores",
            "17 one core's sha256 pass over 1 GiB of memory, the other core hashing too",
            "CPU s of the pass with the other core busy / with it idle, median of pairs",
            median(ratios),
            1.0,
            None,
            Target("info", 1.0, "info"),
            fmt="{:.3f}",
            note=(
                f"pairs {_spread(ratios)}; alone {median(runs[False]):.3f} CPU s, beside {median(runs[True]):.3f} CPU s"
            ),
        )
    )
    return {"alone_cpu_s": runs[False], "beside_cpu_s": runs[True], "ratios": ratios}


def _hash_beside_on(
    bench: Bench, transport: str, repo_id: str, commit: str, nbytes: int, other: Path, rounds: int
) -> dict[str, Any]:
    """Workload 17 on one transport: its rows, and its runs per link (capped, uncapped)."""
    figures: dict[str, Any] = {}
    sides = [side for side in BESIDE_SIDES if side != "bounded" or transport == "xet"]
    for mode, rate in (("capped", LINK_MIB_S * MIB), ("uncapped", None)):
        bench.hub.set_link_rate(rate)
        runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for n in range(rounds):
            for side in sides if n % 2 == 0 else sides[::-1]:
                tool, extra = BESIDE_SIDES[side]
                if tool == "hf_beside":
                    extra = {**extra, "other": str(other), "bytes_per_second": rate}
                    paced_sha256(str(other))  # in the page cache, as the plugin's reads of a download are
                env = dict(xet.TRANSFER_SETTINGS) if side == "bounded" else None
                runs[side].append(_cold_cost_run(bench, tool, repo_id, commit, transport, nbytes, env=env, **extra))
        hash_cpu = median([r["hash_cpu"] for v in runs.values() for r in v])
        figures[mode] = {"runs": runs, "sha256_pass_cpu": hash_cpu}
        what = f"link capped at {LINK_MIB_S} MiB/s" if rate else "raw loopback"
        label = f"17 hashing beside the client, one {nbytes // MIB} MiB file, {transport}, {what}"
        a_passes = [r["cpu"] / hash_cpu for r in runs["hf"]]
        for side in sides[1:]:
            # The hashing's CPU: the plugin's thread, or the bare pass's thread or process. Only the
            # process's is outside the worker's own CPU.
            hashing = [x.get("follower_cpu" if side == "plugin" else "beside_cpu", 0.0) for x in runs[side]]
            total = [x["cpu"] + (h if side == "process" else 0.0) for x, h in zip(runs[side], hashing, strict=True)]
            a_cpu = [y["cpu"] for y in runs["hf"]]
            added = [(t - a) / hash_cpu for t, a in zip(total, a_cpu, strict=True)]
            own = [h / hash_cpu for h in hashing]
            rest = [(t - h - a) / hash_cpu for t, h, a in zip(total, hashing, a_cpu, strict=True)]
            walls = _wall_ratios(runs[side], runs["hf"])
            bench.rows.append(
                Row(
                    f"17.{transport}.{mode}.{side}",
                    label,
                    f"{side}: CPU added over A, in sha256 passes, median of pairs",
                    median(added),
                    None,
                    None,
                    Target("info", 1.15, "info (12's target <= 1.15)"),
                    fmt="{:.2f}",
                    note=(
                        f"pairs {_spread(added)}; the hashing itself {median(own):.2f} passes "
                        f"({min(own):.2f}..{max(own):.2f}); the client's CPU over A's {_spread(rest)}; "
                        f"A's own CPU {min(a_passes):.2f}..{max(a_passes):.2f} passes; one pass {hash_cpu:.2f} CPU s; "
                        f"wall / A's wall {_spread(walls)}"
                    ),
                )
            )
        null = _wall_ratios(runs["again"], runs["hf"])
        bench.rows.append(
            Row(
                f"17.{transport}.{mode}.null",
                label,
                "A's wall in its second run of each round / its first, median of rounds",
                median(null),
                1.0,
                None,
                Target("info", 1.0, "the measure's null"),
                fmt="{:.3f}",
                note=(
                    f"rounds {_spread(null)}: both sides the same, so how far a median of these rounds strays "
                    "from 1 with nothing to find"
                ),
            )
        )
        if "bounded" in runs:
            # The plugin against A with the same hf_xet settings: what the plugin's wall costs beside
            # the buffer it bounds; ``bounded`` against A: what the buffer alone costs.
            over = _wall_ratios(runs["plugin"], runs["bounded"])
            alone = _wall_ratios(runs["bounded"], runs["hf"])
            bench.rows.append(
                Row(
                    f"17.{transport}.{mode}.plugin_over_bounded",
                    label,
                    "plugin's wall / the wall of A with the plugin's hf_xet settings, median of rounds",
                    median(over),
                    1.0,
                    None,
                    Target("info", 1.0, "info"),
                    fmt="{:.3f}",
                    note=f"rounds {_spread(over)}; A with those settings / A: {_spread(alone)}",
                )
            )
    bench.hub.set_link_rate(None)
    return figures


# --- 18. the plugin's following by itself: a local writer, no client, no Hub ----------------------
#: Workload 18's sides: (worker tool, paced at the link's rate).
FOLLOW_SIDES = {"pass": ("paced_pass", False), "paced": ("paced_pass", True), "follow": ("follow_writer", True)}


def follow_alone(bench: Bench) -> None:
    """Workload 18: the plugin's hashing on arrival following a local writer process at the CI
    link's rate (:mod:`bench.writer`: no client, no Hub, no network), against a bare sha256 pass
    over a file of the same size in the page cache, paced as the link is and unpaced.

    Each side in its own process (a bench worker), dirty pages flushed and free memory primed
    before each, the sides rotated ABBA. Each CPU figure is the hashing thread's own
    (``time.thread_time``), in unpaced passes: what following a download costs by itself, apart from
    the cores it shares with a client and a Hub (workload 17).
    """
    p = bench.profile
    rounds = COLD_COST_PAIRS.get(p.name, 9)
    nbytes = p.huge_mib * MIB
    rate = LINK_MIB_S * MIB
    other = bench.workdir / "follow-other.bin"
    with open(other, "wb") as handle:
        for _ in range(p.huge_mib):
            handle.write(os.urandom(MIB))
    sides = list(FOLLOW_SIDES)
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    rehashed: list[float] = []
    for n in range(rounds):
        for side in sides if n % 2 == 0 else sides[::-1]:
            tool, paced = FOLLOW_SIDES[side]
            cache = bench.new_cache("follow")
            if tool == "follow_writer":
                blobs = cache / "blobs"
                blobs.mkdir()
                args: dict[str, Any] = {"blobs": str(blobs), "nbytes": nbytes}
            else:
                paced_sha256(str(other))  # in the page cache, as the plugin's reads of a download are
                args = {"path": str(other)}
            if paced:
                args["bytes_per_second"] = rate
            os.sync()  # the last run's dirty pages must not be written back during this one
            res = bench.run(cache, [task(step(tool, **args))], "http", prime=PRIME_FACTOR * nbytes)[0]
            if tool == "follow_writer":
                cpu[side].append(float(res.data["follower_cpu_s"]))
                rehashed.append(float(res.result(tool)["rehashed"]) / MIB)
            else:
                cpu[side].append(float(res.result(tool)["pass_cpu"]))
            bench.drop(cache)
    other.unlink(missing_ok=True)
    one = median(cpu["pass"])
    bench.figures["18_follow_alone"] = {
        "file_mib": p.huge_mib,
        "link_mib_s": LINK_MIB_S,
        "rounds": rounds,
        "cpu_s": cpu,
    }
    label = f"18 hashing a local writer's {p.huge_mib} MiB at {LINK_MIB_S} MiB/s, no client, no Hub"
    measures = {
        "paced": "a bare pass paced as the link is, in unpaced passes, median of runs",
        "follow": "the plugin's hashing thread following the writer, in unpaced passes, median of runs",
    }
    for side, measure in measures.items():
        passes = [c / one for c in cpu[side]]
        note = (
            f"runs {median(passes):.3f} (min {min(passes):.3f}, max {max(passes):.3f}, {rounds} runs); "
            f"one unpaced pass {one:.3f} CPU s"
        )
        if side == "follow":
            note += f"; read after the writer had finished: up to {max(rehashed):.1f} MiB"
        bench.rows.append(
            Row(
                f"18.{side}",
                label,
                measure,
                median(passes),
                None,
                None,
                Target("info", 1.15, "info (12's target <= 1.15)"),
                fmt="{:.2f}",
                note=note,
            )
        )


# --- 16. hf_xet's download buffer: memory against the wall behind a CI runner's link ---------------
#: The one-file buffers workload 16 sets side by side (MB, as hf_xet reads "384mb"): hf_xet's own
#: base part is this less the per-file part, which stays at the plugin's.
XET_BUFFERS_MB = (256, 384, 512)
#: ABBA rounds of workload 16 per profile.
XET_BUFFER_ROUNDS = {"smoke": 1, "quick": 3, "full": 5}


def _buffer_env(one_file_mb: int) -> dict[str, str]:
    """The environment that gives hf_xet a ``one_file_mb`` buffer for one file: a user's own values,
    which the plugin keeps (:mod:`pytest_hfsnapshot.core.xet`)."""
    per_file = int(xet.TRANSFER_SETTINGS["HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_PERFILE_SIZE"].removesuffix("mb"))
    return {
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_SIZE": f"{one_file_mb - per_file}mb",
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_PERFILE_SIZE": f"{per_file}mb",
        "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_LIMIT": xet.TRANSFER_SETTINGS[
            "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_LIMIT"
        ],
    }


def xet_buffer(bench: Bench) -> None:
    """Workload 16: the plugin's Xet download of one large file with each buffer of
    :data:`XET_BUFFERS_MB`, and A (``snapshot_download``, hf_xet's own buffer), side by side.

    Two modes: behind the CI link cap with free memory primed (the wall: a buffer that holds too
    few xorb ranges leaves the link idle between them), and on raw loopback unprimed, as workload 6
    (the memory: there the download outruns the disk and the buffer fills). Each run in its own
    process, the sides in ABBA order, dirty pages flushed before each.
    """
    p = bench.profile
    rounds = XET_BUFFER_ROUNDS.get(p.name, 3)
    repo_id = "bench/xet-buffer"
    info = bench.hub.add_repo(repo_id, {**_metadata(), "model.safetensors": p.huge_mib * MIB})
    commit = info["commit"]
    plugin_mb = sum(
        int(xet.TRANSFER_SETTINGS[name].removesuffix("mb"))
        for name in ("HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_SIZE", "HF_XET_RECONSTRUCTION_DOWNLOAD_BUFFER_PERFILE_SIZE")
    )
    sides = ["hf", *(f"{mb}" for mb in XET_BUFFERS_MB)]
    figures: dict[str, Any] = {
        "file_mib": p.huge_mib,
        "link_mib_s": LINK_MIB_S,
        "rounds": rounds,
        "plugin_mb": plugin_mb,
    }
    for mode, rate, prime in (("capped", LINK_MIB_S * MIB, PRIME_FACTOR * p.huge_mib * MIB), ("uncapped", None, 0)):
        bench.hub.set_link_rate(rate)
        walls: dict[str, list[float]] = {side: [] for side in sides}
        rss: dict[str, list[float]] = {side: [] for side in sides}
        for n in range(rounds):
            for side in sides if n % 2 == 0 else sides[::-1]:
                tool = "hf" if side == "hf" else "plugin"
                cache = bench.new_cache("xet-buffer")
                os.sync()
                spec = task(step(tool, **_args(tool, repo_id, commit)))
                env = None if side == "hf" else _buffer_env(int(side))
                res = bench.run(cache, [spec], "xet", prime=prime, env=env)[0]
                walls[side].append(res.durations(tool)[0])
                rss[side].append(res.maxrss_kib / 1024)
                bench.drop(cache)
        figures[mode] = {"wall_s": walls, "ru_maxrss_mib": rss}
        what = f"link capped at {LINK_MIB_S} MiB/s, memory primed" if rate else "raw loopback, unprimed (as 6)"
        for mb in XET_BUFFERS_MB:
            side = f"{mb}"
            ratios = [a / b for a, b in zip(walls[side], walls["hf"], strict=True)]
            chosen = " (the plugin's)" if mb == plugin_mb else ""
            note = (
                f"peak RSS {median(rss[side]):.0f} MiB (A {median(rss['hf']):.0f} MiB); "
                f"wall {median(walls[side]):.2f}s (A {median(walls['hf']):.2f}s); rounds {_spread(ratios)}"
            )
            label = f"16 Xet buffer {mb} MB{chosen}, one {p.huge_mib} MiB file, {what}"
            if rate:
                target = (
                    Target("<=", 1.02, "<= 1.02") if mb == plugin_mb else Target("info", 1.02, "<= 1.02 (not chosen)")
                )
                bench.rows.append(
                    Row(
                        f"16.capped.{mb}",
                        label,
                        "wall / A's wall, median of rounds",
                        median(ratios),
                        1.0,
                        None,
                        target,
                        fmt="{:.3f}",
                        note=note,
                    )
                )
            else:
                bench.rows.append(
                    Row(
                        f"16.rss.{mb}",
                        label,
                        "peak RSS of the worker, MiB",
                        median(rss[side]),
                        median(rss["hf"]),
                        None,
                        Target("info", 0, "below A"),
                        fmt="{:.0f}",
                        note=note,
                    )
                )
    bench.hub.set_link_rate(None)
    bench.figures["16_xet_buffer"] = figures


# --- 15. a fleet: 8 processes as 2 hosts over one read-only layer, and a lease takeover ---------------
#: The hosts of workload 15 (``unshare -u``), and the lease of its takeover.
FLEET_HOSTS = ("bench-fleet-a", "bench-fleet-b")
FLEET_PROCESSES = 8
FLEET_LEASE = 5.0


def _fleet_prefixes(layer: Path) -> tuple[list[list[str]], str]:
    """A command prefix per host: its hostname, and the layer bind-mounted read-only over itself (as a
    runner sees a read-only mount); all empty, with a note, where ``unshare`` is not permitted."""
    # The tests' helper, so that the bench's hosts are the fleet tests' hosts.
    from tests.hosts import namespace_prefix, namespace_problem

    prefixes = [namespace_prefix(hostname=host, read_only={layer: layer}) for host in FLEET_HOSTS]
    problem = namespace_problem(prefixes[0], ["true"])
    if problem is not None:
        return [[], []], f"15: all processes ran as this host, on a writable layer ({problem})"
    return prefixes, ""


def _fleet_takeover(bench: Bench, repo_id: str, commit: str, repo_bytes: int, prefixes: list[list[str]]) -> float:
    """Seconds from the kill of the lease holder (first host) until the waiter (second host) held the lock."""
    cache = bench.new_cache("fleet-lease")
    env = {"HFSNAPSHOT_LOCK_MODE": "lease", "HFSNAPSHOT_LOCK_LEASE": f"{FLEET_LEASE:g}"}
    spec = task(step("plugin", **_args("plugin", repo_id, commit, lock_timeout=120)))
    # The holder's transfer takes about 20 s: it is still transferring when it is killed.
    bench.hub.set_link_rate(max(64 * 1024, repo_bytes / 20))
    bench.hub.reset()
    holder = bench.start(cache, spec, prefix=prefixes[0], env=env)
    waiter = bench.start(cache, spec, prefix=prefixes[1], env=env)
    try:
        holder.ready()
        waiter.ready()
        holder.go()
        deadline = time.monotonic() + 60
        while bench.hub.stats()["file_bytes"] == 0:
            if time.monotonic() > deadline or holder.proc.poll() is not None:
                raise RuntimeError(f"15: the lease holder transferred nothing:\n{holder.result().data}")
            time.sleep(0.05)
        waiter.go()
        killed = time.monotonic()
        holder.kill()
        bench.hub.set_link_rate(None)
        result = waiter.result()
    finally:
        holder.kill()
        waiter.kill()
        bench.hub.set_link_rate(None)
    bench.drop(cache)
    return result.start + float(result.result("plugin")["lock_wait"]) - killed


def fleet(bench: Bench) -> None:
    p = bench.profile
    repo_id = "bench/fleet"
    info = bench.hub.add_repo(repo_id, _sharded(p.shards, p.shard_mib * MIB))
    commit, sizes = info["commit"], info["sizes"]
    repo_bytes = sum(sizes.values())
    layer = bench.new_cache("fleet-layer")
    bench.run(layer, [task(step("plugin", **_args("plugin", repo_id, commit)))])  # the writer job
    prefixes, note = _fleet_prefixes(layer)
    if note:
        bench.notes.append(note)
    hosts = [n % len(FLEET_HOSTS) for n in range(FLEET_PROCESSES)]
    warm = bench.new_cache("fleet-warm")
    bench.run(warm, [task(step("plugin", **_args("plugin", repo_id, commit)))])
    walls: dict[str, list[float]] = {"layer": [], "layer_again": [], "warm": []}
    file_bytes: list[int] = []
    sources: list[str] = []
    complete = True
    for _ in range(p.repeats):
        # Each host's own writable cache, new: the first use of the layer on two fresh runners.
        caches = [bench.new_cache(f"fleet-{host}") for host in FLEET_HOSTS]
        specs = [
            task(
                step("plugin", **_args("plugin", repo_id, commit, cache_dir=str(caches[h]), cache_layers=[str(layer)])),
                inspect=True,
            )
            for h in hosts
        ]
        bench.hub.reset()
        layered = bench.run(caches[0], specs, prefixes=[prefixes[h] for h in hosts])
        file_bytes.append(bench.hub.stats()["file_bytes"])
        walls["layer"].append(wall(layered))
        sources += [str(r.result("plugin").get("source")) for r in layered]
        complete = complete and all(_complete(r, "plugin", sizes) for r in layered)
        # The next session on the same runners: their caches now link into the layer.
        walls["layer_again"].append(wall(bench.run(caches[0], specs, prefixes=[prefixes[h] for h in hosts])))
        spec = task(step("plugin", **_args("plugin", repo_id, commit)))
        walls["warm"].append(wall(bench.run(warm, [spec] * FLEET_PROCESSES, prefixes=[prefixes[h] for h in hosts])))
        for cache in caches:
            bench.drop(cache)
    takeover = [_fleet_takeover(bench, repo_id, commit, repo_bytes, prefixes) for _ in range(p.repeats)]
    bench.drop(layer)
    bench.drop(warm)
    med = {k: median(v) for k, v in walls.items()}
    bench.figures["15_fleet"] = {
        "processes": FLEET_PROCESSES,
        "hosts": list(FLEET_HOSTS) if prefixes[0] else ["this host"],
        "repo_bytes": repo_bytes,
        "hub_file_bytes_with_layer": file_bytes,
        "sources_with_layer": sorted(set(sources)),
        "complete_snapshots": complete,
        "wall_s": walls,
        "lease_s": FLEET_LEASE,
        "takeover_after_kill_s": takeover,
    }
    if not complete or set(sources) != {"layer"}:
        bench.notes.append(f"15: snapshots over the layer: sources {sorted(set(sources))}, complete {complete}")
    label = f"15 fleet, {FLEET_PROCESSES} proc as {len(FLEET_HOSTS)} hosts, one layer, {repo_bytes / MIB:.0f} MiB"
    bench.rows.append(
        Row(
            "15.bytes",
            label,
            "Hub file bytes for what the layer holds",
            float(median(file_bytes)),
            None,
            None,
            Target("==", 0, "= 0"),
            fmt="{:.0f}",
            note=f"every process's source: {', '.join(sorted(set(sources)))}",
        )
    )
    bench.rows.append(
        Row(
            "15.wall",
            label,
            "wall over the layer / on a warm local cache",
            med["layer"] / med["warm"],
            None,
            None,
            Target("info", 0, "-"),
            note=(
                f"over the layer: {med['layer']:.2f}s on two new writable caches, {med['layer_again']:.2f}s "
                f"the next time ({med['layer_again'] / med['warm']:.2f}x); warm local cache {med['warm']:.2f}s"
            ),
        )
    )
    bench.rows.append(
        Row(
            "15.takeover",
            f"15 fleet, lease holder killed on one host, waiter on the other, lease {FLEET_LEASE:g}s",
            "takeover after the kill / lease",
            median(takeover) / FLEET_LEASE,
            None,
            None,
            Target("<=", 1.5, "<= 1.5"),
            note=f"takeover {median(takeover):.2f}s after the kill (each: {', '.join(f'{t:.2f}' for t in takeover)})",
        )
    )


WORKLOADS: dict[str, Callable[[Bench], None]] = {
    "1": cold_eight,
    "2": two_repos,
    "3": warm_pinned,
    "4": warm_branch,
    "5": repair,
    "6": peak_rss,
    "7": deep_verify,
    "8": plugin_overhead,
    "9": wire_cost,
    "12": cold_cost,
    "13": rate_window,
    "14": outage_warm,
    "15": fleet,
    "16": xet_buffer,
    "17": hash_beside,
    "18": follow_alone,
}


def profile_json(profile: Profile) -> dict[str, Any]:
    return asdict(profile)
