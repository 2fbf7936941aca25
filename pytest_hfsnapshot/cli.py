"""The command line, ``pytest-hfsnapshot COMMAND``: each command of :data:`COMMANDS` returns its exit code."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .settings import AuthAction

PROG = "pytest-hfsnapshot"


def add_knob_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of ``command`` for the knobs that reach it (:data:`pytest_hfsnapshot.settings.KNOBS`)."""
    from .settings import KNOBS, Choice, Count, Folders, Knob, Seconds, Switch

    def typed(option: Knob) -> Callable[[str], object]:
        def parse(text: str) -> object:
            try:
                return option.kind.parse(text, Path.cwd())
            except ValueError:
                raise argparse.ArgumentTypeError(f"invalid value {text!r}; use {option.kind.use}") from None

        return parse

    for option in KNOBS:
        if command not in option.cli:
            continue
        kwargs: dict[str, object] = {"dest": option.name, "help": option.cli_help or option.full_help}
        kind = option.kind
        if isinstance(kind, Switch):
            kwargs.update(action="store_false" if kind.inverted else "store_true", default=kind.inverted)
        elif isinstance(kind, Choice):
            kwargs.update(choices=option.cli_choices or kind.values, default=option.unset)
        elif isinstance(kind, Folders):
            kwargs.update(action="append", metavar=kind.metavar)
        elif isinstance(kind, Count | Seconds):
            kwargs.update(type=typed(option), default=option.unset, metavar=kind.metavar)
        else:
            kwargs.update(metavar=kind.metavar)
        parser.add_argument(option.cli_flag(), **kwargs)  # type: ignore[arg-type]


def prefetch_command(args: Sequence[str]) -> int:
    """``prefetch [pytest arguments]`` or ``prefetch --repo SPEC [--repo SPEC ...] [options]``."""
    if list(args) in (["-h"], ["--help"]):
        _prefetch_parser().print_help()
        return 0
    if not any(arg in ("--repo", "--pins") or arg.startswith(("--repo=", "--pins=")) for arg in args):
        # A fresh interpreter, not pytest.main here: this process has imported this package and
        # huggingface_hub's dependencies already, which pytest would warn it cannot assert-rewrite.
        from .settings import spelling

        return subprocess.call([sys.executable, "-m", "pytest", str(spelling("prefetch_only").flag), *args])
    return _prefetch_repos(args)


def _prefetch_parser() -> argparse.ArgumentParser:
    from .core.engine.prefetch import DEFAULT_WORKERS
    from .settings import pytest_command, spelling

    parser = argparse.ArgumentParser(
        prog=f"{PROG} prefetch",
        usage=f"{PROG} prefetch [PYTEST ARGS...]\n       {PROG} prefetch [--repo SPEC ...] [--pins PATH] [options]",
        description=(
            "Materialize Hugging Face Hub snapshots ahead of a test run, several repos in parallel. "
            f"With pytest arguments (or none): run `{pytest_command('prefetch_only')}` with them, fetching every "
            "snapshot the selected tests declare and running no test (e.g. `prefetch tests/ -k bert "
            f"{spelling('manifest').flag}=hf-manifest.json`). With --repo: fetch the given snapshots, without "
            "pytest. With --pins: also fetch the implicit uses the pin file records (its entries with files: "
            "exactly those paths at the pinned commits, with the markers of their missing paths), without pytest. "
            "Exit 0 when all are ready, 1 when any is not."
        ),
    )
    parser.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="SPEC",
        help='org/name[@revision], datasets/org/name[@revision], or a JSON object such as \'{"repo_id": '
        '"org/name", "allow_patterns": ["*.json"]}\'; repeat for more',
    )
    add_knob_flags(parser, "prefetch")
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"repos fetched at once (default {DEFAULT_WORKERS})"
    )
    return parser


