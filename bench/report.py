"""The table (terminal and Markdown), the machine it ran on, and the JSON file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from .runner import REPO_ROOT, Row

COLUMNS = ("workload", "measure", "plugin", "A: snapshot_download", "B: hand-rolled", "target", "result")


def _cells(row: Row) -> list[str]:
    return [row.workload, row.measure, row.cell("plugin"), row.cell("a"), row.cell("b"), row.target.text, row.result]


def table(rows: Sequence[Row]) -> str:
    """A fixed-width table, each row's note underneath."""
    lines = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
        elif rows[n - 1].note:
            out.append(" " * (widths[0] + 4) + rows[n - 1].note)
    return "\n".join(out)


def markdown(rows: Sequence[Row]) -> str:
    """The table in the benchmarks page's form, to paste there after a full run."""
    lines = [COLUMNS, ["---"] * len(COLUMNS), *(_cells(r) for r in rows)]
    return "".join("| " + " | ".join(c.replace("|", "\\|") for c in line) + " |\n" for line in lines)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        pass
    versions = {}
    for dist in ("pytest-hfsnapshot", "huggingface_hub", "hf_xet", "filelock", "pytest", "pytest-xdist"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    commit = _git("rev-parse", "--short", "HEAD") + (" (dirty tree)" if _git("status", "--porcelain") else "")
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip()


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
