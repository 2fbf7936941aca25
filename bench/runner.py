"""Measured worker processes against the bench Hub, the rounds they run in, and the rows they give."""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hfsnapshot.testing.hub import client_patches

from .hubserver import HubProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
#: The link speed CI runners see, for the workloads that cap the Hub's link.
LINK_MIB_S = 200
#: The three ways of doing the same work, in table order: the plugin, A and B.
TOOLS = ("plugin", "hf", "handrolled")
#: How the client fetches LFS files from the bench Hub (which serves them from Xet storage when
#: hf_xet is installed): ``xet`` is a real install's default (with the shared blob store), ``http``
#: is plain HTTP from the CDN.
TRANSPORTS: dict[str, dict[str, str]] = {"xet": {}, "http": {"HF_HUB_DISABLE_XET": "1"}}


@dataclass(frozen=True, kw_only=True)
class Profile:
    """Sizes and repeat counts of one run; the defaults are the full run's."""

    name: str
    #: The transports of the per-transport workloads (``--transport`` picks one).
    transports: tuple[str, ...] = tuple(TRANSPORTS)
    #: ABBA rounds of the comparisons that start processes per side.
    rounds: int = 7
    #: The sharded repo of ``cold-8-procs`` and ``repair-truncated-shard``: shards x MiB.
    shards: int = 4
    shard_mib: int = 32
    #: Files of the many-files repo of ``warm-1000-files``, and timed calls per tool and round.
    warm_files: int = 1000
    warm_calls: int = 12
    #: The one file of ``cold-1-gib`` (MiB), and its ABBA rounds.
    big_mib: int = 1024
    big_rounds: int = 11
    #: Seconds without free-page reporting a primed run waits for (:class:`MemoryPrimer`).
    prime_quiet: float = 2.5
    #: Tests of ``suite-without-snapshots``.
    suite_tests: int = 2000
    #: Processes of ``rate-limit-window`` (one run each), and its window in seconds.
    rate_processes: tuple[int, ...] = (1, 4, 8)
    rate_window: float = 3.0
    #: ``--hf-retries`` of ``outage-warm-n4``: the retry budget it measures against.
    outage_retries: int = 5
    #: ABBA rounds of the peer suite's workloads (one pytest session per side and round), and the
    #: timed ``from_pretrained`` calls per process of ``warm-implicit-from-pretrained``.
    peer_rounds: int = 5
    peer_calls: int = 40
    #: ABBA rounds of the warm comparisons (a per-call figure, or a warm suite's wall): their gaps
    #: are a few percent, so they take more rounds than the cold ones.
    call_rounds: int = 11
    #: xdist workers of ``peers-cold-n4-faults``.
    peer_workers: int = 4
    #: Whether the comparisons of :func:`ratio_row` run their null side (the second side again).
    nulls: bool = True


PROFILES = {
    "full": Profile(name="full"),
    "quick": Profile(
        name="quick", rounds=3, shard_mib=8, warm_calls=8, big_mib=256, big_rounds=9, peer_rounds=3, call_rounds=9
    ),
    "smoke": Profile(
        name="smoke",
        transports=("xet",),
        rounds=1,
        shard_mib=1,
        warm_files=200,
        warm_calls=3,
        big_mib=32,
        big_rounds=1,
        prime_quiet=0.0,
        suite_tests=200,
        rate_processes=(4,),
        rate_window=1.0,
        outage_retries=1,
        peer_rounds=1,
        peer_calls=5,
        call_rounds=1,
        peer_workers=2,
        nulls=False,
    ),
}


@dataclass(frozen=True)
class Target:
    """A goal: ``op`` is ``<=``, ``>=``, ``==`` or ``info`` (no goal); ``text`` is shown."""

    op: str
    value: float
    text: str

    def check(self, measured: float | None) -> bool | None:
        if measured is None or self.op == "info":
            return None
        return {"<=": measured <= self.value, ">=": measured >= self.value, "==": measured == self.value}[self.op]


