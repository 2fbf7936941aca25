"""The compatibility tier: other libraries' own test files, unmodified, against the local Hub in every mode.

Each library vendored in ``compat/vendor/`` runs its test files in a fresh pytest process per mode
(plugin off, present, recording, prefetch then offline, ``manage`` under faults, ``fail``) against
a local Hub with Xet storage that serves the repos they name under their real ids
(``compat/repos.py``), with a fresh ``HF_HOME`` for each run. A test that passes with the plugin
off must pass in every mode, unless ``compat/expected-failures.txt`` lists it with its reason;
``compat/deselected.txt`` holds the tests that cannot run here, with theirs. Prints a table and
exits 1 on any unexpected result::

    python -m compat.run [--library NAME] [--modes off,report] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from pytest_hfsnapshot.testing.half_written import corrupted_blob
from pytest_hfsnapshot.testing.hub import LocalHub, client_patches

from . import repos
from .verdicts import MODE_NAMES, MODES, Expected, Mode, Run, Verdict, deselected, expected_failures, judge

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
SHIMS = HERE / "shims"
RUN_TIMEOUT = 300.0
OUTCOMES_PLUGIN = "_compat_outcomes"
PYTEST = ("-m", "pytest", "-p", OUTCOMES_PLUGIN, "-p", "no:cacheprovider", "-q", "-rfE", "--durations=8")


@dataclass(frozen=True)
class Library:
    """One vendored release, ``compat/vendor/<name>-<version>/``, whose tests run from ``root`` in it."""

    name: str
    version: str
    #: Where pytest runs inside the vendored tree (tokenizers' tests expect a folder named ``python``).
    root: str = "."

    @property
    def vendored(self) -> Path:
        return VENDOR / f"{self.name}-{self.version}"


LIBRARIES = (
    Library("huggingface_hub", "2.4.0"),
    Library("tokenizers", "0.23.3", root="python"),
    Library("datasets", "5.2.0"),
)


# --- one run ------------------------------------------------------------------------------------------


def stage(library: Library, work: Path) -> Path:
    """The vendored tree with the library's shims and the outcome plugin, in ``work/src``; returns its root."""
    src = work / "src"
    shutil.copytree(library.vendored, src, ignore=shutil.ignore_patterns("__pycache__", "LICENSE", "NOTICE"))
    if (SHIMS / library.name).is_dir():
        shutil.copytree(SHIMS / library.name, src / library.root, dirs_exist_ok=True)
    root = src / library.root
    shutil.copy(HERE / "outcomes.py", root / f"{OUTCOMES_PLUGIN}.py")
    return root


