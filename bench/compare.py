"""``python -m bench.compare --base REV [--only 1,3] [--runs 4] [--quick | --smoke]``: before and after, side by side.

Runs the chosen workloads with the plugin's code of two versions in one go: ``REV`` (the
``pytest_hfsnapshot`` folder of that git revision, extracted with ``git archive``) and this tree.
Only the plugin's code differs between the two sides: the harness, the bench Hub, the baselines
A and B and every other package are this tree's and this environment's. The runs alternate
base, head, head, base, ... (ABBA), so a machine that grows busier during the run weighs on both
sides alike. Each run is a whole ``python -m bench`` of the workloads (its own Hub, its own
caches); the bench worker imports the base's plugin when ``HFSNAPSHOT_BENCH_CODE`` names its folder.

Prints, for every row, the plugin's figure of each side as the median of its runs with (min,
max), A's figure beside it, and the target; writes every run's JSON next to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .runner import log, median

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
#: The worker puts this folder first on ``sys.path`` (see :mod:`bench.worker`).
CODE_ENV = "HFSNAPSHOT_BENCH_CODE"


def extract(rev: str, into: Path) -> str:
    """The ``pytest_hfsnapshot`` folder of git revision ``rev``, extracted under ``into``; returns the commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    if commit.returncode != 0:
        raise SystemExit(f"bench.compare: --base {rev!r} is not a commit of {REPO_ROOT}: {commit.stderr.strip()}")
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit.stdout.strip(), "pytest_hfsnapshot"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    )
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit.stdout.strip()


def order(runs: int) -> list[str]:
    """``base, head, head, base, ...``: ``runs`` sides in ABBA order."""
    pattern = ["base", "head", "head", "base"]
    return [pattern[n % 4] for n in range(runs)]


def _spread(values: list[float], fmt: str) -> str:
    if not values:
        return "-"
    text = fmt.format(median(values))
    if len(values) > 1:
        text += f" ({fmt.format(min(values))}..{fmt.format(max(values))})"
    return text


def table(results: dict[str, list[dict[str, Any]]], *, markdown: bool = False) -> str:
    """One line per row key: base and head (median of runs, min..max), A of head, target."""
    keys: list[str] = []
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for side, payloads in results.items():
        for payload in payloads:
            for row in payload["rows"]:
                if row["key"] not in keys:
                    keys.append(row["key"])
                rows.setdefault((side, row["key"]), []).append(row)
    lines = [("row", "measure", "before (base)", "after (head)", "A (head runs)", "target")]
    for key in keys:
        head = rows.get(("head", key), [])
        base = rows.get(("base", key), [])
        sample = (head or base)[0]
        fmt = "{:.3f}" if "ratio" in sample["measure"] or "/" in sample["measure"] else "{:.2f}"

        def values(side_rows: list[dict[str, Any]], column: str) -> list[float]:
            return [r[column] for r in side_rows if isinstance(r[column], int | float)]

        lines.append(
            (
                key,
                sample["measure"][:48],
                _spread(values(base, "plugin"), fmt),
                _spread(values(head, "plugin"), fmt),
                _spread(values(head, "baseline_a"), fmt),
                sample["target"],
            )
        )
    if markdown:
        rendered = [f"| {' | '.join(line)} |" for line in lines]
        rendered.insert(1, "|" + "---|" * len(lines[0]))
        return "\n".join(rendered)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare this tree with")
    parser.add_argument("--only", required=True, help="comma-separated workload numbers, e.g. 1,3")
    parser.add_argument("--runs", type=int, default=4, help="bench runs in all, alternating base/head (ABBA)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true")
    size.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "compare.json", help="where the JSON goes")
    parser.add_argument("--md", type=Path, default=None, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2 (one run of each side)")

    with tempfile.TemporaryDirectory(prefix="hfsnapshot-compare-") as scratch:
        base_code = Path(scratch) / "base"
        commit = extract(args.base, base_code)
        results: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
        profile = ["--smoke"] if args.smoke else ["--quick"] if args.quick else []
        for n, side in enumerate(order(args.runs)):
            out = Path(scratch) / f"run-{n}-{side}.json"
            env = {**os.environ}
            env.pop(CODE_ENV, None)
            if side == "base":
                env[CODE_ENV] = str(base_code)
            log(f"compare: run {n + 1} of {args.runs}: {side}")
            subprocess.run(
                [sys.executable, "-m", "bench", *profile, "--only", args.only, "--no-results-md", "--json", str(out)],
                cwd=REPO_ROOT,
                env=env,
                check=True,
            )
            results[side].append(json.loads(out.read_text(encoding="utf-8")))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "pytest_hfsnapshot"], cwd=REPO_ROOT, capture_output=True)
    head_label = head[:12] + (" + uncommitted changes" if dirty.stdout.strip() else "")
    title = f"bench.compare: workloads {args.only}, {args.runs} runs (ABBA); base {commit[:12]}, head {head_label}"
    legend = "figures: the plugin's, median of each side's runs (min..max); A: snapshot_download in the head runs"
    print(f"\n{title}\n{legend}\n")
    print(table(results))
    if args.md is not None:
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        profile_name = "smoke" if args.smoke else "quick" if args.quick else "full"
        args.md.write_text(
            f"`python -m bench.compare --base {args.base} --only {args.only} --runs {args.runs}` "
            f"(profile {profile_name}), finished {started}: base {commit[:12]}, head {head_label}. "
            "Each figure is the plugin's, the median of each side's runs with (min..max); the A column is "
            "plain `snapshot_download` in the head's runs.\n\n" + table(results, markdown=True) + "\n",
            encoding="utf-8",
        )
        print(f"Markdown: {args.md}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {"base": commit, "head": head_label, "order": order(args.runs), "runs": results}
    args.json.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
