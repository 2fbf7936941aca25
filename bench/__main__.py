"""``python -m bench [--smoke | --quick] [--only 1,3] [--transport xet|http] [--check] [--results-md]``.

Profiles: ``--smoke`` (small sizes, about a minute: the CI run, thresholds not enforced),
``--quick`` (middle sizes, a few minutes), default full sizes (the issue's: a 128 MiB sharded repo,
a 1,000-file repo, a 1 GiB file, a 2,000-test suite). Workloads 1, 5 and 6 run once per transport
(Xet with the shared blob store, and plain HTTP); workload 9 measures the wire cost of each
transport (also Xet without the shared store). Workloads 13 and 14 (:mod:`bench.limits`) meet a
fixed-window rate limit with 1, 4 and 8 processes, and a warm ``pytest -n 4`` run with the Hub
down. Workload 15 is a fleet: 8 processes as 2 hosts (``unshare -u``) over one read-only cache layer
(Hub bytes, wall against a warm local cache), and a lease holder killed on one host (takeover time
against the lease). Workload 16 sets hf_xet's download buffers side by side, and workload 17 a bare
sha256 pass beside ``snapshot_download`` (in a thread, in a process) against the plugin's hashing
on each transport; workload 18 the plugin's hashing following a local writer, with no client and
no Hub. Prints the table, writes ``bench/results/latest.json``; the full run also writes
``bench/RESULTS.md`` (``--results-md`` forces it for other profiles, ``--no-results-md`` skips
it). ``--check`` exits 1 when a target is missed. ``--transport`` runs the per-transport workloads
on one transport only. Scratch data goes to a temporary folder (``--workdir``), removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import report
from .hubserver import HubProcess
from .runner import Bench, CpuMeter, log
from .workloads import PROFILES, WORKLOADS, profile_json

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="small sizes, no thresholds enforced (CI)")
    size.add_argument("--quick", action="store_true", help="middle sizes")
    parser.add_argument("--only", default="", help="comma-separated workload numbers, e.g. 1,3")
    parser.add_argument(
        "--transport", choices=("xet", "http"), default=None, help="per-transport workloads on this one only"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed (not with --smoke)")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "latest.json", help="where the JSON goes")
    parser.add_argument("--results-md", action=argparse.BooleanOptionalAction, default=None, help="write RESULTS.md")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch parent folder (default: system temp)")
    args = parser.parse_args(argv)

    profile = PROFILES["smoke" if args.smoke else "quick" if args.quick else "full"]
    chosen = [w.strip() for w in args.only.split(",") if w.strip()] or list(WORKLOADS)
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    command = "python -m bench" + {"smoke": " --smoke", "quick": " --quick", "full": ""}[profile.name]
    if args.only:
        command += f" --only {args.only}"
    if args.transport:
        command += f" --transport {args.transport}"

    started = time.monotonic()
    meter = CpuMeter()
    workdir = Path(tempfile.mkdtemp(prefix="hfsnapshot-bench-", dir=args.workdir))
    machine = report.machine()
    log(f"profile {profile.name}, workloads {','.join(chosen)}, scratch {workdir}")
    try:
        with HubProcess() as hub:
            bench = Bench(hub, workdir, profile, args.transport)
            for key in chosen:
                bench.timed(f"workload {key}", lambda key=key: WORKLOADS[key](bench))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - started
    machine["other_processes_cpu_share"] = round(meter.others_share(machine["cores"]), 3)

    print()
    cpu = f"{machine['cpu']}, {machine['cores']} cores"
    print(f"pytest-hfsnapshot bench, profile {profile.name}, {seconds:.0f}s, {cpu}")
    print(f"other processes on this machine used {machine['other_processes_cpu_share']:.0%} of its CPU during the run")
    if profile.name == "smoke":
        print("(smoke sizes: figures are indicative, targets are not enforced)")
    print(report.table(bench.rows))
    for note in bench.notes:
        print("note:", note)
    for title, text in bench.sections:
        print(f"\n{title}\n{text}", end="")
    payload = {
        "profile": profile_json(profile),
        "command": command,
        "seconds": round(seconds, 1),
        "machine": machine,
        "rows": [r.to_json() for r in bench.rows],
        "figures": bench.figures,
        "notes": bench.notes,
        "sections": dict(bench.sections),
    }
    report.write_json(args.json, payload)
    print(f"\nJSON: {args.json}")
    write_md = args.results_md if args.results_md is not None else (profile.name == "full" and not args.only)
    if write_md:
        md = HERE / "RESULTS.md"
        md.write_text(
            report.markdown(bench.rows, machine, command, seconds, bench.notes, bench.figures, bench.sections),
            encoding="utf-8",
        )
        print(f"Markdown: {md}")
    missed = [r.key for r in bench.rows if r.passed is False]
    return 1 if args.check and missed and profile.name != "smoke" else 0


if __name__ == "__main__":
    sys.exit(main())
