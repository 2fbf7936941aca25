"""The table (terminal and Markdown), the machine description, and the JSON file."""

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
    result = {True: "PASS", False: "MISS", None: "n/a"}[row.passed]
    return [row.workload, row.measure, row.cell("plugin"), row.cell("a"), row.cell("b"), row.target.text, result]


def table(rows: Sequence[Row]) -> str:
    """A fixed-width table, with each row's note underneath."""
    lines = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(COLUMNS))]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
        elif rows[n - 1].note:
            out.append(" " * (widths[0] + 2) + "  " + rows[n - 1].note)
    return "\n".join(out)


def markdown(
    rows: Sequence[Row],
    machine: dict[str, Any],
    command: str,
    seconds: float,
    notes: Sequence[str],
    figures: dict[str, Any],
    sections: Sequence[tuple[str, str]] = (),
) -> str:
    head = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    body = "".join("| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |\n" for r in rows)
    details = "".join(f"- **{r.workload}**, {r.measure}: {r.note}\n" for r in rows if r.note)
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    extra = "".join(f"- {n}\n" for n in notes)
    load = figures.get("other_processes_cpu_share", {})
    if load:
        shares = ", ".join(f"{k.removeprefix('workload ')}: {v:.0%}" for k, v in load.items())
        extra += f"- CPU share used by other processes on the machine, per workload: {shares}.\n"
    return (
        "# Benchmark results\n\n"
        f"`{command}` ({seconds / 60:.1f} min), {machine['date']}, commit {machine['commit']}.\n\n"
        f"Machine: {machine['cpu']}, {machine['cores']} cores available, {machine['ram_gib']} GiB RAM, "
        f"{machine['platform']}; Python {machine['python']}; {versions}. Other processes on the machine "
        f"(other developers' test runs) used {machine.get('other_processes_cpu_share', 0):.0%} of its CPU "
        "during the run.\n\n"
        "Plugin = `pytest_hfsnapshot.materialize` (what the fixtures call); A = plain "
        "`huggingface_hub.snapshot_download`; B = hand-rolled (file lock per repo around `snapshot_download`, "
        "3 attempts, linear backoff, `config.json` checked). Every figure is a median of repeats measured side "
        "by side in this one run, against the local Hub running in its own process; the result column "
        "compares the plugin's figure with the issue's target. A transport in the workload column is how "
        "the client fetched LFS files: `xet` = hf_xet with huggingface_hub's shared blob store (the default "
        "of a real install), `xet-noshare` = `HF_HUB_DISABLE_SHARED_BLOBS=1`, `http` = `HF_HUB_DISABLE_XET=1` "
        "(plain HTTP from the CDN); rows without one ran on `xet`.\n\n"
        + head
        + body
        + "".join(f"\n## {title}\n\n{text}" for title, text in sections)
        + "\n## Details\n\n"
        + details
        + extra
    )


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    ram = 0.0
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            ram = int(handle.readline().split()[1]) / (1 << 20)
    except (OSError, ValueError, IndexError):
        pass
    versions = {}
    for dist in ("pytest-hfsnapshot", "huggingface_hub", "httpx2", "httpx", "filelock", "pytest", "pytest-xdist"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "ram_gib": round(ram, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "commit": _git("rev-parse", "--short", "HEAD") + (" (dirty tree)" if _git("status", "--porcelain") else ""),
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