def _prefetch_repos(args: Sequence[str]) -> int:
    # Imported per command, so `--help` and the pytest path stay quick.
    from huggingface_hub import constants

    from .core.cache import pins
    from .core.cache.layers import env_layers, open_layers
    from .core.engine import manifest
    from .core.engine.engine import layer_roots, materialize_request, plan_request
    from .core.engine.prefetch import prefetch, report_lines, stream_display
    from .core.engine.space import Need
    from .core.engine.specs import parse_spec
    from .core.hub import gate, outage
    from .core.implicit import pinned_files
    from .errors import InvalidRequestError
    from .request import SnapshotRequest
    from .settings import Settings
    from .snapshot import Snapshot

    parser = _prefetch_parser()
    options = parser.parse_args(args)
    if options.workers < 1:
        parser.error(f"--workers must be at least 1, got {options.workers}")
    requests = []
    for spec in options.repo:
        try:
            requests.append(parse_spec(spec))
        except InvalidRequestError as error:
            parser.error(f"--repo {spec!r}: {error}")
    pin_file = None
    if options.pins:
        try:
            pin_file = pins.read(os.path.abspath(options.pins))
        except InvalidRequestError as error:
            parser.error(f"--pins: {error}")
        requests.extend(request for request in pinned_files.requests(pin_file) if request not in requests)
    if not requests:
        parser.error("nothing to prefetch: give --repo SPEC, or --pins PATH with entries that record files")

    # One session for the threads: they share one rate-limit gate and one verdict per outage.
    session = "prefetch-" + uuid.uuid4().hex[:16]
    cache_dir = options.cache_dir or constants.HF_HUB_CACHE

    try:
        settings = Settings(
            cache_dir=options.cache_dir,
            verify=options.verify,
            offline=True if options.offline else None,
            session=session,
            space_check=options.space_check,
            max_rate_wait=options.max_rate_wait,
            cache_layers=options.cache_layers or env_layers(),
            pins=pin_file.path if pin_file is not None else None,
        )
        open_layers(layer_roots(settings), cache_dir=Path(cache_dir), session=session)
    except InvalidRequestError as error:
        parser.error(str(error))

    def fetch_one(request: SnapshotRequest, *, warn_unmatched: bool = True) -> Snapshot:
        return materialize_request(request, settings, warn_unmatched=warn_unmatched)

    fetch = fetch_one if pin_file is None else pinned_files.fetcher(pin_file, fetch_one, lambda: cache_dir)

    def plan(request: SnapshotRequest) -> Need:
        return plan_request(request, settings)

    checked = options.space_check and not (options.offline or constants.HF_HUB_OFFLINE)
    display = stream_display(sys.stdout)
    try:
        with gate.for_call(cache_dir, settings.max_rate_wait):  # no session: its windows go at the end
            result = prefetch(requests, fetch, display, workers=options.workers, plan=plan if checked else None)
    finally:
        outage.remove(cache_dir, session)
    on_auth_error: AuthAction = options.on_auth_error
    for line in report_lines(result, on_auth_error=on_auth_error):
        display.line(line)
    if options.manifest:
        path = os.path.abspath(options.manifest)
        try:
            manifest.write(path, [(o.request, o.snapshot) for o in result.ready if o.snapshot is not None])
        except OSError as error:
            print(f"{PROG}: could not write the manifest {path}: {error}", file=sys.stderr)
            return 1
    return 0 if result.ok(on_auth_error) else 1


def pins_command(args: Sequence[str]) -> int:
    """``pins check PATH`` / ``pins update PATH``: has any pinned branch or tag moved on the Hub?"""
    from .settings import spelling

    parser = argparse.ArgumentParser(
        prog=f"{PROG} pins",
        description=(
            f"Ask the Hub what each branch and tag of a pin file ({spelling('pins').flag}) points at now, and "
            "print one line per moved pin, `org/name@main: <old commit> -> <new commit>`, on stdout. check: exit "
            "1 when any moved, 0 when none. update: rewrite the moved entries (atomically), exit 0. Both exit 2 for a "
            "malformed pin file or when the Hub cannot answer for a pin. Needs no pytest."
        ),
    )
    parser.add_argument("action", choices=("check", "update"), help="check: report only; update: rewrite the file")
    parser.add_argument("path", metavar="PATH", help="the pin file (a manifest is one too)")
    add_knob_flags(parser, "pins")
    options = parser.parse_args(args)
    return _pins(options.action, os.path.abspath(options.path), options.retries, options.max_rate_wait)


