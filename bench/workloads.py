"""The workloads, each named for what it measures, and the registry ``python -m bench`` runs.

Each adds its repos to the bench Hub, runs fresh worker processes (:mod:`bench.worker`) on fresh
caches, reads the Hub's counters and appends rows to the :class:`~bench.runner.Bench`: the plugin's
figure against its target, with A (plain ``snapshot_download``) and B (the hand-rolled
lock-and-retry) beside it. Sizes in the names are the full run's; ``--quick`` and ``--smoke``
shrink them (each row's label gives the size it ran). A new workload is a function of the
:class:`~bench.runner.Bench` and one entry in :data:`WORKLOADS`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_hfsnapshot.core.cache import pins

from .children import child_throughput, child_warm_pinned, children_cold_faults
from .limits import outage_warm, rate_limit_window
from .peers import peers_cold_n4_faults, report_against_off, warm_implicit_from_pretrained
from .runner import (
    INFO,
    LINK_MIB_S,
    MIB,
    PRIME_FACTOR,
    TOOLS,
    Bench,
    Row,
    Target,
    WorkerResult,
    abba,
    median,
    ratio_row,
    ratios,
    spread,
    step,
    task,
    wall,
)


def metadata() -> dict[str, str]:
    return {
        "config.json": json.dumps({"model_type": "bench", "hidden_size": 64, "num_hidden_layers": 2}),
        "tokenizer_config.json": json.dumps({"model_max_length": 512}),
        "README.md": "# bench repo\n",
    }


def sharded(shards: int, shard_bytes: int) -> dict[str, int | str]:
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index = json.dumps({"weight_map": {f"layer.{i}": n for i, n in enumerate(names)}})
    return {**metadata(), "model.safetensors.index.json": index, **dict.fromkeys(names, shard_bytes)}


def args(tool: str, repo_id: str, revision: str, session: str | None = None, **extra: Any) -> dict[str, Any]:
    """A tool's arguments; ``session`` (shared by the processes of one test session) is the plugin's only."""
    out: dict[str, Any] = {"repo_id": repo_id, "revision": revision, **extra}
    if tool == "plugin" and session is not None:
        out["session"] = session
    return out


def new_session() -> str:
    return "bench-" + uuid.uuid4().hex[:12]


def complete(result: WorkerResult, name: str, sizes: dict[str, int]) -> bool:
    """Whether the snapshot a step returned shows every file at its size (a task with ``inspect``)."""
    return result.result(name).get("sizes") == sizes


def blob(cache: Path, repo_id: str, commit: str, path: str) -> Path:
    """The file behind a snapshot entry: the repo blob, or the shared store file it links to."""
    return Path(os.path.realpath(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit / path))


# --- cold-8-procs -----------------------------------------------------------------------------------
def cold_8_procs(bench: Bench) -> None:
    """Eight processes ask for one sharded repo on a cold cache, as xdist workers do, per transport.

    Guards "each byte crosses the network at most once per cache" (file bytes served / repo bytes)
    and measures the wall of eight processes against one of the same tool, as ABBA pairs.
    """
    p = bench.profile
    repo_id = "bench/cold-sharded"
    sizes = bench.hub.add_repo(repo_id, sharded(p.shards, p.shard_mib * MIB))["sizes"]
    repo_bytes = sum(sizes.values())
    for transport in bench.transports():
        walls: dict[str, list[float]] = {f"{t}/{n}": [] for t in TOOLS for n in (1, 8)}
        served: dict[str, list[float]] = {t: [] for t in TOOLS}
        for side in abba(list(walls), p.rounds):
            tool, n = side.split("/")
            cache = bench.new_cache("cold")
            bench.hub.reset()
            spec = task(step(tool, **args(tool, repo_id, "main", new_session())), inspect=True)
            results = bench.run(cache, [spec] * int(n), transport, prime=PRIME_FACTOR * repo_bytes)
            walls[side].append(wall(results))
            if n == "8":
                served[tool].append(bench.hub.stats()["file_bytes"] / repo_bytes)
            if not all(complete(r, tool, sizes) for r in results):
                bench.notes.append(f"cold-8-procs ({transport}): {tool} returned an incomplete snapshot")
            bench.drop(cache)
        label = f"cold-8-procs, {repo_bytes / MIB:.0f} MiB, {transport}"
        pairs = {t: ratios(walls[f"{t}/8"], walls[f"{t}/1"]) for t in TOOLS}
        one = ", ".join(f"{t} {median(walls[f'{t}/1']):.2f}s" for t in TOOLS)
        bench.rows += [
            Row.of_tools(label, "file bytes served / repo bytes", {t: median(served[t]) for t in TOOLS},
                         Target("<=", 1.005, "= 1.00"), fmt="{:.4f}"),
            Row.of_tools(label, "wall 8 proc / 1 proc (same tool), median of pairs",
                         {t: median(pairs[t]) for t in TOOLS}, Target("<=", 1.10, "<= 1.10"),
                         note=f"plugin pairs {spread(pairs['plugin'])}; 1 proc: {one}"),
        ]  # fmt: skip


# --- warm-4-files, warm-1000-files ---------------------------------------------------------------
def many_files(n: int) -> dict[str, int | str]:
    files: dict[str, int | str] = dict(metadata())
    for i in range(n - len(files)):
        files[f"data/{i // 100:02d}/item-{i:05d}.json"] = json.dumps({"id": i, "text": "x" * (i % 200)})
    return files


def warm_pinned(bench: Bench, files: dict[str, int | str], target: float) -> None:
    """Warm calls at a pinned commit in fresh processes: HTTP requests (none), and the time per call
    against A's and against the least a warm check can do (``os.walk`` + ``os.stat``), as ABBA rounds
    of one process per tool (its first call untimed)."""
    p = bench.profile
    repo_id = f"bench/warm-{len(files)}"
    commit = bench.hub.add_repo(repo_id, files)["commit"]
    cache = bench.new_cache("warm")
    snapshot = str(cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / commit)
    bench.run(cache, [task(*(step(t, **args(t, repo_id, commit)) for t in TOOLS))])  # the plugin first: its record
    steps = {t: step(t, **args(t, repo_id, commit)) for t in TOOLS} | {"statwalk": step("statwalk", snapshot=snapshot)}
    per_call: dict[str, list[float]] = {side: [] for side in steps}
    requests: dict[str, int] = dict.fromkeys(steps, 0)
    for side in abba(list(steps), p.rounds):
        bench.hub.reset()
        result = bench.run(cache, [task(steps[side], rounds=p.warm_calls, warmup=1)])[0]
        requests[side] += bench.hub.stats()["requests"]
        per_call[side].append(median(result.durations(side)))
    bench.drop(cache)
    ms = {k: median(v) * 1000 for k, v in per_call.items()}
    label = f"warm-{len(files)}-files, pinned commit"
    times = ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items())
    bench.rows += [
        Row.of_tools(label, "HTTP requests, warm calls", {t: float(requests[t]) for t in TOOLS},
                     Target("<=", 0, "= 0"), fmt="{:.0f}"),
        Row(label, "per-call time / A's", ms["plugin"] / ms["hf"], 1.0, ms["handrolled"] / ms["hf"],
            Target("<=", target, f"<= {target:g}"), fmt="{:.3f}", note=f"per call: {times}"),
        Row.of_tools(label, "per-call time / os.stat walk (floor)", {t: ms[t] / ms["statwalk"] for t in TOOLS},
                     INFO, fmt="{:.1f}"),
    ]  # fmt: skip


# --- warm-branch-8-procs ---------------------------------------------------------------------------
def pin_file(bench: Bench, repo_id: str, commit: str) -> Path:
    """A pin file of ``main`` of ``repo_id``, as ``--hf-update-pins`` writes it."""
    path = bench.workdir / "pins" / f"{repo_id.replace('/', '--')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"repo_id": repo_id, "repo_type": "model", "revision": "main", "commit": commit}
    path.write_text(pins.render([entry]), encoding="utf-8")
    return path


def warm_branch_8_procs(bench: Bench) -> None:
    """Eight processes of one test session call for a branch twice each on a warm cache.

    Guards "at most one revision request per session, none with a pin file" (``--hf-pins``).
    """
    p = bench.profile
    repo_id = "bench/warm-branch"
    commit = bench.hub.add_repo(repo_id, {**metadata(), "model.safetensors": MIB})["commit"]
    pinned = str(pin_file(bench, repo_id, commit))
    cache = bench.new_cache("branch")
    bench.run(cache, [task(*(step(t, **args(t, repo_id, "main")) for t in TOOLS))])
    sides = (*TOOLS, "pinned")
    revision: dict[str, list[int]] = {s: [] for s in sides}
    walls: dict[str, list[float]] = {s: [] for s in sides}
    for side in abba(sides, p.rounds):
        tool = "plugin" if side == "pinned" else side
        extra = {"pins": pinned} if side == "pinned" else {}
        bench.hub.reset()
        results = bench.run(
            cache, [task(step(tool, **args(tool, repo_id, "main", new_session(), **extra)), rounds=2)] * 8
        )
        revision[side].append(bench.hub.stats()["revision_requests"])
        walls[side].append(wall(results))
    bench.drop(cache)
    label = "warm-branch-8-procs, 2 calls each"
    note = "wall: " + ", ".join(f"{s} {median(walls[s]):.2f}s" for s in sides)
    bench.rows += [
        Row.of_tools(label, "revision requests per session", {t: median(revision[t]) for t in TOOLS},
                     Target("<=", 1, "<= 1"), fmt="{:.0f}", note=note),
        Row(label + ", --hf-pins", "revision requests per session", median(revision["pinned"]), None, None,
            Target("<=", 0, "= 0"), fmt="{:.0f}"),
    ]  # fmt: skip


# --- repair-truncated-shard ------------------------------------------------------------------------
def repair_truncated_shard(bench: Bench) -> None:
    """One shard of a cached repo cut to half its size, then asked for again, per transport.

    Guards repair: only the broken file is fetched again (bytes on every origin / shard size). A and B
    trust the cache and return the snapshot still broken.
    """
    p = bench.profile
    repo_id = "bench/repair-sharded"
    info = bench.hub.add_repo(repo_id, sharded(p.shards, p.shard_mib * MIB))
    sizes, commit = info["sizes"], info["commit"]
    shard = f"model-00002-of-{p.shards:05d}.safetensors"
    for transport in bench.transports():
        fetched: dict[str, list[float]] = {t: [] for t in TOOLS}
        repaired = dict.fromkeys(TOOLS, True)
        for tool in TOOLS:
            cache = bench.new_cache("repair")
            bench.run(cache, [task(step(tool, **args(tool, repo_id, commit)))], transport)
            pristine = bench.workdir / f"pristine-{tool}"
            shutil.copyfile(blob(cache, repo_id, commit, shard), pristine)
            for _ in range(p.rounds):
                broken = blob(cache, repo_id, commit, shard)
                os.chmod(broken, 0o644)  # the shared store's files are read-only
                os.truncate(broken, sizes[shard] // 2)
                bench.hub.reset()
                result = bench.run(cache, [task(step(tool, **args(tool, repo_id, commit)), inspect=True)], transport)[0]
                fetched[tool].append(bench.hub.stats()["bytes"] / sizes[shard])
                repaired[tool] = repaired[tool] and complete(result, tool, sizes)
                restored = blob(cache, repo_id, commit, shard)
                os.chmod(restored, 0o644)
                shutil.copyfile(pristine, restored)  # undo what the tool left broken, for the next round
            pristine.unlink()
            bench.drop(cache)
        cells = {
            column: f"{median(fetched[t]):.3f}" + ("" if repaired[t] else " (left broken)")
            for column, t in zip(("plugin", "a", "b"), TOOLS, strict=True)
        }
        plugin = median(fetched["plugin"]) if repaired["plugin"] else float("inf")
        bench.rows.append(
            Row(f"repair-truncated-shard, {sizes[shard] / MIB:.0f} MiB shard, {transport}",
                "bytes re-downloaded / shard size", plugin, median(fetched["hf"]), median(fetched["handrolled"]),
                Target("<=", 1.01, "<= 1.01"), cells=cells,
                note="every origin counted (Xet: the token, the reconstruction and the chunk headers too)")
        )  # fmt: skip


# --- cold-1-gib -----------------------------------------------------------------------------------
#: The sides of each round: ``again`` is A once more, the measure's null.
BIG_SIDES = ("hf", "plugin", "again")


def sha256_cpu(path: Path) -> float:
    """CPU seconds of one bare ``hashlib.sha256`` pass over ``path``, in this thread."""
    began = time.thread_time()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(MIB):
            digest.update(chunk)
    return time.thread_time() - began


def _big_run(bench: Bench, tool: str, repo_id: str, commit: str, transport: str, nbytes: int) -> dict[str, float]:
    """One cold fetch in a process of its own (dirty pages flushed, memory primed), then one bare
    sha256 pass over the file it left: the unit of its CPU."""
    cache = bench.new_cache("big")
    os.sync()  # the last run's dirty pages must not be written back during this one
    result = bench.run(
        cache, [task(step(tool, **args(tool, repo_id, commit)))], transport, prime=PRIME_FACTOR * nbytes
    )[0]
    rehashed = result.result(tool)["rehashed"] or 0
    one_pass = sha256_cpu(blob(cache, repo_id, commit, "model.safetensors"))
    bench.drop(cache)
    return {
        "wall": result.durations(tool)[0],
        "cpu": float(result.data["cpu_s"]),
        "rss": result.maxrss_kib / 1024,
        "rehashed": rehashed / MIB,
        "pass": one_pass,
    }


def _column(runs: dict[str, list[dict[str, float]]], side: str, key: str) -> list[float]:
    return [r[key] for r in runs[side]]


def cold_1_gib(bench: Bench) -> None:
    """One large file fetched cold, per transport, behind a CI runner's link and on raw loopback.

    What hashing on arrival costs against A: the wall, the CPU added in bare sha256 passes over the
    same file, and the peak memory (raw loopback, where the download outruns the disk). ABBA rounds
    of A, the plugin and A again (the null: how far a median of pairs strays with nothing to find).
    """
    p = bench.profile
    nbytes = p.big_mib * MIB
    repo_id = "bench/cold-big"
    commit = bench.hub.add_repo(repo_id, {**metadata(), "model.safetensors": nbytes})["commit"]
    for transport in bench.transports():
        for rate, goal in ((LINK_MIB_S * MIB, 1.02), (None, 1.10)):
            bench.hub.set_link_rate(rate)
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in BIG_SIDES}
            for side in abba(BIG_SIDES, p.big_rounds):
                tool = "hf" if side == "again" else side
                runs[side].append(_big_run(bench, tool, repo_id, commit, transport, nbytes))
            plugin, hf = runs["plugin"], runs["hf"]
            col = functools.partial(_column, runs)
            walls = ratios(col("plugin", "wall"), col("hf", "wall"))
            null = ratios(col("again", "wall"), col("hf", "wall"))
            one_pass = median(col("plugin", "pass") + col("hf", "pass"))
            added = [(a["cpu"] - b["cpu"]) / one_pass for a, b in zip(plugin, hf, strict=True)]
            null_added = [(a["cpu"] - b["cpu"]) / one_pass for a, b in zip(runs["again"], hf, strict=True)]
            what = f"link {LINK_MIB_S} MiB/s" if rate else "raw loopback"
            label = f"cold-1-gib, {p.big_mib} MiB, {transport}, {what}"
            wall_note = (
                f"pairs {spread(walls)}; A again / A (the null) {spread(null)}; wall plugin "
                f"{median(col('plugin', 'wall')):.2f}s, A {median(col('hf', 'wall')):.2f}s; hashed after "
                f"the transfer: up to {max(col('plugin', 'rehashed')):.1f} MiB"
            )
            cpu_note = (
                f"pairs {spread(added, '{:.2f}')}; one pass {one_pass:.2f} CPU s; A's own CPU "
                f"{min(col('hf', 'cpu')) / one_pass:.2f}..{max(col('hf', 'cpu')) / one_pass:.2f} passes"
            )
            bench.rows += [
                Row(label, "wall / A's, median of pairs (A: the null)", median(walls), median(null), None,
                    Target("<=", goal, f"<= {goal:.2f}"), fmt="{:.3f}", note=wall_note),
                Row(label, "CPU added over A, in sha256 passes (A: the null)", median(added), median(null_added),
                    None, Target("<=", 1.15, "<= 1.15"), note=cpu_note),
            ]  # fmt: skip
            if not rate:
                rss = {side: median(col(side, "rss")) for side in ("plugin", "hf")}
                bench.rows.append(Row(label, "peak RSS, MiB", rss["plugin"], rss["hf"], None,
                                      Target("<=", 1.05 * rss["hf"], "<= A + 5%"), fmt="{:.0f}"))  # fmt: skip
    bench.hub.set_link_rate(None)


# --- suite-without-snapshots -----------------------------------------------------------------------
def _write_suite(folder: Path, tests: int) -> None:
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    for m in range(0, tests, 50):
        body = [f"def test_{j}():\n    assert {j} + 1 == {j + 1}\n" for j in range(min(50, tests - m))]
        (folder / f"test_mod_{m // 50:03d}.py").write_text("\n".join(body), encoding="utf-8")


def suite_without_snapshots(bench: Bench) -> None:
    """A suite of plain tests that use no snapshot, with the plugin and with ``-p no:hfsnapshot``:
    what installing the plugin costs a suite (the whole process's wall), and a run of one test (its
    start-up), as ABBA rounds."""
    p = bench.profile
    env = bench.env(bench.new_cache("suite"))
    walls = {}
    for name, tests in (("suite", p.suite_tests), ("one", 1)):
        suite = bench.workdir / name
        _write_suite(suite, tests)
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)]
        without = [*base, "-p", "no:hfsnapshot"]
        modes = bench.sides({"with": base, "without": without, "without-again": without})
        subprocess.run([*base, "--co"], env=env, cwd=suite, capture_output=True, check=False)  # writes the .pyc files
        walls[name] = {m: [] for m in modes}
        bench.hub.reset()
        for mode in abba(list(modes), p.rounds if tests > 1 else 3 * p.rounds):
            started = time.perf_counter()
            done = subprocess.run(modes[mode], env=env, cwd=suite, capture_output=True, text=True, check=False)
            walls[name][mode].append(time.perf_counter() - started)
            if done.returncode != 0 or not re.search(rf"\b{tests} passed", done.stdout):
                raise RuntimeError(f"suite-without-snapshots: the suite failed ({mode}):\n{done.stdout[-2000:]}")
    label = f"suite-without-snapshots, {p.suite_tests} tests, process wall"
    bench.rows.append(ratio_row(label, walls["suite"], 1.02, f"Hub requests: {bench.hub.stats()['requests']}"))
    one = walls["one"]
    added = [(w - wo) * 1000 for w, wo in zip(one["with"], one["without"], strict=True)]
    null = [(a - wo) * 1000 for a, wo in zip(one.get("without-again", []), one["without"], strict=False)]
    bench.rows.append(
        Row("suite-without-snapshots, start-up (a run of one test)", "ms the plugin adds, median of pairs",
            median(added), 0.0, None, Target("<=", 50, "<= +50 ms"), fmt="{:+.0f}",
            note=f"pairs {spread(added, '{:+.0f}')}, null {spread(null, '{:+.0f}') if null else 'not run'}")
    )  # fmt: skip


#: Every workload by name, in the order of a run; ``--only`` picks some.
WORKLOADS: dict[str, Callable[[Bench], None]] = {
    "cold-8-procs": cold_8_procs,
    "warm-4-files": lambda bench: warm_pinned(bench, {**metadata(), "model.safetensors": MIB}, 1.0),
    "warm-1000-files": lambda bench: warm_pinned(bench, many_files(bench.profile.warm_files), 0.1),
    "warm-branch-8-procs": warm_branch_8_procs,
    "repair-truncated-shard": repair_truncated_shard,
    "cold-1-gib": cold_1_gib,
    "suite-without-snapshots": suite_without_snapshots,
    "rate-limit-window": rate_limit_window,
    "outage-warm-n4": outage_warm,
    "peers-cold-n4-faults": peers_cold_n4_faults,
    "warm-implicit-from-pretrained": warm_implicit_from_pretrained,
    "report-against-off": report_against_off,
    "children-cold-faults": children_cold_faults,
    "child-warm-pinned": child_warm_pinned,
    "child-throughput": child_throughput,
}
