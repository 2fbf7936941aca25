"""A pytest plugin the tier loads into each run: every test's outcome by node id, as JSON.

The file is named by ``COMPAT_OUTCOMES``. A test failed if any phase failed, was skipped if its
setup or call was skipped, and passed otherwise. ``deselected`` counts the tests deselected.
"""

from __future__ import annotations

import json
import os

import pytest

_outcomes: dict[str, str] = {}
_deselected: list[str] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _deselected.extend(item.nodeid for item in items)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif report.skipped and _outcomes.get(report.nodeid) != "failed":
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call" and report.nodeid not in _outcomes:
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session: pytest.Session) -> None:
    with open(os.environ["COMPAT_OUTCOMES"], "w", encoding="utf-8") as out:
        json.dump({"outcomes": _outcomes, "deselected": len(_deselected)}, out, indent=1, sort_keys=True)