INFO = Target("info", 0, "-")


@dataclass
class Row:
    """One line of the table: the plugin's figure against its target, A's and B's beside it."""

    workload: str
    measure: str
    plugin: float | None
    a: float | None
    b: float | None
    target: Target
    fmt: str = "{:.2f}"
    note: str = ""
    cells: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_tools(cls, workload: str, measure: str, figures: dict[str, float], target: Target, **kwargs: Any) -> Row:
        """A row of one figure per tool of :data:`TOOLS`."""
        return cls(workload, measure, figures["plugin"], figures["hf"], figures["handrolled"], target, **kwargs)

    @property
    def passed(self) -> bool | None:
        return self.target.check(self.plugin)

    @property
    def result(self) -> str:
        return {True: "PASS", False: "MISS", None: "n/a"}[self.passed]

    def cell(self, which: str) -> str:
        if which in self.cells:
            return self.cells[which]
        value = {"plugin": self.plugin, "a": self.a, "b": self.b}[which]
        return "-" if value is None else self.fmt.format(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "measure": self.measure,
            "cells": {w: self.cell(w) for w in ("plugin", "a", "b")},
            "plugin": self.plugin,
            "target": self.target.text,
            "result": self.result,
            "note": self.note,
        }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float], fmt: str = "{:.3f}") -> str:
    """``median (min..max, n)``: how a median of pairs is shown with its spread."""
    return f"{fmt.format(median(values))} ({fmt.format(min(values))}..{fmt.format(max(values))}, {len(values)})"


def ratios(top: Sequence[float], bottom: Sequence[float]) -> list[float]:
    """Each round's figure of one side over another's: the pairs of an ABBA comparison."""
    return [x / y for x, y in zip(top, bottom, strict=True)]


def ratio_row(label: str, sides: dict[str, list[float]], target: float, detail: str) -> Row:
    """The first side over the second as the median of ABBA pairs; the third (the second again) is the null."""
    top, bottom, *again = sides
    pairs = ratios(sides[top], sides[bottom])
    null = f"({again[0]}/{bottom}) {spread(ratios(sides[again[0]], sides[bottom]))}" if again else "not run"
    return Row(label, f"{top} / {bottom}, median of pairs", median(pairs), 1.0, None,
               Target("<=", target, f"<= {target:g}"), fmt="{:.3f}",
               note=f"pairs {spread(pairs)}, null {null}; {detail}")  # fmt: skip


def fault_rows(label: str, failed: dict[str, list[int]], moved: dict[str, list[float]], walls: dict[str, list[float]],
               *, of: str, wanted: str, wall: str, note: str = "") -> list[Row]:  # fmt: skip
    """A cold run under faults, ``manage`` against ``plain``: failures (``of`` what) in the worst round,
    file bytes over the bytes ``wanted``, and the ``wall`` ratio as the median of ABBA pairs."""
    pairs = ratios(walls["manage"], walls["plain"])
    return [
        Row(label, f"failed {of}, worst round", max(failed["manage"]), max(failed["plain"]), None,
            Target("<=", 0, "= 0"), fmt="{:.0f}"),
        Row(label, f"file bytes / {wanted}, median", median(moved["manage"]), median(moved["plain"]), None,
            Target("<=", 1.01, "<= 1.01"), fmt="{:.3f}"),
        Row(label, f"{wall} / plain's, median of pairs", median(pairs), 1.0, None, INFO, fmt="{:.2f}",
            note=f"pairs {spread(pairs, '{:.2f}')}{note}"),
    ]  # fmt: skip


def abba(sides: Sequence[str], rounds: int) -> Iterator[str]:
    """``sides`` in order, then reversed, then in order...: a machine that grows busier during the
    run weighs on every side alike."""
    for n in range(rounds):
        yield from sides if n % 2 == 0 else reversed(sides)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class WorkerResult:
    """What one worker reported, and the peak RSS the kernel accounted for it (``wait4``)."""

    data: dict[str, Any]
    maxrss_kib: int

    @property
    def start(self) -> float:
        return float(self.data["start"])

    @property
    def end(self) -> float:
        return float(self.data["end"])

    def durations(self, name: str) -> list[float]:
        return [float(d) for d in self.data["durations"][name]]

    def result(self, name: str) -> dict[str, Any]:
        return dict(self.data["results"][name])


