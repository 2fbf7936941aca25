"""The processes a test starts (CONTRACT section 11): replicas under faults, a warm pinned load, and a
large file served cold, each through the session's endpoint against the same load without the plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_hfsnapshot.testing.hub import LocalHub

from .peers import pytest_session
from .runner import (
    LINK_MIB_S,
    MIB,
    PRIME_FACTOR,
    Bench,
    Row,
    Target,
    abba,
    fault_rows,
    median,
    ratio_row,
    ratios,
    spread,
)

#: The test of every session here: it starts ``BENCH_CHILDREN`` children at once, each running
#: ``LOAD``, and waits for them. Each child appends what it saw to ``BENCH_OUT``.
SUITE = '''
import os, subprocess, sys

LOAD = """
import json, os, sys, time
from huggingface_hub import hf_hub_download, snapshot_download
repo, calls, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
times, failed = [], 0
for _ in range(calls):
    started = time.perf_counter()
    try:
        if paths:
            for path in paths:
                hf_hub_download(repo, path)
        else:
            snapshot_download(repo)
    except Exception as error:
        print(repr(error), file=sys.stderr)
        failed += 1
    times.append(time.perf_counter() - started)
with open(os.environ["BENCH_OUT"], "a") as out:
    out.write(json.dumps({"times": times, "failed": failed}) + "\\\\n")
"""


def test_children():
    args = os.environ["BENCH_ARGS"].split()
    if os.environ.get("BENCH_PRIME"):  # as MemoryPrimer does, here, just before the children start
        with open(os.environ["BENCH_PRIME"], "wb") as scratch:
            for _ in range(int(os.environ["BENCH_PRIME_MIB"])):
                scratch.write(b"\\1" * (1 << 20))
        os.unlink(os.environ["BENCH_PRIME"])
    children = [subprocess.Popen([sys.executable, "-c", LOAD, *args]) for _ in range(int(os.environ["BENCH_CHILDREN"]))]
    for child in children:
        child.wait()
'''
PLAIN = ("-p", "no:hfsnapshot")


@contextmanager
def _hub(bench: Bench) -> Iterator[tuple[LocalHub, Path, dict[str, str]]]:
    """A local Hub with the repos of these workloads, and the folder of the suite that starts children."""
    p = bench.profile
    shard = os.urandom(p.shard_mib * MIB)
    files = {"config.json": '{"model_type": "bert"}', "tokenizer.json": "{}", "vocab.txt": "[CLS]\n[SEP]\n"}
    with LocalHub() as hub:
        commits = {
            "bench/replica": hub.add_repo(
                "bench/replica", {**files, "model-1.safetensors": shard, "model-2.safetensors": shard[::-1]}
            ),
            "bench/warm": hub.add_repo("bench/warm", {**files, "model.safetensors": shard[:MIB]}),
            "bench/big": hub.add_repo("bench/big", {"model.safetensors": os.urandom(p.big_mib * MIB)}),
        }
        folder = bench.workdir / "children"
        folder.mkdir(exist_ok=True)
        (folder / "test_children.py").write_text(SUITE, encoding="utf-8")
        yield hub, folder, commits


def _session(bench: Bench, hub: LocalHub, folder: Path, cache: Path, flags: tuple[str, ...], transport: str,
             children: int, *args: str, prime_mib: int = 0) -> list[dict[str, object]]:  # fmt: skip
    """One pytest session whose test starts ``children`` at once; what each child reported. ``prime_mib``:
    free memory the test makes alike (:class:`~bench.runner.MemoryPrimer`) just before they start."""
    out = folder / "children.jsonl"
    out.unlink(missing_ok=True)
    env = {"BENCH_OUT": str(out), "BENCH_CHILDREN": str(children), "BENCH_ARGS": " ".join(args)}
    if prime_mib:
        env |= {"BENCH_PRIME": str(bench.workdir / "prime.bin"), "BENCH_PRIME_MIB": str(prime_mib)}
    pytest_session(bench, hub, folder, cache, flags, transport=transport, **env)
    return [json.loads(line) for line in out.read_text().splitlines()]


def _file_bytes(hub: LocalHub) -> int:
    """Body bytes of repo files the Hub sent (cut bodies included), on every origin."""
    return sum(
        r.body_bytes
        for r in hub.counters().records
        if r.method == "GET"
        and r.status in (200, 206)
        and "/reconstructions/" not in r.path
        and any("/resolve/" in p for p in (r.path, *r.aliases))
    )


def children_cold_faults(bench: Bench) -> None:
    """Three replicas of one model started at once by a test, on a cold cache, with a 503, two cut
    bodies and a 429 on the way: ``--hf-implicit=manage`` against plain huggingface_hub, per transport:
    failed replicas, file bytes over the model's bytes, wall."""
    p = bench.profile
    sides = {"manage": ("--hf-implicit=manage",), "plain": PLAIN}
    with _hub(bench) as (hub, folder, _):
        unique = 2 * p.shard_mib * MIB + sum(len(v) for v in ('{"model_type": "bert"}', "{}", "[CLS]\n[SEP]\n"))
        for transport in bench.transports():
            failed: dict[str, list[int]] = {s: [] for s in sides}
            moved: dict[str, list[float]] = {s: [] for s in sides}
            walls: dict[str, list[float]] = {s: [] for s in sides}
            for side in abba(list(sides), p.rounds):
                cache = bench.new_cache(f"children-{side}")
                hub.clear_faults()
                weights = "*/bench/replica/resolve/*/model-*.safetensors"
                hub.fail(weights, 503, method="GET")
                hub.cut(weights, 4096, times=2)
                hub.fail("/bench/replica/resolve/*.json", 429, retry_after=1)
                hub.reset_counters()
                reports = _session(bench, hub, folder, cache, sides[side], transport, 3, "bench/replica", "1")
                failed[side].append(sum(int(r["failed"]) for r in reports) + 3 - len(reports))
                moved[side].append(_file_bytes(hub) / unique)
                walls[side].append(max(max(r["times"]) for r in reports))  # type: ignore[call-overload]
                bench.drop(cache)
            hub.clear_faults()
            label = f"children-cold-faults, 3 replicas, {transport}"
            bench.rows += fault_rows(
                label,
                failed,
                moved,
                walls,
                of="replicas (of 3)",
                wanted="the model's bytes",
                wall="slowest replica's load",
            )