def _pins(action: str, path: str, retries: int, max_rate_wait: float) -> int:
    from huggingface_hub import constants

    from .core.cache import pins
    from .core.cache.formats import count
    from .core.engine.engine import resolve_revision
    from .core.hub import gate, outage
    from .errors import HfSnapshotError, InvalidRequestError
    from .settings import Settings

    name = f"{PROG} pins {action}"
    try:
        pin_file = pins.read(path)
    except InvalidRequestError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    if constants.HF_HUB_OFFLINE:
        print(f"{name}: HF_HUB_OFFLINE is set, and the pins can only be checked on the Hub", file=sys.stderr)
        return 2
    # One session for the command: one verdict per outage, so a Hub that is down is waited for once.
    session = "pins-" + uuid.uuid4().hex[:16]
    cache_dir = constants.HF_HUB_CACHE
    settings = Settings(retries=retries, max_rate_wait=max_rate_wait, session=session)
    branches = pin_file.branches()
    commits: dict[pins.Key, str] = {}
    failed: list[str] = []
    try:
        with gate.for_call(cache_dir, settings.max_rate_wait):
            for pin in branches:
                try:
                    commits[pin.key] = resolve_revision(pin.request(), settings)
                except HfSnapshotError as error:
                    failed.append(f"could not ask the Hub what {pin.label} points at: {error}")
    finally:
        outage.remove(cache_dir, session)
    update = pin_file.updated(commits)
    for move in update.moved:
        print(move.line(), flush=True)
    for text in failed:
        print(f"{name}: {text}", file=sys.stderr)
    if failed:
        left = f"; {path} is left as it was" if action == "update" else ""
        print(f"{name}: {len(failed)} of {count(len(branches), 'pin')} could not be checked{left}", file=sys.stderr)
        return 2
    moved = len(update.moved)
    if not moved:
        print(f"{name}: no pin moved in {path} ({len(branches)} checked)", file=sys.stderr)
        return 0
    if action == "check":
        print(
            f"{name}: {moved} of {count(len(branches), 'pin')} moved in {path}; `{PROG} pins update {path}` pins what "
            "they point at now",
            file=sys.stderr,
        )
        return 1
    try:
        pins.write(path, update)
    except OSError as error:
        print(f"{name}: could not write {path}: {error}", file=sys.stderr)
        return 2
    print(f"{name}: {moved} of {count(len(branches), 'pin')} moved; {path} rewritten", file=sys.stderr)
    return 0


