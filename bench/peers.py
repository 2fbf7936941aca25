"""The workloads of a suite that declares nothing (CONTRACT section 9): ``tests/peers/suite`` run by
pytest, a process per side, against a local Hub holding ``tests/peers/repos.py``'s real repos."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from pytest_hfsnapshot.testing.hub import LocalHub

from .runner import REPO_ROOT, Bench, abba, fault_rows, median, ratio_row

SUITE = REPO_ROOT / "tests" / "peers" / "suite"
RUN_TIMEOUT = 600
#: One call per test of a warm process, timed after an untimed first call (``BENCH_OUT``: where the times go).
WARM_CALLS = """
import json, os, time
from huggingface_hub import hf_hub_download
from transformers import AutoConfig, AutoTokenizer

def timed(name, load):
    load("peers/tiny-bert")
    times = []
    for _ in range(int(os.environ["BENCH_CALLS"])):
        started = time.perf_counter()
        load("peers/tiny-bert")
        times.append(time.perf_counter() - started)
    with open(os.environ["BENCH_OUT"], "a") as out:
        out.write(json.dumps([name, times]) + "\\n")

test_config = lambda: timed("AutoConfig", AutoConfig.from_pretrained)
test_tokenizer = lambda: timed("AutoTokenizer", AutoTokenizer.from_pretrained)
test_download = lambda: timed("hf_hub_download", lambda repo: hf_hub_download(repo, "config.json"))
"""


@contextmanager
def _peer_hub() -> Iterator[tuple[LocalHub, dict[str, str], ModuleType]]:
    """A local Hub with ``tests/peers/repos.py``'s repos (loaded by path: the tests are no package)."""
    spec = importlib.util.spec_from_file_location("peer_repos", REPO_ROOT / "tests" / "peers" / "repos.py")
    assert spec is not None and spec.loader is not None
    repos = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(repos)
    with LocalHub() as hub:
        yield hub, repos.fill(hub), repos


