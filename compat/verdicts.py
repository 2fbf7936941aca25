"""What the compatibility tier's runs must show: the modes, the lists with their reasons, and the verdicts.

A test that passes with the plugin off must come out the same in every mode, unless
``compat/expected-failures.txt`` lists it there; an entry whose tests no longer fail is an error
too, so the list only shrinks. ``compat/deselected.txt`` names the tests that never run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
DESELECTED = HERE / "deselected.txt"
EXPECTED = HERE / "expected-failures.txt"
#: The test id, in expected-failures.txt, of a run that runs no test: its exit code is not 0.
SESSION = "session"


@dataclass(frozen=True)
class Mode:
    """One pytest run of a library's tests; ``{pins}`` in ``args`` is the library's pin file."""

    name: str
    args: tuple[str, ...]
    #: The mode whose HF_HOME this run goes on with; None: a fresh one.
    home: str | None = None
    #: A fault for each file of the library's repos, used once: "503", "cut" or "flip".
    fault: str | None = None
    #: Flip one byte of every cached file the pin file lists before the run; all must be whole after it.
    damage: bool = False
    runs_tests: bool = True
    #: The run must send no request to the Hub.
    no_requests: bool = False


PINS = "--hf-pins={pins}"
MANAGE = ("--hf-implicit=manage", PINS)
MODES = (
    Mode("off", ("-p", "no:hfsnapshot")),
    Mode("report", ()),
    Mode("record", (PINS, "--hf-update-pins")),
    Mode("prefetch", ("--hf-prefetch-only", PINS), runs_tests=False),
    Mode("offline", ("--hf-offline", PINS), home="prefetch", no_requests=True),
    Mode("manage-503", MANAGE, fault="503"),
    Mode("manage-cut", MANAGE, fault="cut"),
    Mode("manage-flip", MANAGE, fault="flip"),
    Mode("flip-cached", (*MANAGE, "--hf-verify=sha256"), home="manage-flip", damage=True),
    Mode("fail", ("--hf-implicit=fail", PINS)),
)
MODE_NAMES = [mode.name for mode in MODES]


# --- the lists ----------------------------------------------------------------------------------------


def read_list(path: Path, fields: int) -> list[tuple[list[str], str]]:
    """Lines ``<field> ... <field> -- <reason>``; ``#`` comments and blank lines skipped."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        head, separator, reason = line.partition(" -- ")
        parts = head.split()
        if not separator or len(parts) != fields or not reason.strip():
            raise SystemExit(f"{path}:{number}: expected {fields} fields, ' -- ' and a reason: {line!r}")
        entries.append((parts, reason.strip()))
    return entries


def deselected(library: str) -> dict[str, str]:
    """Test ids (or prefixes of ids: a file, a class) deselected for ``library``, with their reasons."""
    return {test: reason for (lib, test), reason in read_list(DESELECTED, 2) if lib == library}


Expected = dict[tuple[str, str, str], str]


def expected_failures(path: Path = EXPECTED) -> Expected:
    """(mode, library, test id or prefix) -> why it fails there; a line may name several modes, comma-separated."""
    found = {}
    for (modes, library, test), reason in read_list(path, 3):
        for mode in modes.split(","):
            if mode not in MODE_NAMES:
                raise SystemExit(f"{path}: unknown mode {mode!r} (modes: {', '.join(MODE_NAMES)})")
            found[(mode, library, test)] = reason
    return found


def listed(expected: Expected, mode: str, library: str, test: str) -> tuple[str, str] | None:
    """The entry (test id or prefix, reason) of ``expected`` that covers ``test`` in ``mode``, if any."""
    for (entry_mode, entry_library, prefix), reason in expected.items():
        if entry_mode == mode and entry_library == library and test.startswith(prefix):
            return prefix, reason
    return None


# --- verdicts ----------------------------------------------------------------------------------------


@dataclass
class Run:
    """What one pytest run of a library's tests did."""

    mode: Mode
    returncode: int
    outcomes: dict[str, str]
    deselected: int
    requests: int
    log: Path
    faults: tuple[int, int] = (0, 0)  # (used, injected)
    damaged: tuple[int, int] = (0, 0)  # (whole again after the run, flipped before it)