def serve_command(args: Sequence[str]) -> int:
    """``serve DIR [--port N] [--no-xet]``: a folder of repos as a local Hub, until interrupted."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} serve",
        description=(
            "Serve DIR as a local Hugging Face Hub on 127.0.0.1 until interrupted, for a whole test session "
            "(xdist workers included): run the printed export lines in another shell, then pytest there. "
            "Each DIR/<org>/<name>/ is a model repo whose tree is that folder's files (one commit on main); "
            "DIR/datasets/<org>/<name>/ and DIR/spaces/<org>/<name>/ are datasets and spaces. An empty file "
            ".gated or .private in a repo folder makes that repo gated or private (the marker is not served)."
        ),
    )
    parser.add_argument("dir", metavar="DIR", help="the folder of repos")
    parser.add_argument("--port", type=int, default=0, help="the Hub's port on 127.0.0.1 (default: any free port)")
    parser.add_argument(
        "--no-xet",
        action="store_true",
        help="serve LFS files by plain HTTP only (default: Xet storage, as huggingface.co, when hf_xet is installed)",
    )
    options = parser.parse_args(args)
    if not 0 <= options.port <= 65535:
        parser.error(f"--port must be between 0 and 65535, got {options.port}")
    # The testing kit, only for this command: the rest of the CLI never loads it.
    from .testing.serve import ServeError, serve

    try:
        serve(options.dir, port=options.port, xet=False if options.no_xet else None)
    except ServeError as error:
        parser.error(str(error))
    except OSError as error:
        where = f"127.0.0.1:{options.port}" if options.port else "127.0.0.1"
        print(
            f"{PROG} serve: cannot serve on {where}: {error.strerror or error}; choose another --port", file=sys.stderr
        )
        return 1
    return 0


# --- doctor: a whole cache checked, repaired and pruned (CONTRACT section 10) ----------------------


def _doctor_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} doctor",
        description=(
            "Check every snapshot of a huggingface_hub cache with no network request: each file present, its link "
            "resolving inside the cache (or into a layer of HFSNAPSHOT_CACHE_LAYERS), its size as listed (the "
            "plugin's record, else huggingface_hub's tree cache), and with --sha256 its content hash; also "
            "unfinished downloads, lock markers and leases whose holder is gone, blobs no snapshot uses, and "
            "snapshots without a listing (unverifiable: counted apart). One line per problem, then a summary. "
            "Exit 0 when healthy, 1 when a problem was found (with --repair: when one is left), 2 for a usage error."
        ),
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cache-dir", metavar="PATH", help="the cache to check (default: HF_HUB_CACHE)")
    where.add_argument(
        "--layer",
        metavar="PATH",
        help="check a read-only cache layer instead (read by records and blob names, links or not); writes nothing",
    )
    parser.add_argument(
        "--sha256",
        action="store_true",
        help="also hash every file (sha256 for LFS and Xet files, git-sha1 for the others), each byte read once, "
        "on every core",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="fetch the damaged and missing files again (online, under each repo's lock, through the same engine "
        "as materialize), and remove unfinished downloads, lock markers whose holder is gone and blobs no "
        "snapshot uses; never what a live process may be writing",
    )
    parser.add_argument(
        "--prune-unused",
        metavar="DAYS",
        type=float,
        help="remove the snapshots no test has used for DAYS days (the plugin records each use; a snapshot with "
        "no recorded use is kept), then the blobs nothing uses",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --prune-unused: list what would be removed and the bytes freed"
    )
    parser.add_argument("--json", action="store_true", help="write the report as one JSON document on stdout")
    return parser


def doctor_command(args: Sequence[str]) -> int:
    """``doctor [--cache-dir PATH | --layer PATH] [--sha256] [--repair] [--prune-unused DAYS] [--dry-run] [--json]``."""
    import json

    from huggingface_hub import constants

    from .core.cache.formats import count
    from .core.cache.layers import env_layers
    from .core.doctor import fix as doctor_fix
    from .core.doctor import scan as doctor
    from .errors import InvalidRequestError
    from .settings import DEFAULT_LOCK_TIMEOUT

    parser = _doctor_parser()
    options = parser.parse_args(args)
    if options.layer and (options.repair or options.prune_unused is not None):
        parser.error(
            "--layer checks a read-only layer and writes nothing: --repair and --prune-unused need --cache-dir"
        )
    if options.prune_unused is not None and not options.prune_unused >= 0:
        parser.error(f"--prune-unused takes a number of days, at least 0; got {options.prune_unused:g}")
    if options.dry_run and options.prune_unused is None:
        parser.error("--dry-run goes with --prune-unused DAYS (what the prune would remove)")
    try:
        root = doctor.open_cache(
            options.layer or options.cache_dir or constants.HF_HUB_CACHE, layer=bool(options.layer)
        )
        now = doctor.now_from_env()
    except InvalidRequestError as error:
        parser.error(str(error))
    layers = [] if options.layer else [Path(os.path.realpath(path)) for path in env_layers()]
    try:
        report = doctor.scan(
            root,
            layer=bool(options.layer),
            sha256=options.sha256,
            layers=layers,
            now=now,
            progress=doctor.Progress(sys.stderr),
        )
    except OSError as error:
        print(f"{PROG} doctor: {root} failed while it was read ({error.strerror}); check the mount", file=sys.stderr)
        return 2
    actions: list[doctor_fix.Action] = []
    stale: list[doctor_fix.Stale] = []
    if options.repair:
        actions += doctor_fix.repair(report, layers=layers, lock_timeout=DEFAULT_LOCK_TIMEOUT, now=now)
    if options.prune_unused is not None:
        base = doctor.scan(root, layers=layers, now=now) if options.repair else report
        stale = doctor_fix.stale_snapshots(base, days=options.prune_unused, now=now)
        actions += doctor_fix.prune(
            base, stale, days=options.prune_unused, now=now, dry_run=options.dry_run, lock_timeout=DEFAULT_LOCK_TIMEOUT
        )
    after = None
    if options.repair or (options.prune_unused is not None and not options.dry_run):
        after = doctor.scan(root, layers=layers, now=now)
        whole = {a.snapshot for a in actions if a.what == "repaired"}
        for finding in report.findings:
            folder = doctor.repo_folder(finding)
            kept = folder in after.repos and finding.revision in after.repos[folder].snapshots
            if finding.kind == "wrong-hash" and kept and (folder, finding.revision) not in whole:
                after.findings.append(finding)  # a rescan by size cannot see it: still there unless repaired
        doctor.sort_findings(after.findings)
    left = after if after is not None else report
    if options.json:
        document: dict[str, object] = {
            "problems": [f.to_json() for f in report.findings],
            "summary": report.summary(),
        }
        if actions:
            document["actions"] = [a.to_json() for a in actions]
        if options.prune_unused is not None:
            document["prune"] = {
                "days": options.prune_unused,
                "dry_run": options.dry_run,
                "snapshots": [s.to_json() for s in stale],
                "bytes": doctor_fix.freed(actions),
            }
        if after is not None:
            document["after"] = {"problems": [f.to_json() for f in after.findings], "summary": after.summary()}
        print(json.dumps(document, indent=2))
    else:
        for line in [f.line() for f in report.findings] + report.summary_lines() + [a.line() for a in actions]:
            print(line)
        if options.prune_unused is not None:
            verb = "would free" if options.dry_run else "freed"
            days = count(float(options.prune_unused), "day")
            unused = f"{count(len(stale), 'snapshot')} unused for {days}"
            print(f"prune: {unused}; {verb} {doctor_fix.size_text(actions)}")
        if after is not None:
            print("after: " + after.summary_lines()[1])
    return 1 if left.problems else 0


class Command(NamedTuple):
    run: Callable[[Sequence[str]], int]
    usage: str


#: Subcommands by name; the usage lines are listed by ``--help``.
COMMANDS: dict[str, Command] = {
    "prefetch": Command(
        prefetch_command,
        "prefetch [PYTEST ARGS...]        fetch every snapshot the selected tests declare, run no test\n"
        "prefetch --repo ORG/NAME[@REV]   fetch the given snapshots, without pytest ('prefetch --help')",
    ),
    "pins": Command(
        pins_command,
        "pins check PATH                  exit 1 when a branch or tag of the pin file moved on the Hub\n"
        "pins update PATH                 rewrite the moved pins of the file ('pins --help')",
    ),
    "doctor": Command(
        doctor_command,
        "doctor [--cache-dir PATH]        check every snapshot of a cache offline; --repair, --prune-unused DAYS\n"
        "doctor --layer PATH              check a read-only cache layer, writing nothing ('doctor --help')",
    ),
    "serve": Command(
        serve_command,
        "serve DIR [--port N] [--no-xet]  serve a folder of repos as a local Hub for a whole session ('serve --help')",
    ),
}


def usage() -> str:
    """The top-level help text."""
    lines = [
        f"usage: {PROG} COMMAND [ARGS...]",
        "       python -m pytest_hfsnapshot COMMAND [ARGS...]",
        "",
        "commands:",
    ]
    for command in COMMANDS.values():
        lines.extend("  " + line for line in command.usage.splitlines())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``COMMAND ARGS...`` (default: ``sys.argv[1:]``) and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"{usage()}\n\n{PROG}: error: unknown command {args[0]!r}", file=sys.stderr)
        return 2
    from .settings import serve_front

    previous = serve_front(f"cli:{args[0]}")
    try:
        return command.run(args[1:])
    finally:
        serve_front(previous)