def child_warm_pinned(bench: Bench) -> None:
    """A child's warm load by repo id (``hf_hub_download`` of each file at ``main``), recorded and
    prefetched, in a session under ``--hf-implicit=manage`` with the pin file, against plain
    huggingface_hub: the requests that reach the Hub, and the median load time of ABBA rounds."""
    p = bench.profile
    paths = ("config.json", "tokenizer.json", "vocab.txt", "model.safetensors")
    pinned = ("--hf-implicit=manage", "--hf-pins=pins.json")
    sides = bench.sides({"manage": pinned, "plain": PLAIN, "plain-again": PLAIN})
    with _hub(bench) as (hub, folder, _):
        cache = bench.new_cache("children-warm")
        args = ("bench/warm", str(p.peer_calls), *paths)
        _session(bench, hub, folder, cache, ("--hf-pins=pins.json", "--hf-update-pins"), "xet", 1, *args)
        prefetch = [sys.executable, "-m", "pytest_hfsnapshot", "prefetch", "--pins", "pins.json"]  # as CI would
        subprocess.run(prefetch, cwd=folder, env=bench.env(cache, "xet", hub.url), check=True, capture_output=True)
        ms: dict[str, list[float]] = {s: [] for s in sides}
        requests: dict[str, list[int]] = {s: [] for s in sides}
        for side in abba(list(sides), p.call_rounds):
            hub.reset_counters()
            (report,) = _session(bench, hub, folder, cache, sides[side], "xet", 1, *args)
            if report["failed"]:
                raise RuntimeError(f"child-warm-pinned: the child's load failed ({side})")
            ms[side].append(median(report["times"][1:]) * 1000)  # type: ignore[index]
            requests[side].append(len(hub.requests))
        bench.drop(cache)
    bench.rows += [
        Row("child-warm-pinned", "requests reaching the Hub per session", median(requests["manage"]),
            median(requests["plain"]), None, Target("<=", 0, "= 0"), fmt="{:.0f}"),
        ratio_row("child-warm-pinned, a child's warm load", ms, 1.0,
                  ", ".join(f"{s} {median(v):.2f} ms" for s, v in ms.items())),
    ]  # fmt: skip


def child_throughput(bench: Bench) -> None:
    """A large file downloaded cold by a child through the session (``--hf-implicit=manage``) against
    the same download without the plugin, per transport, behind a CI runner's link and on raw
    loopback (where the two cores, not the link, bound both): throughput as ABBA pairs, the null beside."""
    p = bench.profile
    sides = bench.sides({"manage": ("--hf-implicit=manage",), "plain": PLAIN, "plain-again": PLAIN})
    with _hub(bench) as (hub, folder, _):
        for transport in bench.transports():
            for rate in (LINK_MIB_S * MIB, None):
                hub.slow(rate)
                rates: dict[str, list[float]] = {s: [] for s in sides}
                for side in abba(list(sides), p.big_rounds):
                    cache = bench.new_cache(f"throughput-{side}")
                    args = ("bench/big", "1", "model.safetensors")
                    os.sync()  # as cold-1-gib: no dirty page of the last round written back during this one
                    prime = PRIME_FACTOR * p.big_mib if p.prime_quiet else 0
                    (report,) = _session(bench, hub, folder, cache, sides[side], transport, 1, *args, prime_mib=prime)
                    if report["failed"]:
                        raise RuntimeError(f"child-throughput: the download failed ({side}, {transport})")
                    rates[side].append(p.big_mib / report["times"][0])  # type: ignore[index]
                    bench.drop(cache)
                pairs = ratios(rates["manage"], rates["plain"])
                null = ratios(rates["plain-again"], rates["plain"]) if "plain-again" in rates else []
                what = f"link {LINK_MIB_S} MiB/s" if rate else "raw loopback"
                label = f"child-throughput, {p.big_mib} MiB cold, {transport}, {what}"
                bench.rows.append(
                    Row(label, "throughput / plain's, median of pairs", median(pairs), 1.0, None,
                        Target(">=", 0.9, ">= 0.9"), fmt="{:.3f}",
                        note=f"pairs {spread(pairs)}, null {spread(null) if null else 'not run'}; "
                        + ", ".join(f"{s} {median(v):.0f} MiB/s" for s, v in rates.items()))
                )  # fmt: skip
