"""``python -m bench [--smoke | --quick] [--only NAME,...] [--transport xet|http] [--check] [--markdown PATH]``.

Runs the workloads (:data:`bench.workloads.WORKLOADS`) against the local Hub in a process of its
own, prints the table of the plugin's figures against their targets with A and B beside them, and
writes ``bench/results/latest.json``. ``--smoke`` is CI's run (small sizes, targets not enforced),
``--quick`` middle sizes; the full run is the one the benchmarks page reports. ``--check`` exits 1
when a target is missed. Scratch data goes to a temporary folder (``--workdir``), removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from . import report
from .hubserver import HubProcess
from .runner import PROFILES, TRANSPORTS, Bench, CpuMeter, log
from .workloads import WORKLOADS

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true", help="small sizes, no targets enforced (CI)")
    size.add_argument("--quick", action="store_true", help="middle sizes")
    parser.add_argument("--only", default="", help=f"comma-separated workloads of: {', '.join(WORKLOADS)}")
    parser.add_argument("--skip", default="", help="comma-separated workloads to leave out")
    parser.add_argument("--transport", choices=list(TRANSPORTS), help="per-transport workloads on this one only")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed (not with --smoke)")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "latest.json", help="where the JSON goes")
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    parser.add_argument("--workdir", type=Path, help="scratch parent folder (default: the system's temp)")
    args = parser.parse_args(argv)

    profile = PROFILES["smoke" if args.smoke else "quick" if args.quick else "full"]
    chosen = [w.strip() for w in args.only.split(",") if w.strip()] or list(WORKLOADS)
    skipped = {w.strip() for w in args.skip.split(",") if w.strip()}
    unknown = [w for w in [*chosen, *sorted(skipped)] if w not in WORKLOADS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
    chosen = [w for w in chosen if w not in skipped]

    meter = CpuMeter()
    workdir = Path(tempfile.mkdtemp(prefix="hfsnapshot-bench-", dir=args.workdir))
    log(f"profile {profile.name}, workloads {','.join(chosen)}, scratch {workdir}")
    try:
        with HubProcess() as hub:
            bench = Bench(hub, workdir, profile, args.transport)
            for name in chosen:
                bench.timed(name, WORKLOADS[name])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    seconds = time.monotonic() - meter.started
    machine = {**report.machine(), "other_processes_cpu_share": round(meter.others_share(), 3)}

    print(
        f"\npytest-hfsnapshot bench, profile {profile.name}, {seconds:.0f}s, {machine['cpu']}, {machine['cores']} cores"
    )
    print(f"other processes on this machine used {machine['other_processes_cpu_share']:.0%} of its CPU during the run")
    if profile.name == "smoke":
        print("(smoke sizes: figures are indicative, targets are not enforced)")
    print(report.table(bench.rows))
    for note in bench.notes:
        print("note:", note)
    payload = {
        "argv": sys.argv[1:] if argv is None else argv,
        "profile": asdict(profile),
        "seconds": round(seconds, 1),
        "machine": machine,
        "rows": [r.to_json() for r in bench.rows],
        "figures": bench.figures,
        "notes": bench.notes,
    }
    report.write_json(args.json, payload)
    print(f"\nJSON: {args.json}")
    if args.markdown:
        args.markdown.write_text(report.markdown(bench.rows), encoding="utf-8")
        print(f"Markdown: {args.markdown}")
    missed = [r.workload for r in bench.rows if r.passed is False]
    return 1 if args.check and missed and profile.name != "smoke" else 0


if __name__ == "__main__":
    sys.exit(main())
