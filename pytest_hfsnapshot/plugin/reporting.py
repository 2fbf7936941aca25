"""What a run shows and writes: the report header, the ``hf snapshots`` summary, the manifest, and redaction."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from ..core.cache.formats import FailureRow, count, failure_groups, human_size, request_label
from ..core.engine import manifest
from ..core.hub.credentials import hub_token, token_set
from ..core.hub.gate import Waited
from ..settings import spelling
from .options import Options
from .snapshot_uses import SnapshotUse, primary_uses

#: pytest's order and words for outcomes, as in its closing line ("2 failed, 1 skipped, 3 errors").
_OUTCOMES = ("failed", "skipped", "xfailed", "error")


def header(options: Options) -> str:
    """The report header's line: cache, endpoint, offline, token set or not (never the token), the layers."""
    layers = f" layers={os.pathsep.join(map(str, options.cache_layers))}" if options.cache_layers else ""
    return (
        f"hfsnapshot: cache={options.effective_cache_dir()} endpoint={hf_constants.ENDPOINT} "
        f"offline={options.effective_offline()} token={'set' if token_set() else 'unset'}{layers}"
    )


def write_summary(
    terminalreporter: pytest.TerminalReporter,
    uses: Sequence[SnapshotUse],
    auth_counts: Mapping[str, int],
    *,
    verbose: bool,
    factory_tests: int = 0,
    failed: Collection[FailureRow] = (),
    rate_limited: Waited | None = None,
    unreachable: Sequence[str] = (),
    pins: Sequence[str] = (),
) -> None:
    """The ``hf snapshots`` section, when the session used a snapshot, met a refused access, a
    failure or a rate limit, has tests using the factory that a prefetch cannot see
    (``factory_tests``: their number, given only when the ini option ``hf_prefetch`` is empty), or
    has lines about its pin file (``pins``, :mod:`pytest_hfsnapshot.plugin.pinning`)."""
    limited = rate_limited if rate_limited is not None and rate_limited.windows else None
    if not uses and not auth_counts and not failed and not factory_tests and limited is None and not pins:
        return
    terminalreporter.write_sep("=", "hf snapshots")
    for line in summary_lines(uses, verbose=verbose):
        terminalreporter.write_line(line)
    if auth_counts:
        total = sum(auth_counts.values())
        parts = ", ".join(
            count(auth_counts[word], word) if word == "error" else f"{auth_counts[word]} {word}"
            for word in _OUTCOMES
            if auth_counts.get(word)
        )
        terminalreporter.write_line(f"Hub access refused: {count(total, 'test')} ({parts})")
    if failed:
        # One line per cause: a full disk reads once, however many snapshots it stopped.
        terminalreporter.write_line(f"Not ready: {count(len(failed), 'snapshot')}")
        for labels, text in failure_groups(sorted(failed, key=lambda row: row[:3])):
            terminalreporter.write_line(f"  {labels}  {text}")
    if limited is not None:
        terminalreporter.write_line(rate_limit_line(limited))
    unverified = sum(1 for use in primary_uses(uses) if use.snapshot.unverified_revision)
    if unverified:
        where = ", ".join(unreachable or [hf_constants.ENDPOINT])
        terminalreporter.write_line(
            f"the Hub at {where} was unreachable: {count(unverified, 'snapshot')} served from the cache "
            "without confirming their revision"
        )
    if factory_tests:
        terminalreporter.write_line(factory_note(factory_tests))
    for line in pins:
        terminalreporter.write_line(line)


def factory_note(tests: int) -> str:
    """Said once when tests use the factory and ``hf_prefetch`` is empty: a prefetch cannot see them."""
    listed, only = spelling("prefetch").ini, spelling("prefetch_only").flag
    return (
        f"hfsnapshot: {count(tests, 'test')} {'uses' if tests == 1 else 'use'} the hf_snapshots factory and the ini "
        f"option {listed} is empty: a prefetch ({only}) cannot see factory calls, so an offline "
        f"run will miss their snapshots; list them in {listed}"
    )


def rate_limit_line(limited: Waited) -> str:
    """How long the session waited for the Hub's rate-limit windows to reset (merged across processes)."""
    return (
        f"Hub rate limit: waited {limited.seconds:.1f}s for {count(limited.windows, 'window')} to reset "
        f"({', '.join(limited.endpoints)})"
    )


def summary_lines(uses: Sequence[SnapshotUse], *, verbose: bool = False) -> list[str]:
    """The rows of the ``hf snapshots`` section: one per snapshot, merged across processes."""
    rows: list[list[str]] = []
    notes: list[list[str]] = []
    for primary in primary_uses(uses):
        snap = primary.snapshot
        others = [u for u in uses if u.request == primary.request and u is not primary]
        extra: list[str] = []
        if primary.worker is not None and snap.source != "cache":
            extra.append(f"{snap.source} by {primary.worker}")
        if others:
            waited = sum(u.snapshot.lock_wait for u in others)
            extra.append(f"{count(len(others), 'other')} waited {waited:.2f}s")
        if snap.unverified_revision:
            extra.append("UNVERIFIED REVISION")
        if snap.repaired:
            extra.append(f"repaired {count(len(snap.repaired), 'file')}")
        if snap.layers:
            extra.append(f"from {'layer' if len(snap.layers) == 1 else 'layers'} {', '.join(snap.layers)}")
        rows.append(
            [
                request_label(primary.request),
                snap.commit[:12],
                count(len(snap.files), "file"),
                human_size(snap.size),
                snap.source,
                f"{snap.seconds:.2f}s",
                f"lock wait {snap.lock_wait:.2f}s",
                "; ".join(extra),
            ]
        )
        notes.append([f"    repaired: {name}" for name in snap.repaired] if verbose else [])
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(8)]
    lines: list[str] = []
    for row, row_notes in zip(rows, notes, strict=True):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        lines.extend(row_notes)
    return lines


def write_manifest(session: pytest.Session, path: Path, uses: Sequence[SnapshotUse]) -> None:
    """Write ``--hf-manifest``; a file that cannot be written fails an otherwise green run."""
    try:
        manifest.write(path, ((use.request, use.snapshot) for use in primary_uses(uses)))
    except OSError as error:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"hfsnapshot: could not write the manifest {path}: {error}", red=True)
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def redact_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Replace the token by ``***`` in a report's text.

    A safety net behind our own messages, which never hold the token: tracebacks of libraries
    (with --showlocals) and captured output might.
    """
    # Most reports carry no text at all: nothing to do, not even the token lookup.
    if report.longrepr is None and not report.sections and not getattr(report, "wasxfail", None):
        return
    token = hub_token()
    if not token or len(token) < 8:
        return
    if report.longrepr is not None and token in str(report.longrepr):
        report.longrepr = str(report.longrepr).replace(token, "***")
    report.sections = [(title, text.replace(token, "***")) for title, text in report.sections]
    wasxfail = getattr(report, "wasxfail", None)
    if isinstance(wasxfail, str) and token in wasxfail:
        report.wasxfail = wasxfail.replace(token, "***")  # type: ignore[union-attr]


__all__ = ["header", "rate_limit_line", "redact_report", "summary_lines", "write_manifest", "write_summary"]
