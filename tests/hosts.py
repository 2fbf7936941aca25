"""Other hosts on one machine: command prefixes that run a program under another hostname
(``unshare -u``) and with read-only bind mounts (``unshare -m``), both root features.

A program started behind :func:`namespace_prefix` keeps this machine's processes, files and
loopback network (so it reaches the local Hub and shares cache folders), but
``socket.gethostname()`` answers the name given, as on another CI runner; its bind mounts are
private to it (``unshare`` makes the new mount namespace's propagation private) and vanish with it.
Its pid is the pid of the ``unshare`` process (``unshare`` and ``sh`` exec into it), so the caller
can signal it by the pid it started.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import pytest


def namespace_prefix(
    *, hostname: str | None = None, read_only: Mapping[str | os.PathLike[str], str | os.PathLike[str]] | None = None
) -> list[str]:
    """A command prefix: the program runs under ``hostname``, and sees each ``read_only`` source
    folder bind-mounted read-only at its target (an existing folder)."""
    flags: list[str] = []
    steps: list[str] = []
    if hostname is not None:
        flags.append("-u")
        steps.append(f"hostname {shlex.quote(hostname)}")
    for source, target in (read_only or {}).items():
        steps.append(f"mount --bind -o ro {shlex.quote(os.fspath(source))} {shlex.quote(os.fspath(target))}")
    if read_only:
        flags.append("-m")
    if not flags:
        return []
    # "$0" "$@": the program and its arguments follow the script, unquoted by nobody.
    return ["unshare", *flags, "sh", "-c", " && ".join([*steps, 'exec "$0" "$@"'])]


def namespace_problem(prefix: Sequence[str], probe: Sequence[str]) -> str | None:
    """Why ``prefix`` cannot run ``probe`` here (None: it ran and exited 0)."""
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    try:
        done = subprocess.run([*prefix, *probe], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare is not usable here: {error}"
    if done.returncode != 0:
        return f"{shlex.join(prefix[:2])} is not permitted here (needs root): {(done.stderr or done.stdout).strip()}"
    return None


def host_prefix(hostname: str) -> list[str]:
    """The prefix that runs a program under ``hostname``; skips the calling test where that needs
    a right this process lacks."""
    prefix = namespace_prefix(hostname=hostname)
    problem = namespace_problem(prefix, ["sh", "-c", f'test "$(hostname)" = {shlex.quote(hostname)}'])
    if problem is not None:
        pytest.skip(problem)
    return prefix
