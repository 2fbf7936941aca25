"""Pin files in a test session: ``--hf-pins`` read at configure time, ``--hf-update-pins`` written at the end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pytest

from ..core.cache import pins
from ..core.cache.formats import count
from ..errors import InvalidRequestError
from ..settings import spelling
from .options import Options
from .snapshot_uses import SnapshotUse

if TYPE_CHECKING:
    from ..core.implicit.uses import ImplicitUse

_PIN_FILE_KEY = pytest.StashKey["pins.PinFile | None"]()
_LINES_KEY = pytest.StashKey[list[str]]()
#: Snapshots named in a summary line before "and N more".
_SHOWN = 10


def configure(config: pytest.Config, options: Options) -> None:
    """Read and validate the run's pin file (every process); a usage error naming the file and the entry."""
    pin_file = None
    if options.pins is not None:
        try:
            pin_file = pins.read(options.pins, missing_ok=options.update_pins)
        except InvalidRequestError as error:
            raise pytest.UsageError(str(error)) from None
    config.stash[_PIN_FILE_KEY] = pin_file


def pin_file(config: pytest.Config) -> pins.PinFile | None:
    """The run's pin file as read at configure time, if any."""
    return config.stash.get(_PIN_FILE_KEY, None)


def pin_file_now(config: pytest.Config) -> pins.PinFile | None:
    """The run's pin file as it is now (after ``--hf-update-pins`` wrote it), else as read at configure time."""
    known = pin_file(config)
    if known is None:
        return None
    try:
        return pins.read(known.path)
    except InvalidRequestError:
        return known


def finish(
    session: pytest.Session,
    options: Options,
    uses: Sequence[SnapshotUse],
    implicit: Sequence[ImplicitUse] = (),
) -> None:
    """The controller's part at session finish: write ``--hf-update-pins``, keep the summary's lines.

    A file that cannot be written fails an otherwise green run, as the manifest does.
    """
    config = session.config
    pin_file = config.stash.get(_PIN_FILE_KEY, None)
    if pin_file is None:
        return
    if not options.update_pins:
        config.stash[_LINES_KEY] = _not_pinned_lines(pin_file, uses)
        return
    confirmed = [use for use in uses if not use.snapshot.unverified_revision]
    update = pin_file.updated(
        {pins.key(use.request): use.snapshot.commit for use in _sorted(confirmed)},
        recorded(implicit, options),
    )
    try:
        written = pins.write(pin_file.path, update)
    except OSError as error:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"hfsnapshot: could not write the pin file {pin_file.path}: {error}", red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    config.stash[_LINES_KEY] = _update_lines(pin_file, update, uses, written=written)


def recorded(implicit: Sequence[ImplicitUse], options: Options) -> dict[pins.Key, pins.Recorded]:
    """The implicit uses as the pin file records them; a use whose commit no answer named is resolved now
    (a refusal keeps none: the Hub named none)."""
    entries: dict[pins.Key, pins.Recorded] = {}
    for use in implicit:
        commit = use.commit
        if commit is None and use.refusal is None:
            commit = _resolve(use, options)
            if commit is None:
                continue
        entries[use.key] = pins.Recorded(commit, tuple(sorted(use.files)), tuple(sorted(use.missing)), use.refusal)
    return entries


def _resolve(use: ImplicitUse, options: Options) -> str | None:
    from ..core.engine.engine import resolve_revision
    from ..errors import HfSnapshotError
    from ..request import SnapshotRequest

    try:
        request = SnapshotRequest.build(use.repo_id, revision=use.revision, repo_type=use.repo_type)
        return resolve_revision(request, options.settings("implicit-pins"))
    except HfSnapshotError:
        return None


def _update_lines(
    pin_file: pins.PinFile, update: pins.Update, uses: Sequence[SnapshotUse], *, written: bool
) -> list[str]:
    """What an update run says: the counts, each moved pin, the new ones, and those left unconfirmed."""
    state = "written" if written else "left as it was"
    lines = [
        f"hfsnapshot: pin file {pin_file.path} {state}: {len(update.moved)} moved, {len(update.added)} added, "
        f"{update.unchanged} unchanged",
        *(move.line() for move in update.moved),
    ]
    if update.added:
        n = len(update.added)
        lines.append(
            f"hfsnapshot: {count(n, 'snapshot')} {'was' if n == 1 else 'were'} not pinned in {pin_file.path}, "
            f"now pinned: {_listed([pin.label for pin in update.added])}"
        )
    unconfirmed = _labels(use for use in uses if use.snapshot.unverified_revision)
    if unconfirmed:
        lines.append(
            f"hfsnapshot: the Hub could not be reached to confirm {count(len(unconfirmed), 'snapshot')}; "
            f"{'its pin is left as it was' if len(unconfirmed) == 1 else 'their pins are left as they were'}: "
            f"{_listed(unconfirmed)}"
        )
    return lines


def summary_lines(config: pytest.Config) -> list[str]:
    """The pin lines of the ``hf snapshots`` section (after :func:`finish`), else none."""
    return config.stash.get(_LINES_KEY, [])


def _not_pinned_lines(pin_file: pins.PinFile, uses: Iterable[SnapshotUse]) -> list[str]:
    """Said once: the snapshots (distinct repo type, repo and revision) that the file did not pin."""
    labels = _labels(use for use in uses if not use.request.pinned and pin_file.commit_for(use.request) is None)
    if not labels:
        return []
    n = len(labels)
    were = "was" if n == 1 else "were"
    them = "it" if n == 1 else "them"
    return [
        f"hfsnapshot: {count(n, 'snapshot')} {were} not pinned in {pin_file.path} and {were} resolved on the Hub: "
        f"{_listed(labels)}; pin {them} with {spelling('update_pins').flag}"
    ]


def _labels(uses: Iterable[SnapshotUse]) -> list[str]:
    """One label per pin key (``org/name@main``), in pin order."""
    keyed = {pins.key(use.request): use.request.label for use in uses}
    return [keyed[k] for k in sorted(keyed)]


def _listed(labels: Sequence[str]) -> str:
    more = f" and {len(labels) - _SHOWN} more" if len(labels) > _SHOWN else ""
    return ", ".join(labels[:_SHOWN]) + more


def _sorted(uses: Iterable[SnapshotUse]) -> list[SnapshotUse]:
    # Processes of one session share each resolution, so their commits agree; should two ever
    # differ, the last in this order wins, whatever order the workers reported in.
    return sorted(uses, key=lambda use: (pins.key(use.request), use.snapshot.commit))


__all__ = ["configure", "finish", "pin_file", "pin_file_now", "recorded", "summary_lines"]