@dataclass
class Verdict:
    """A library's unexpected results, and the expected failures seen (mode, test or prefix, reason) -> tests."""

    unexpected: list[str] = field(default_factory=list)
    seen: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def saw(self, mode: str, entry: tuple[str, str]) -> None:
        key = (mode, *entry)
        self.seen[key] = self.seen.get(key, 0) + 1

    def expected_lines(self) -> list[str]:
        """One line per entry, its modes joined."""
        modes: dict[tuple[str, str, int], list[str]] = {}
        for (mode, what, reason), count in self.seen.items():
            modes.setdefault((what, reason, count), []).append(mode)
        return [
            f"{','.join(names)}: {what}{f' ({count} tests)' if count > 1 else ''} -- {reason}"
            for (what, reason, count), names in modes.items()
        ]


def judge_session_run(verdict: Verdict, run: Run, library: str, expected: Expected) -> None:
    """A run with no test (the prefetch): exit code 0, unless listed."""
    entry = listed(expected, run.mode.name, library, SESSION)
    if run.returncode != 0 and entry is None:
        verdict.unexpected.append(f"{run.mode.name}: exit code {run.returncode} (see {run.log})")
    elif run.returncode != 0 and entry is not None:
        verdict.saw(run.mode.name, entry)
    elif entry is not None:
        verdict.unexpected.append(f"{run.mode.name}: exit code 0, yet expected-failures.txt lists it: take it out")


def judge_test_run(verdict: Verdict, run: Run, baseline: dict[str, str], library: str, expected: Expected) -> None:
    """Each test as with the plugin off, unless listed; the mode's own checks (requests, faults, damage)."""
    name = run.mode.name
    for test, wanted in sorted(baseline.items()):
        got = run.outcomes.get(test, "not run")
        entry = listed(expected, name, library, test)
        if entry is not None and got == wanted:
            verdict.unexpected.append(f"{name}: {test} {got}, yet expected-failures.txt lists it: take it out")
        elif entry is not None:
            verdict.saw(name, entry)
        elif got != wanted:
            verdict.unexpected.append(f"{name}: {test} {got} (plugin off: {wanted}; see {run.log})")
    for test in sorted(set(run.outcomes) - set(baseline)):
        if run.outcomes[test] == "failed":
            verdict.unexpected.append(f"{name}: {test} failed, and did not run with the plugin off")
    failures = "failed" in run.outcomes.values()
    if run.returncode not in (0, 1) or (run.returncode == 1) != failures:
        verdict.unexpected.append(f"{name}: exit code {run.returncode} (see {run.log})")
    if run.mode.no_requests and run.requests:
        verdict.unexpected.append(f"{name}: {run.requests} requests reached the local Hub, 0 expected (see {run.log})")
    if run.mode.fault and run.faults[0] == 0:
        verdict.unexpected.append(f"{name}: none of the {run.faults[1]} faults injected was used: it tested nothing")
    if run.mode.damage and (run.damaged[1] == 0 or run.damaged[0] < run.damaged[1]):
        whole_again, flipped = run.damaged
        verdict.unexpected.append(f"{name}: {whole_again} of the {flipped} files flipped in the cache are whole again")


def judge(library: str, runs: list[Run], expected: Expected, pins: Path) -> Verdict:
    verdict = Verdict()
    baseline = runs[0].outcomes
    if not baseline:
        verdict.unexpected.append("off: no test ran")
    for test, outcome in sorted(baseline.items()):
        if outcome == "failed":
            verdict.unexpected.append(
                f"off: {test} fails with the plugin off (fix its repo in repos.py, or deselect it)"
            )
    for run in runs[1:]:
        if run.mode.runs_tests:
            judge_test_run(verdict, run, baseline, library, expected)
        else:
            judge_session_run(verdict, run, library, expected)
    if any(run.mode.name == "record" for run in runs) and not pins.is_file():
        verdict.unexpected.append("record: no pin file was written")
    ran = {run.mode.name for run in runs}
    for mode, entry_library, prefix in expected:
        if entry_library == library and mode in ran and not any(key[:2] == (mode, prefix) for key in verdict.seen):
            verdict.unexpected.append(f"{mode}: expected-failures.txt lists {prefix}, which did not fail: take it out")
    return verdict
