"""Counts in what users read are said in the noun's number: "1 file", "2 files", "0 tests".

One rule writes them, ``pytest_hfsnapshot.core.cache.formats.count``; this test reads every f-string of
the package for a count written beside a fixed plural ("{n} files", "{n} file(s)"), which says
"1 files" one day.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pytest_hfsnapshot.core.cache.formats import count

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_hfsnapshot"
#: The nouns the package counts in its messages, summaries and reports.
NOUNS = (
    "blob",
    "byte",
    "day",
    "download",
    "entry",
    "file",
    "lock",
    "path",
    "problem",
    "repo",
    "request",
    "snapshot",
    "test",
    "window",
    "worker",
)
FIXED_PLURAL = re.compile(rf"^ (?:\"[^\"]*\" )?(?:{'|'.join(NOUNS)})(?:s\b|\(s\))")
#: Strings that look like counts and are not messages.
NOT_MESSAGES = {
    # A commit's message is part of its id: the local Hub's commit ids stay the ones docs and tests show.
    "testing/_repos.py": "Upload {len(blobs)} files to {repo_id}",
}


def fixed_plurals(source: str) -> list[str]:
    """The f-strings of ``source`` that write a count beside a fixed plural noun."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.JoinedStr):
            continue
        for value, after in zip(node.values, node.values[1:], strict=False):
            if (
                isinstance(value, ast.FormattedValue)
                and value.format_spec is None
                and isinstance(after, ast.Constant)
                and isinstance(after.value, str)
                and FIXED_PLURAL.match(after.value)
            ):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_every_count_takes_its_nouns_number() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        hits = [h for h in fixed_plurals(path.read_text(encoding="utf-8")) if NOT_MESSAGES.get(where, "\0") not in h]
        if hits:
            found[where] = hits
    assert found == {}, "write these counts with core.cache.formats.count (1 file, 2 files)"


def test_a_fixed_plural_is_found() -> None:
    assert fixed_plurals('f"{len(files)} files, {n} file(s), {limit} \\"api\\" requests"') != []
    assert len(fixed_plurals('f"{len(files)} files"')) == len(fixed_plurals('f"{n} file(s) are"')) == 1
    assert fixed_plurals("f\"{count(n, 'file')}, {label} is gone, {size:.1f}s\"") == []


def test_count() -> None:
    assert [count(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