def child_env(hub: LocalHub, home: Path, outcomes: Path) -> dict[str, str]:
    """One run's environment: the local Hub, ``home`` as HF_HOME, none of the outer pytest, plugin or HF settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HFSNAPSHOT_", "HF_"))}
    env = client_patches(hub.url, home / "hub", home).child_environ(base)
    env["COMPAT_OUTCOMES"] = str(outcomes)
    # hf_xet retries a failed CAS request itself, after seconds of back-off by default.
    env["HF_XET_CLIENT_RETRY_BASE_DELAY"] = "10ms"
    # .pyc files written and reused: the env is installed without them (uv compiles none), and each
    # run would otherwise compile datasets and everything it imports again.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def inject(hub: LocalHub, commits: Iterable[repos.Commit], fault: str) -> int:
    """One ``fault`` for each file of ``commits``, on its resolve path whichever origin serves it; how many."""
    count = 0
    for repo_id, repo_type, _, files in commits:
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        for path in files:
            pattern = f"/{prefix}{repo_id}/resolve/*/{path}"
            if fault == "503":
                hub.fail(pattern, 503)
            elif fault == "cut":
                hub.cut(pattern, after_bytes=16)
            else:
                hub.corrupt(pattern)
            count += 1
    return count


def damage(cache: Path, pins: Path) -> list[tuple[str, str, str]]:
    """Flip one byte of every file the pin file lists that ``cache`` holds: (repo_type, repo_id, path) of each."""
    flipped = []
    for entry in json.loads(pins.read_text(encoding="utf-8")):
        repo_type = entry.get("repo_type", "model")
        for path in entry.get("files", []):
            try:
                corrupted_blob(cache, entry["repo_id"], path, revision=entry["commit"], repo_type=repo_type)
            except FileNotFoundError:
                continue
            flipped.append((repo_type, entry["repo_id"], path))
    return flipped


def whole(cache: Path, commits: list[repos.Commit], flipped: list[tuple[str, str, str]]) -> int:
    """How many of the ``flipped`` files hold their Hub contents again, in every snapshot of ``cache``."""
    contents: dict[tuple[str, str, str], set[bytes]] = {}
    for repo_id, repo_type, _, files in commits:
        for path, data in files.items():
            contents.setdefault((repo_type, repo_id, path), set()).add(data.encode() if isinstance(data, str) else data)
    count = 0
    for repo_type, repo_id, path in flipped:
        snapshots = cache / f"{repo_type}s--{repo_id.replace('/', '--')}" / "snapshots"
        copies = [snapshot / path for snapshot in snapshots.iterdir() if (snapshot / path).is_file()]
        count += bool(copies) and all(copy.read_bytes() in contents[(repo_type, repo_id, path)] for copy in copies)
    return count


@dataclass
class Session:
    """A library's runs against one local Hub: the staged tests, the pin file, each mode's HF_HOME."""

    library: Library
    hub: LocalHub
    commits: list[repos.Commit]
    root: Path
    work: Path
    homes: dict[str, Path] = field(default_factory=dict)

    @property
    def pins(self) -> Path:
        return self.work / "pins.json"

    def run(self, mode: Mode) -> Run:
        folder = self.work / mode.name
        home = self.homes[mode.home] if mode.home else folder / "home"
        self.homes[mode.name] = home
        home.mkdir(parents=True, exist_ok=True)
        folder.mkdir(exist_ok=True)
        outcomes = folder / "outcomes.json"
        flipped = damage(home / "hub", self.pins) if mode.damage else []
        injected = inject(self.hub, self.commits, mode.fault) if mode.fault else 0
        command = [sys.executable, *PYTEST, *[f"--deselect={test}" for test in deselected(self.library.name)]]
        command += [f"--basetemp={folder / 'tmp'}", *[arg.format(pins=self.pins) for arg in mode.args], "tests"]
        self.hub.reset_counters()
        done = subprocess.run(
            command,
            cwd=self.root,
            env=child_env(self.hub, home, outcomes),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        self.hub.wait_idle()
        left = sum(remaining for _, _, remaining in self.hub.pending_faults())
        self.hub.clear_faults()
        log = folder / "pytest.log"
        log.write_text(" ".join(command) + "\n\n" + done.stdout + done.stderr, encoding="utf-8")
        recorded = json.loads(outcomes.read_text()) if outcomes.is_file() else {"outcomes": {}, "deselected": 0}
        return Run(
            mode,
            done.returncode,
            recorded["outcomes"],
            recorded["deselected"],
            len(self.hub.requests),
            log,
            (injected - left, injected),
            (whole(home / "hub", self.commits, flipped), len(flipped)),
        )


@dataclass
class Result:
    library: Library
    runs: list[Run]
    verdict: Verdict
    seconds: float


def run_library(library: Library, work: Path, expected: Expected, modes: tuple[Mode, ...]) -> Result:
    started = time.monotonic()
    installed = version(library.name)
    if installed != library.version:
        wrong = Verdict([f"{library.name} {installed} is installed; the vendored tests are of {library.version}"])
        return Result(library, [], wrong, 0.0)
    work.mkdir(parents=True, exist_ok=True)
    root = stage(library, work)
    with LocalHub() as hub:
        session = Session(library, hub, repos.fill(hub, library.name), root, work)
        runs = [session.run(mode) for mode in modes]
    verdict = judge(library.name, runs, expected, session.pins)
    return Result(library, runs, verdict, time.monotonic() - started)


# --- the table ----------------------------------------------------------------------------------------


def cell(run: Run) -> str:
    if not run.mode.runs_tests:
        return f"exit {run.returncode}"
    counts = Counter(run.outcomes.values())
    text = f"{counts['passed']}/{counts['failed']}/{counts['skipped']}"
    if run.mode.no_requests:
        text += f" {run.requests}req"
    if run.mode.fault:
        text += f" f{run.faults[0]}/{run.faults[1]}"
    if run.mode.damage:
        text += f" d{run.damaged[0]}/{run.damaged[1]}"
    return text


LEGEND = """\
cells: passed/failed/skipped of the tests run; desel.: tests deselected (compat/deselected.txt);
Nreq: requests that reached the local Hub; fU/N: U of the N faults injected were used;
dW/N: W of the N files flipped in the cache hold their contents again after the run"""


def table(results: list[Result], modes: tuple[Mode, ...]) -> str:
    rows = [["library", "tests", "desel.", *[mode.name for mode in modes]]]
    for result in results:
        off = result.runs[0] if result.runs else None
        rows.append(
            [
                f"{result.library.name} {result.library.version}",
                str(len(off.outcomes)) if off else "-",
                str(off.deselected) if off else "-",
                *[cell(run) for run in result.runs],
            ]
        )
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = ["  ".join(value.ljust(widths[i]) for i, value in enumerate(row)).rstrip() for row in rows]
    return "\n".join([*lines, LEGEND])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat.run", description=__doc__.splitlines()[0])
    parser.add_argument("--library", action="append", choices=[lib.name for lib in LIBRARIES], help="only these")
    parser.add_argument("--modes", help=f"comma-separated, 'off' first (default: all of {','.join(MODE_NAMES)})")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    parser.add_argument("--jobs", type=int, default=len(LIBRARIES), help="libraries run at once (default: all)")
    options = parser.parse_args(argv)
    chosen = [lib for lib in LIBRARIES if not options.library or lib.name in options.library]
    modes = tuple(mode for mode in MODES if not options.modes or mode.name in options.modes.split(","))
    if not modes or modes[0].name != "off":
        parser.error("the modes must include 'off': it is what every other mode is compared with")
    names = {mode.name for mode in modes}
    for mode in modes:
        if mode.home and mode.home not in names:
            parser.error(f"mode {mode.name} goes on with the cache of mode {mode.home}: select both")
    if options.keep and options.keep.exists() and any(options.keep.iterdir()):
        parser.error(f"--keep {options.keep}: not empty (give a new folder)")
    expected = expected_failures()
    started = time.monotonic()
    work = options.keep or Path(tempfile.mkdtemp(prefix="hfsnapshot-compat-"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            results = list(pool.map(lambda lib: run_library(lib, work / lib.name, expected, modes), chosen))
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results, modes))
    for result in results:
        print(f"\n{result.library.name} {result.library.version}: {result.seconds:.0f}s")
        for line in result.verdict.expected_lines():
            print(f"  expected failure  {line}")
        for line in result.verdict.unexpected:
            print(f"  UNEXPECTED        {line}")
    bad = sum(len(result.verdict.unexpected) for result in results)
    elapsed = time.monotonic() - started
    print(f"\ncompat: {len(chosen)} libraries, {len(modes)} modes, {bad} unexpected results in {elapsed:.0f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
