"""The command line: ``pytest-hfsnapshot COMMAND [ARGS...]``, or ``python -m pytest_hfsnapshot COMMAND ...``.

Each command is a function in :data:`COMMANDS` taking its arguments and returning the exit code.
"""

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


def prefetch_command(args: Sequence[str]) -> int:
    """``prefetch [pytest arguments]`` or ``prefetch --repo SPEC [--repo SPEC ...] [options]``."""
    if list(args) in (["-h"], ["--help"]):
        _prefetch_parser().print_help()
        return 0
    if not any(arg == "--repo" or arg.startswith("--repo=") for arg in args):
        # A fresh interpreter, not pytest.main here: this process has imported this package and
        # huggingface_hub's dependencies already, which pytest would warn it cannot assert-rewrite.
        return subprocess.call([sys.executable, "-m", "pytest", "--hf-prefetch-only", *args])
    return _prefetch_repos(args)


def _prefetch_parser() -> argparse.ArgumentParser:
    from .core.prefetch import DEFAULT_WORKERS
    from .settings import AUTH_ACTIONS, VERIFY_MODES

    parser = argparse.ArgumentParser(
        prog=f"{PROG} prefetch",
        usage=f"{PROG} prefetch [PYTEST ARGS...]\n       {PROG} prefetch --repo SPEC [--repo SPEC ...] [options]",
        description=(
            "Materialize Hugging Face Hub snapshots ahead of a test run, several repos in parallel. "
            "With pytest arguments (or none): run `pytest --hf-prefetch-only` with them, fetching every "
            "snapshot the selected tests declare and running no test (e.g. `prefetch tests/ -k bert "
            "--hf-manifest=hf-manifest.json`). With --repo: fetch the given snapshots, without pytest. "
            "Exit 0 when all are ready, 1 when any is not."
        ),
    )
    parser.add_argument(
        "--repo",
        action="append",
        required=True,
        metavar="SPEC",
        help='org/name[@revision], datasets/org/name[@revision], or a JSON object such as \'{"repo_id": '
        '"org/name", "allow_patterns": ["*.json"]}\'; repeat for more',
    )
    parser.add_argument("--manifest", metavar="PATH", help="write the JSON manifest of the snapshots to PATH")
    parser.add_argument("--cache-dir", metavar="PATH", help="huggingface_hub cache folder (default: HF_HUB_CACHE)")
    parser.add_argument(
        "--cache-layer",
        action="append",
        metavar="PATH",
        help="a read-only huggingface_hub cache searched before anything is fetched into the cache folder; "
        "what it holds is linked, not fetched; repeat for more, searched in order "
        "(default: the paths in HFSNAPSHOT_CACHE_LAYERS, separated by os.pathsep)",
    )
    parser.add_argument("--offline", action="store_true", help="make no network request; check the cache only")
    parser.add_argument(
        "--verify", choices=VERIFY_MODES, default="size", help="how cached files are re-checked (default size)"
    )
    parser.add_argument(
        "--on-auth-error",
        # Without pytest there is no test to xfail.
        choices=[action for action in AUTH_ACTIONS if action != "xfail"],
        default="skip",
        help="repos the Hub refuses are listed; fail makes them fail the command too (default skip)",
    )
    parser.add_argument(
        "--no-space-check",
        action="store_true",
        help="do not refuse, before transferring, snapshots the cache's free space cannot take "
        "(for filesystems whose free space means nothing)",
    )
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"repos fetched at once (default {DEFAULT_WORKERS})"
    )
    return parser


def _prefetch_repos(args: Sequence[str]) -> int:
    # Imported per command, so `--help` and the pytest path stay quick.
    from huggingface_hub import constants

    from .core import gate, manifest, outage
    from .core.engine import layer_roots, materialize_request, plan_request
    from .core.layers import env_layers, open_layers
    from .core.prefetch import prefetch, report_lines, stream_display
    from .core.space import Need
    from .core.specs import parse_spec
    from .errors import InvalidRequestError
    from .request import SnapshotRequest
    from .settings import DEFAULT_MAX_RATE_WAIT, Settings
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

    # One session for the threads: they share one rate-limit gate and one verdict per outage.
    session = "prefetch-" + uuid.uuid4().hex[:16]
    cache_dir = options.cache_dir or constants.HF_HUB_CACHE

    try:
        settings = Settings(
            cache_dir=options.cache_dir,
            verify=options.verify,
            offline=True if options.offline else None,
            session=session,
            space_check=not options.no_space_check,
            cache_layers=options.cache_layer or env_layers(),
        )
        open_layers(layer_roots(settings), cache_dir=Path(cache_dir), session=session)
    except InvalidRequestError as error:
        parser.error(str(error))

    def fetch(request: SnapshotRequest) -> Snapshot:
        return materialize_request(request, settings)

    def plan(request: SnapshotRequest) -> Need:
        return plan_request(request, settings)

    checked = not (options.offline or options.no_space_check or constants.HF_HUB_OFFLINE)
    display = stream_display(sys.stdout)
    try:
        with gate.for_call(cache_dir, DEFAULT_MAX_RATE_WAIT):  # no session: its windows go at the end
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
    return command.run(args[1:])
