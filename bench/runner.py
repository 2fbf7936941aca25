"""Starting measured worker processes against the bench Hub, and the rows they produce."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hfsnapshot.testing.hub import client_patches

from .hubserver import HubProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The three ways of doing the same work, in table order.
TOOLS = ("plugin", "hf", "handrolled")
#: How the client fetches LFS files from the bench Hub (which serves them from Xet storage when
#: hf_xet is installed): the environment each worker gets. ``xet`` is the default of a real
#: install (hf_xet and huggingface_hub's shared blob store), ``xet-noshare`` is Xet without the
#: shared store, ``http`` is plain HTTP from the CDN.
TRANSPORTS: dict[str, dict[str, str]] = {
    "xet": {},
    "xet-noshare": {"HF_HUB_DISABLE_SHARED_BLOBS": "1"},
    "http": {"HF_HUB_DISABLE_XET": "1"},
}
WORKER_TIMEOUT = 900.0


@dataclass(frozen=True)
class Target:
    """A goal of the issue: ``op`` is ``<=``, ``>=``, ``==`` or ``info`` (no goal); ``text`` is shown."""

    op: str
    value: float
    text: str

    def check(self, measured: float | None) -> bool | None:
        if measured is None or self.op == "info":
            return None
        if self.op == "<=":
            return measured <= self.value
        if self.op == ">=":
            return measured >= self.value
        return measured == self.value


@dataclass
class Row:
    """One line of the table: the plugin's figure against its target, the baselines' beside it."""

    key: str
    workload: str
    measure: str
    plugin: float | None
    a: float | None
    b: float | None
    target: Target
    fmt: str = "{:.2f}"
    note: str = ""
    cells: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        return self.target.check(self.plugin)

    def cell(self, which: str) -> str:
        if which in self.cells:
            return self.cells[which]
        value = {"plugin": self.plugin, "a": self.a, "b": self.b}[which]
        return "-" if value is None else self.fmt.format(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "workload": self.workload,
            "measure": self.measure,
            "plugin": self.plugin,
            "baseline_a": self.a,
            "baseline_b": self.b,
            "cells": {w: self.cell(w) for w in ("plugin", "a", "b")},
            "target": self.target.text,
            "result": {True: "PASS", False: "MISS", None: "n/a"}[self.passed],
            "note": self.note,
        }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class WorkerResult:
    """What one worker reported, plus the peak RSS the kernel accounted for it (``wait4``)."""

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
    return {"name": name or tool, "tool": tool, "args": args}


def task(*steps: dict[str, Any], rounds: int = 1, warmup: int = 0, inspect: bool = False) -> dict[str, Any]:
    return {"steps": list(steps), "rounds": rounds, "warmup": warmup, "inspect": inspect}


def wall(results: Sequence[WorkerResult]) -> float:
    """From the first worker's start to the last worker's end."""
    return max(r.end for r in results) - min(r.start for r in results)


class Bench:
    """The shared state of one run: the Hub process, a scratch folder, rows and raw figures."""

    def __init__(self, hub: HubProcess, workdir: Path, profile: Any, transport: str | None = None) -> None:
        self.hub = hub
        #: ``xet`` or ``http`` when the per-transport workloads run on that one only (``--transport``).
        self.transport = transport
        self.workdir = workdir
        self.profile = profile
        self.home = workdir / "hf-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.rows: list[Row] = []
        self.figures: dict[str, Any] = {}
        self.notes: list[str] = []
        #: Extra tables (title, Markdown text) printed after the main one and added to RESULTS.md.
        self.sections: list[tuple[str, str]] = []

    # --- caches -------------------------------------------------------------------------------
    def new_cache(self, label: str) -> Path:
        path = self.workdir / "caches" / f"{label}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    @staticmethod
    def drop(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def env(self, cache: Path, transport: str = "xet") -> dict[str, str]:
        """The environment of a worker: huggingface_hub pointed at the bench Hub and ``cache``,
        fetching LFS files by ``transport`` (a key of :data:`TRANSPORTS`)."""
        env = dict(os.environ)
        for name, value in client_patches(self.hub.url, cache, self.home).environ.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        env["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
        env["HF_HUB_DISABLE_TELEMETRY"] = "1"
        env.pop("HFSNAPSHOT_LOCK_MODE", None)
        for switches in TRANSPORTS.values():
            for name in switches:
                env.pop(name, None)
        env.update(TRANSPORTS[transport])
        return env

    # --- workers ------------------------------------------------------------------------------
    def start(
        self,
        cache: Path,
        spec: dict[str, Any],
        transport: str = "xet",
        *,
        prefix: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> Worker:
        """Start one worker on ``spec`` (behind the command ``prefix``, with ``env`` added to its
        environment); it imports everything, then waits for :meth:`Worker.go`."""
        environ = {**self.env(cache, transport), **(env or {})}
        logs = self.workdir / "logs"
        logs.mkdir(exist_ok=True)
        err = logs / f"worker-{uuid.uuid4().hex[:8]}.err"
        with open(err, "w", encoding="utf-8") as err_handle:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "bench.worker"],
                cwd=REPO_ROOT,
                env=environ,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err_handle,
                text=True,
            )
        worker = Worker(proc, err)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec) + "\n")
        proc.stdin.flush()
        return worker

    def run(
        self,
        cache: Path,
        tasks: Sequence[dict[str, Any]],
        transport: str = "xet",
        *,
        prefixes: Sequence[Sequence[str]] | None = None,
        prime: int = 0,
        env: dict[str, str] | None = None,
    ) -> list[WorkerResult]:
        """Start one worker per task (``prefixes``: a command prefix per task; ``env``: added to
        each one's environment), let them import, release them together, collect results.
        ``prime``: bytes of free memory to make resident (:class:`MemoryPrimer`) once the workers
        are ready, just before they are released."""
        primer = MemoryPrimer() if prime else None
        workers: list[Worker] = []
        try:
            for n, spec in enumerate(tasks):
                workers.append(self.start(cache, spec, transport, prefix=prefixes[n] if prefixes else (), env=env))
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

    def timed(self, label: str, fn: Callable[[], Any]) -> Any:
        """Run one workload, recording its duration and how busy the rest of the machine was."""
        meter = CpuMeter()
        log(f"{label} ...")
        value = fn()
        seconds = time.monotonic() - meter.started
        others = meter.others_share(len(os.sched_getaffinity(0)))
        self.figures.setdefault("workload_seconds", {})[label] = round(seconds, 1)
        self.figures.setdefault("other_processes_cpu_share", {})[label] = round(others, 3)
        log(f"{label} done in {seconds:.1f}s (other processes used {others:.0%} of the CPU meanwhile)")
        return value


#: The kernel's count of the free memory it has reported to the hypervisor (free page reporting).
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")
#: How long that count must stand still before a run is primed: this kernel reports free memory
#: 2.0 s after it is freed (measured: four frees of 256 MiB, each reported 2.04-2.06 s later).
REPORTING_QUIET = 2.5


class MemoryPrimer:
    """Gives each measured run the same kind of free memory to write its download into.

    On a VM with free page reporting (this Firecracker VM: ``page_reporting`` in ``/sys/module``)
    the guest hands memory that has stayed free for 2 s back to the host, and the first write to
    such a page faults in the host. A cold download that wrote into that memory took about twice
    the kernel CPU (0.6-0.9 s against 0.25-0.35 s per 128 MiB over Xet, in
    ``copy_folio_from_iter_atomic``) and about 1.5x the wall, and which of the two a run got
    followed how long the memory had been free: 8 workers take 1.2-1.7 s to import against 0.3 s
    for one, so they got it more often. So :meth:`prime` waits until no reporting pass is due (the
    count has not moved for :data:`REPORTING_QUIET`, the workers' start counted in), then writes
    ``nbytes`` into a scratch file in ``folder`` and deletes it, so that the run's page cache is
    taken from pages the same filesystem's page cache has just let go of. With it, 99 of 100 runs
    had the fast mode (workload 1's 84 over both transports, and a block of 16 over Xet).
    Priming with anonymous memory, or with a file in ``/dev/shm``, did not: 10 and 12 of 12 slow.
    The file is deleted while still dirty; at 2 GiB (workload 12) part of it is written back
    first, which costs the bench time, not the run.
    """

    def __init__(self) -> None:
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
        while self.count is not None and time.monotonic() < deadline:
            now = self._reported()
            if now != self.count:
                self.count, self.since = now, time.monotonic()
            elif time.monotonic() - self.since >= REPORTING_QUIET:
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
    """One ``bench.worker`` process: ``ready()`` once imported, ``go()``, then ``result()``."""

    def __init__(self, proc: subprocess.Popen[str], err: Path) -> None:
        self.proc = proc
        self.err = err

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "READY":
            raise RuntimeError(f"bench worker did not start: {line!r}\n{_tail(self.err)}")

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("GO\n")
        self.proc.stdin.flush()

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
    """CPU time the whole machine spent busy, and how much of it was not this bench's processes.

    Busy time comes from ``/proc/stat``; ours is ``getrusage`` of this process and every child it
    has waited for (workers, pytest runs, and the Hub process once stopped). Other work on the
    machine (other users' test runs) shows up as the difference.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.busy0 = _busy_seconds()
        self.ours0 = _our_cpu_seconds()

    def others_share(self, cores: int) -> float:
        """Fraction of all cores' time used by processes not of this bench since the start."""
        elapsed = time.monotonic() - self.started
        busy = _busy_seconds() - self.busy0
        ours = _our_cpu_seconds() - self.ours0
        return max(0.0, busy - ours) / max(1e-9, elapsed * cores)


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
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