def pytest_session(
    bench: Bench, hub: LocalHub, at: Path, cache: Path, flags: tuple[str, ...], transport: str = "xet", **env: str
) -> tuple[float, int]:
    """One pytest session in folder ``at`` against ``hub``: its wall and its failed tests (errors count)."""
    base = bench.env(cache, transport, hub.url)
    env = {k: v for k, v in base.items() if not k.startswith(("PYTEST_", "HFSNAPSHOT_"))} | env
    started = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags]
    done = subprocess.run(command, cwd=at, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    seconds = time.perf_counter() - started
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?)\b", done.stdout)}
    if not counts.get("passed") and not counts.get("failed"):
        raise RuntimeError(f"the suite did not run ({' '.join(flags)}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return seconds, counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)


def _suite(bench: Bench) -> Path:
    folder = bench.workdir / "peer-suite"
    if not folder.is_dir():
        shutil.copytree(SUITE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _faults(hub: LocalHub) -> None:
    """The faults of tests/peers' manage run: 503 and a cut body on one repo's weights, 502 on
    another's, a 429 window on a third's small files."""
    hub.clear_faults()
    weights = "*/peers/tiny-bert/resolve/*/model.safetensors"
    hub.fail(weights, 503)
    hub.cut(weights, 4096)
    hub.fail("*/peers/tiny-peft/resolve/*/model.safetensors", 502)
    hub.fail("/peers/tiny-word/resolve/*.json", 429, times=3, retry_after=1)


def peers_cold_n4_faults(bench: Bench) -> None:
    """The peer suite on a cold cache under ``-n 4`` with faults, ``--hf-implicit=manage`` against
    plain huggingface_hub (``-p no:hfsnapshot``), per transport, as ABBA rounds: failed tests, file
    bytes served over the distinct files' sizes, and wall."""
    suite, n = _suite(bench), str(bench.profile.peer_workers)
    sides = {"manage": ("-n", n, "--hf-implicit=manage"), "plain": ("-n", n, "-p", "no:hfsnapshot")}
    with _peer_hub() as (hub, commits, repos):
        for transport in bench.transports():
            failed: dict[str, list[int]] = {s: [] for s in sides}
            moved: dict[str, list[float]] = {s: [] for s in sides}
            walls: dict[str, list[float]] = {s: [] for s in sides}
            for side in abba(list(sides), bench.profile.peer_rounds):
                cache = bench.new_cache(f"peers-{side}")
                _faults(hub)
                hub.reset_counters()
                seconds, failures = pytest_session(bench, hub, suite, cache, sides[side], transport=transport)
                walls[side].append(seconds)
                failed[side].append(failures)
                moved[side].append(repos.file_bytes_ratio(hub, commits))
                bench.drop(cache)
            hub.clear_faults()
            note = f"; manage {median(walls['manage']):.1f}s, plain {median(walls['plain']):.1f}s"
            label = f"peers-cold-n{n}-faults, {transport}"
            bench.rows += fault_rows(
                label, failed, moved, walls, of="tests (of 15)", wanted="distinct file bytes", wall="wall", note=note
            )


def warm_implicit_from_pretrained(bench: Bench) -> None:
    """Warm ``AutoConfig``/``AutoTokenizer.from_pretrained`` and ``hf_hub_download`` by repo id, per call, under
    ``--hf-implicit=manage`` with the pin file that records them, against plain huggingface_hub:
    ABBA rounds of one pytest process per side, the median per call of each."""
    p = bench.profile
    folder = bench.workdir / "warm-implicit"
    folder.mkdir()
    (folder / "test_warm.py").write_text(WARM_CALLS, encoding="utf-8")
    plain = ("-p", "no:hfsnapshot")
    sides = bench.sides(
        {"manage": ("--hf-implicit=manage", "--hf-pins=pins.json"), "plain": plain, "plain-again": plain}
    )
    per_call: dict[str, dict[str, list[float]]] = {"AutoConfig": {}, "AutoTokenizer": {}, "hf_hub_download": {}}
    requests: dict[str, list[int]] = {s: [] for s in sides}
    with _peer_hub() as (hub, _, _):
        cache = bench.new_cache("warm-implicit")
        pytest_session(bench, hub, folder, cache, ("--hf-pins=pins.json", "--hf-update-pins"))  # records the pin file
        for side in abba(list(sides), p.call_rounds):
            out = folder / f"{side}.jsonl"
            out.unlink(missing_ok=True)
            hub.reset_counters()
            _, failures = pytest_session(
                bench, hub, folder, cache, sides[side], BENCH_OUT=str(out), BENCH_CALLS=str(p.peer_calls)
            )
            if failures:
                raise RuntimeError(f"warm-implicit-from-pretrained: {failures} failed ({side})")
            requests[side].append(len(hub.requests))
            for line in out.read_text().splitlines():
                loader, times = json.loads(line)
                per_call[loader].setdefault(side, []).append(median(times) * 1000)
        bench.drop(cache)
    counts = ", ".join(f"{s} {median(requests[s]):.0f}" for s in sides)
    for loader, ms in per_call.items():
        times = ", ".join(f"{s} {median(ms[s]):.2f} ms" for s in sides)
        detail = f"per call: {times}; requests per process: {counts}"
        bench.rows.append(ratio_row(f"warm-implicit-from-pretrained, {loader}", ms, 1.0, detail))


def report_against_off(bench: Bench) -> None:
    """The peer suite on a warm cache, ``--hf-implicit=report`` (the default) against ``off``: what
    observing and reporting costs a suite's process wall, as ABBA rounds."""
    suite = _suite(bench)
    off = ("--hf-implicit=off",)
    sides = bench.sides({"report": ("--hf-implicit=report",), "off": off, "off-again": off})
    walls: dict[str, list[float]] = {s: [] for s in sides}
    with _peer_hub() as (hub, _, _):
        cache = bench.new_cache("peers-report")
        pytest_session(bench, hub, suite, cache, ("-p", "no:hfsnapshot"))  # warms the cache and the .pyc files
        for side in abba(list(sides), bench.profile.call_rounds):
            seconds, failures = pytest_session(bench, hub, suite, cache, sides[side])
            if failures:
                raise RuntimeError(f"report-against-off: {failures} failed ({side})")
            walls[side].append(seconds)
        bench.drop(cache)
    detail = ", ".join(f"{s} {median(w):.2f}s" for s, w in walls.items())
    bench.rows.append(ratio_row("report-against-off, peer suite warm, process wall", walls, 1.05, detail))
