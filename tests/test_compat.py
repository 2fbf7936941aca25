"""The compatibility tier's verdicts (compat/verdicts.py), and its lists naming tests that exist.

The tier itself runs in ``tox -e compat``; here, its rules on made-up runs: a test that passes with
the plugin off must pass in every mode unless listed, a listed test that passes is an error too,
the offline run sends nothing, a failed prefetch is listed as ``session``.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "compat" / "vendor"
TEST = "tests/test_x.py::test_load"


@pytest.fixture(scope="module")
def verdicts() -> Iterator[ModuleType]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))  # compat/ is a folder of the checkout, not installed
        yield importlib.import_module("compat.verdicts")


def make_run(verdicts: ModuleType, mode: str, outcomes: dict[str, str], returncode: int = 0, **kw: object) -> object:
    mode_of = {m.name: m for m in verdicts.MODES}[mode]
    return verdicts.Run(mode_of, returncode, outcomes, 0, kw.pop("requests", 0), Path("log"), **kw)


def judge(verdicts: ModuleType, *runs: object, expected: dict[tuple[str, str, str], str] | None = None) -> object:
    return verdicts.judge("lib", list(runs), expected or {}, ROOT / "pyproject.toml")


def test_a_test_that_fails_in_a_mode_is_unexpected_unless_listed(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "passed"})
    report = make_run(verdicts, "report", {TEST: "failed"}, returncode=1)

    assert [line.split(" (")[0] for line in judge(verdicts, off, report).unexpected] == [f"report: {TEST} failed"]
    listed = judge(verdicts, off, report, expected={("report", "lib", TEST): "why"})
    assert listed.unexpected == []
    assert listed.expected_lines() == [f"report: {TEST} -- why"]


def test_a_listed_test_that_passes_is_unexpected(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "passed"})
    report = make_run(verdicts, "report", {TEST: "passed"})

    unexpected = judge(verdicts, off, report, expected={("report", "lib", TEST): "why"}).unexpected

    assert any("take it out" in line for line in unexpected), unexpected


def test_an_entry_may_cover_the_tests_of_a_file(verdicts: ModuleType) -> None:
    tests = {f"tests/test_x.py::test_{i}": "passed" for i in range(3)}
    off = make_run(verdicts, "off", tests)
    offline = make_run(verdicts, "offline", dict.fromkeys(tests, "failed"), returncode=1)

    verdict = judge(verdicts, off, offline, expected={("offline", "lib", "tests/test_x.py::"): "why"})

    assert verdict.unexpected == []
    assert verdict.expected_lines() == ["offline: tests/test_x.py:: (3 tests) -- why"]


def test_a_request_in_the_offline_run_is_unexpected(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "passed"})
    offline = make_run(verdicts, "offline", {TEST: "passed"}, requests=2)

    assert [line.split(" (")[0] for line in judge(verdicts, off, offline).unexpected] == [
        "offline: 2 requests reached the local Hub, 0 expected"
    ]


def test_faults_that_were_never_used_and_damage_not_repaired_are_unexpected(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "passed"})
    unused = make_run(verdicts, "manage-503", {TEST: "passed"}, faults=(0, 4))
    left = make_run(verdicts, "flip-cached", {TEST: "passed"}, damaged=(1, 2))

    unexpected = judge(verdicts, off, unused, left).unexpected

    assert [line.split(":")[0] for line in unexpected] == ["manage-503", "flip-cached"], unexpected


def test_a_failed_prefetch_is_unexpected_unless_listed_as_the_session(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "passed"})
    prefetch = make_run(verdicts, "prefetch", {}, returncode=1)

    assert [line.split(" (")[0] for line in judge(verdicts, off, prefetch).unexpected] == ["prefetch: exit code 1"]
    listed = judge(verdicts, off, prefetch, expected={("prefetch", "lib", verdicts.SESSION): "why"})
    assert listed.unexpected == []


def test_a_failure_with_the_plugin_off_is_unexpected(verdicts: ModuleType) -> None:
    off = make_run(verdicts, "off", {TEST: "failed"}, returncode=1)

    assert [line.split(" fails")[0] for line in judge(verdicts, off).unexpected] == [f"off: {TEST}"]


def defined(path: Path) -> set[str]:
    """``Class``, ``function`` and ``Class::method`` names a test file defines."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {
                f"{node.name}::{f.name}" for f in node.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            }
    return names


def test_the_lists_name_vendored_tests_that_exist(verdicts: ModuleType) -> None:
    entries = [(library, test) for (library, test), _ in verdicts.read_list(verdicts.DESELECTED, 2)]
    entries += [(library, test) for (_, library, test) in verdicts.expected_failures()]
    missing = []
    for library, test in entries:
        if test == verdicts.SESSION:
            continue
        file, _, name = test.partition("::")
        found = sorted(VENDOR.glob(f"{library}-*/**/{file}"))
        if len(found) != 1 or (name and name.split("[")[0] not in defined(found[0])):
            missing.append(f"{library} {test}")
    assert missing == [], "compat/deselected.txt or compat/expected-failures.txt names tests that do not exist"
