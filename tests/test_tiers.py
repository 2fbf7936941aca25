"""The tiers' lists in tests/conftest.py name tests, modules and folders that exist."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import SLOW_MODULES, SLOW_TESTS, TIERS

TESTS = Path(__file__).resolve().parent


def test_every_slow_module_exists() -> None:
    assert [where for where in SLOW_MODULES if not (TESTS / where).exists()] == []


def test_every_slow_test_named_exists() -> None:
    missing = []
    for module, names in SLOW_TESTS.items():
        tree = ast.parse((TESTS / module).read_text(encoding="utf-8"))
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        missing += [f"{module}::{name}" for name in sorted(names - defined)]
    assert missing == [], "SLOW_TESTS names tests that no longer exist: take them out"


def test_every_place_a_tier_keeps_exists() -> None:
    places = [place for kept in TIERS.values() for place in kept]
    assert [place for place in places if not (TESTS / place).exists()] == []