def step(tool: str, name: str | None = None, **args: Any) -> dict[str, Any]:
    """One call of a worker's task: ``tool`` (see :mod:`bench.worker`) with ``args``."""
    return {"name": name or tool, "tool": tool, "args": args}


def task(*steps: dict[str, Any], rounds: int = 1, warmup: int = 0, inspect: bool = False) -> dict[str, Any]:
    """A worker's task: its ``steps`` round-robin ``rounds`` times after ``warmup`` untimed rounds;
    ``inspect``: report the size of every file of each returned snapshot."""
    return {"steps": list(steps), "rounds": rounds, "warmup": warmup, "inspect": inspect}


def wall(results: Sequence[WorkerResult]) -> float:
    """From the first worker's start to the last worker's end."""
    return max(r.end for r in results) - min(r.start for r in results)


class Bench:
    """The shared state of one run: the Hub process, a scratch folder, the profile and the rows."""

    def __init__(self, hub: HubProcess, workdir: Path, profile: Profile, transport: str | None = None) -> None:
        self.hub = hub
        self.workdir = workdir
        self.profile = profile
        #: ``--transport``: the per-transport workloads run on this one only.
        self.transport = transport
        self.home = workdir / "hf-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.rows: list[Row] = []
        self.figures: dict[str, Any] = {}
        self.notes: list[str] = []

    def sides(self, sides: dict[str, Any]) -> dict[str, Any]:
        """A comparison's sides, without the null (the third) where the profile runs none."""
        return sides if self.profile.nulls else dict(list(sides.items())[:2])

    def transports(self) -> tuple[str, ...]:
        """The transports a per-transport workload runs on: Xet only where the Hub serves it."""
        chosen = [self.transport] if self.transport else self.profile.transports
        return tuple(t for t in chosen if t == "http" or self.hub.xet())

    def new_cache(self, label: str) -> Path:
        path = self.workdir / "caches" / f"{label}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    @staticmethod
    def drop(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def env(self, cache: Path, transport: str = "xet", url: str | None = None) -> dict[str, str]:
        """A worker's environment: huggingface_hub pointed at the bench Hub (or ``url``) and ``cache``."""
        env = dict(os.environ)
        for name, value in client_patches(url or self.hub.url, cache, self.home).environ.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env.update(HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1")
        # .pyc files written and reused, as an installed package has them: without them each process
        # compiles the plugin again (an editable install's start-up cost, not a user's).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for switches in TRANSPORTS.values():
            for name in switches:
                env.pop(name, None)
        env.update(TRANSPORTS[transport])
        return env

    def run(
        self, cache: Path, tasks: Sequence[dict[str, Any]], transport: str = "xet", *, prime: int = 0
    ) -> list[WorkerResult]:
        """Start one worker per task, let them import, release them together, collect results.
        ``prime``: bytes of free memory to make alike (:class:`MemoryPrimer`) just before the release."""
        primer = MemoryPrimer(self.profile.prime_quiet) if prime else None
        workers: list[Worker] = []
        try:
            for spec in tasks:
                workers.append(Worker(self.env(cache, transport), spec, self.workdir / "logs"))
            for worker in workers:
                worker.ready()
            if primer is not None:
                primer.prime(self.workdir, prime)
            for worker in workers:
                worker.go()
            return [worker.result() for worker in workers]
        finally:
            for worker in workers:
                worker.kill()

    def timed(self, name: str, workload: Callable[[Bench], None]) -> None:
        """Run one workload, recording its duration and how busy the rest of the machine was."""
        meter = CpuMeter()
        log(f"{name} ...")
        workload(self)
        seconds = time.monotonic() - meter.started
        others = meter.others_share()
        self.figures.setdefault("workload_seconds", {})[name] = round(seconds, 1)
        self.figures.setdefault("other_processes_cpu_share", {})[name] = round(others, 3)
        log(f"{name} done in {seconds:.1f}s (other processes used {others:.0%} of the CPU meanwhile)")


#: Free memory a cold run primes before its workers go, in multiples of the bytes it downloads:
#: the page cache it fills and the client's buffers (:class:`MemoryPrimer`).
PRIME_FACTOR = 2
#: The kernel's count of the free memory it has reported to the hypervisor (free page reporting).
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")


class MemoryPrimer:
    """Gives each measured run the same kind of free memory to write its download into.

    On a VM with free page reporting the guest hands memory free for 2 s back to the host, and the
    first write to such a page faults in the host: a cold download into it took about twice the
    kernel CPU, so which kind a run got decided its wall (see docs/benchmarks.md). :meth:`prime`
    waits until the reported count has stood still for ``quiet`` seconds, then writes ``nbytes``
    into a scratch file beside the caches and deletes it, so the run's page cache comes from pages
    the same filesystem has just let go of.
    """

    def __init__(self, quiet: float) -> None:
        self.quiet = quiet
        self.count = self._reported()
        self.since = time.monotonic()

    @staticmethod
    def _reported() -> str | None:
        try:
            return REPORTED_KIB.read_text()
        except OSError:
            return None

    def prime(self, folder: Path, nbytes: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.quiet and self.count is not None and time.monotonic() < deadline:
            now = self._reported()
            if now != self.count:
                self.count, self.since = now, time.monotonic()
            elif time.monotonic() - self.since >= self.quiet:
                break
            time.sleep(0.05)
        path = folder / f"prime-{uuid.uuid4().hex[:8]}.bin"
        block = b"\1" * (1 << 20)
        try:
            with open(path, "wb") as handle:
                for _ in range(-(-nbytes // len(block))):
                    handle.write(block)
        finally:
            path.unlink(missing_ok=True)


class Worker:
    """One ``bench.worker`` process: started on ``spec``, ``ready()`` once imported, ``go()``, ``result()``."""

    def __init__(self, env: dict[str, str], spec: dict[str, Any], logs: Path) -> None:
        logs.mkdir(exist_ok=True)
        self.err = logs / f"worker-{uuid.uuid4().hex[:8]}.err"
        with open(self.err, "w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.worker"],
                cwd=REPO_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._send(json.dumps(spec))

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"bench worker did not start: {line!r}\n{_tail(self.err)}")

    def go(self) -> None:
        self._send("GO")

    def result(self) -> WorkerResult:
        """Its result once it exits (RuntimeError with its traceback when its task failed)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        data = json.loads(line) if line.strip() else {"ok": False, "error": "no result"}
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        if not data.get("ok"):
            raise RuntimeError(
                f"bench worker failed: {data.get('error')}\n{data.get('traceback', '')}{_tail(self.err)}"
            )
        self.err.unlink(missing_ok=True)
        return WorkerResult(data, usage.ru_maxrss)

    def kill(self) -> None:
        """SIGKILL it by its pid, unless it has exited and been reaped."""
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()


class CpuMeter:
    """How much of the machine's CPU went to processes other than this bench's since it started.

    Busy time comes from ``/proc/stat``; ours is ``getrusage`` of this process and every child it
    has waited for (workers, pytest runs). Other users' work shows up as the difference.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.busy0 = _busy_seconds()
        self.ours0 = _our_cpu_seconds()

    def others_share(self) -> float:
        elapsed = time.monotonic() - self.started
        others = (_busy_seconds() - self.busy0) - (_our_cpu_seconds() - self.ours0)
        return max(0.0, others) / max(1e-9, elapsed * len(os.sched_getaffinity(0)))


def _busy_seconds() -> float:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    # guest time is already included in user time
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _our_cpu_seconds() -> float:
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usages)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
