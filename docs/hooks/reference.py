"""MkDocs hook: the reference tables, generated from the code at build time.

A page asks for a table with a line ``<!-- generated: NAME -->``; NAME is one of :data:`TABLES`.
The tables come from the one table of knobs (``pytest_hfsnapshot.settings.KNOBS``: what
``pytest --help``, the command line and ``materialize`` take), from the markers pytest reports
(``pytest --markers``), and from the command line's own ``--help``. So the manual cannot list an
option, a default or a command that the code does not have, nor miss one it has.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from pytest_hfsnapshot import cli
from pytest_hfsnapshot.core.cache.locking import MODE_ENV
from pytest_hfsnapshot.plugin.options import OPTIONS
from pytest_hfsnapshot.settings import KNOBS, Knob

_PLACEHOLDER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _flag(option: Knob) -> str:
    if option.flag is None:
        return "(ini only)"
    if option.ini_type == "bool":
        return f"`{option.flag}`"
    value = "{" + ",".join(option.choices) + "}" if option.choices else option.metavar
    return f"`{option.flag}={value}`"


def options_table() -> str:
    """Every option of the plugin: flag and ini key, default, meaning (and its environment variable)."""
    rows = ["| option, ini key | default | meaning |", "|---|---|---|"]
    for option in OPTIONS:
        env = f" Environment: `{option.env}`." if option.env else ""
        rows.append(
            f"| {_flag(option)}<br>`{option.ini}` | {_cell(option.shown_default)} | {_cell(option.full_help)}.{env} |"
        )
    return "\n".join(rows)


#: Variables read outside the option table: the plugin's own, and huggingface_hub's that it honours.
#: (name, default, meaning); names that the code defines are imported, so a rename breaks the build.
_OTHER_ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (
        MODE_ENV,
        "`auto`",
        "the repo lock's mechanism: `kernel` (`flock`), the lease lock, or `auto` (probed per lock folder); "
        "see [Locking](../concepts/locking.md)",
    ),
    ("HF_TOKEN", "unset (or the token `hf auth login` stored)", "the Hub token; never printed"),
    ("HF_ENDPOINT", "`https://huggingface.co`", "the Hub (a mirror, or a local Hub)"),
    ("HF_HUB_DISABLE_XET", "unset", "`1`: download LFS files over plain HTTP instead of hf_xet (huggingface_hub's)"),
)


def environment_table() -> str:
    """Environment variables: those of the option table, then the others."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for option in OPTIONS:
        if option.env:
            what = option.flag or option.ini
            meaning = f"stands in for `{what}` when that is not given: {_cell(option.full_help)}"
            rows.append(f"| `{option.env}` | unset | {meaning} |")
    for name, default, meaning in _OTHER_ENVIRONMENT:
        rows.append(f"| `{name}` | {default} | {meaning} |")
    return "\n".join(rows)


def fronts_table() -> str:
    """Each knob on every front end: the pytest option, the environment, the command line, ``materialize``."""
    rows = [
        "| knob | pytest option, ini key | environment | command line | `materialize` keyword | default |",
        "|---|---|---|---|---|---|",
    ]
    for option in KNOBS:
        pytest_cell = f"`{option.flag}`<br>`{option.ini}`" if option.flag else (f"`{option.ini}`" if option.ini else "")
        cli_cell = "<br>".join(f"`{c} {option.cli_flag()}`" for c in option.cli)
        keyword = f"`{option.name}=`" if option.keyword else ""
        env = f"`{option.env}`" if option.env else ""
        rows.append(
            f"| {option.name} | {pytest_cell} | {env} | {cli_cell} | {keyword} | {_cell(option.shown_default)} |"
        )
    return "\n".join(rows)


def _pytest_output(*args: str) -> str:
    """What a plain ``pytest ARGS`` prints in an empty folder (no conftest of ours in the way)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return done.stdout


def markers_table() -> str:
    """The markers pytest-hfsnapshot registers, as ``pytest --markers`` shows them."""
    rows = ["| marker | what it does |", "|---|---|"]
    for line in _pytest_output("--markers").splitlines():
        match = re.match(r"@pytest\.mark\.((?:hf_|local_hub)[^:]*?): (.*)$", line)
        if match:
            rows.append(f"| `@pytest.mark.{match.group(1)}` | {_cell(match.group(2))} |")
    if len(rows) < 5:
        raise RuntimeError("pytest --markers did not list the plugin's markers: is pytest-hfsnapshot installed?")
    return "\n".join(rows)


def _help_of(args: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main(args)
    return out.getvalue().rstrip()


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps to the terminal's width: the page must not depend on it (nor leave it changed)."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def cli_help() -> str:
    """``pytest-hfsnapshot --help``, then each command's ``--help``."""
    with _columns(100):
        parts = ["```text", f"$ {cli.PROG} --help", _help_of(["--help"]), "```"]
        for name in cli.COMMANDS:
            parts += ["", f"### `{cli.PROG} {name}`", "", "```text", f"$ {cli.PROG} {name} --help"]
            parts += [_help_of([name, "--help"]), "```"]
    return "\n".join(parts)


TABLES: dict[str, Callable[[], str]] = {
    "options": options_table,
    "environment": environment_table,
    "fronts": fronts_table,
    "markers": markers_table,
    "cli": cli_help,
}


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace each ``<!-- generated: NAME -->`` line by its table."""

    def table(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise ValueError(f"unknown generated table {name!r}: use one of {sorted(TABLES)}")
        return TABLES[name]()

    return _PLACEHOLDER.sub(table, markdown)
