"""The ``hf snapshots`` terminal summary and the snapshot uses behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_hfsnapshot.core.cache.formats import human_size
from pytest_hfsnapshot.plugin.reporting import summary_lines
from pytest_hfsnapshot.plugin.snapshot_uses import SnapshotUse, primary_uses
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.snapshot import Snapshot
from pytest_hfsnapshot.testing import half_written
from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {"config.json": "{}", "model.safetensors": b"\x03" * 3000}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def use(
    worker: str | None,
    source: str = "cache",
    lock_wait: float = 0.0,
    request: SnapshotRequest | None = None,
    **snapshot: object,
) -> SnapshotUse:
    request = request or SnapshotRequest.build("org/tiny")
    fields: dict[str, object] = {
        "path": Path("/cache/snap"),
        "repo_id": request.repo_id,
        "repo_type": request.repo_type,
        "revision": request.revision,
        "commit": COMMIT,
        "files": ("config.json", "model.safetensors"),
        "size": 3002,
        "source": source,
        "seconds": 1.25,
        "lock_wait": lock_wait,
    }
    fields.update(snapshot)
    return SnapshotUse(request, Snapshot(**fields), elapsed=1.3, worker=worker)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("size", "shown"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 1024**2, "5.0 MiB"), (3 * 1024**3, "3.0 GiB")],
)
def test_human_size(size: int, shown: str) -> None:
    assert human_size(size) == shown


def test_snapshot_use_round_trip() -> None:
    original = use(
        "gw1",
        source="repair",
        request=SnapshotRequest.build("org/tiny", allow_patterns=["*.json", "*.safetensors"], metadata_only=True),
        repaired=("model.safetensors",),
        unverified_revision=True,
    )
    copy = SnapshotUse.from_dict(original.to_dict())
    assert copy == original
    assert copy.snapshot.repaired == ("model.safetensors",)
    assert copy.snapshot.lock_wait == original.snapshot.lock_wait


def test_one_row_per_request_naming_the_downloader() -> None:
    uses = [
        use("gw0", lock_wait=2.0),
        use("gw1", source="download", lock_wait=0.0),
        use("gw2", lock_wait=1.5),
    ]
    assert primary_uses(uses) == [uses[1]]
    (line,) = summary_lines(uses)
    assert line == (
        "org/tiny@main  0123456789ab  2 files  2.9 KiB  download  1.25s  lock wait 0.00s  "
        "download by gw1; 2 others waited 3.50s"
    )


def test_rows_are_sorted_and_aligned() -> None:
    data = SnapshotRequest.build("org/data", repo_type="dataset", ignore_patterns="*.parquet")
    lines = summary_lines([use(None), use(None, request=data, files=("README.md",), size=10)])
    assert lines == [
        "datasets/org/data@main [ignore *.parquet]  0123456789ab  1 file   10 B     cache  1.25s  lock wait 0.00s",
        "org/tiny@main                              0123456789ab  2 files  2.9 KiB  cache  1.25s  lock wait 0.00s",
    ]


def test_unverified_and_repaired_are_flagged() -> None:
    snap = use(None, source="repair", unverified_revision=True, repaired=("model.safetensors",))
    (line,) = summary_lines([snap])
    assert line.endswith("repair  1.25s  lock wait 0.00s  UNVERIFIED REVISION; repaired 1 file")
    assert summary_lines([snap], verbose=True)[1:] == ["    repaired: model.safetensors"]


def test_no_section_when_no_snapshot_is_used(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest()
    result.stdout.no_fnmatch_line("*hf snapshots*")


def test_summary_in_a_real_run(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    commit = local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        """
    )
    pytester.makepyfile("def test_tiny(tiny): pass")
    args = (f"--hf-cache-dir={local_hub.cache_dir}",)
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(
        ["*= hf snapshots =*", f"org/tiny@main  {commit[:12]}  2 files  2.9 KiB  download  *s  lock wait *s"]
    )
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(["org/tiny@main  *  cache  *"])


def test_repairs_are_listed_with_verbose(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        """
    )
    pytester.makepyfile("def test_tiny(tiny): assert (tiny / 'model.safetensors').stat().st_size == 3000")
    args = (f"--hf-cache-dir={local_hub.cache_dir}",)
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert local_hub.cache_dir is not None
    half_written.truncated_blob(local_hub.cache_dir, "org/tiny", "model.safetensors")
    result = pytester.runpytest(*args, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["org/tiny@main  *  repair  *repaired 1 file", "    repaired: model.safetensors"])


def test_unverified_revision_is_flagged_and_strict_fails(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        """
    )
    pytester.makepyfile("def test_tiny(tiny): pass")
    args = (f"--hf-cache-dir={local_hub.cache_dir}", "--hf-retries=0")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    local_hub.fail("*/revision/*", 503, times=10)
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["org/tiny@main  *  cache  *UNVERIFIED REVISION"])
    result = pytester.runpytest(*args, "--hf-strict")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["org/tiny@main: UnverifiedRevisionError: *--hf-strict*"])


def test_implicit_rows_say_each_count_in_its_number(tmp_path: Path) -> None:
    from pytest_hfsnapshot.core.cache import pins
    from pytest_hfsnapshot.core.implicit.uses import ImplicitUse
    from pytest_hfsnapshot.plugin import implicit

    one = ImplicitUse("model", "org/one", "main", COMMIT, {"config.json": 2}, tests=["t.py::a"])
    two = ImplicitUse("model", "org/two", "main", COMMIT, {"a": 1, "b": 1}, tests=["t.py::a", "t.py::b"])
    none = ImplicitUse("model", "org/none", "main", COMMIT, {}, {"conf"}, tests=["t.py::a"])
    path = tmp_path / "pins.json"
    path.write_text(pins.render([{"repo_id": "org/one", "repo_type": "model", "revision": "main", "commit": COMMIT}]))
    pin_file = pins.read(path)

    rows = implicit.summary_lines([one, two, none], None, None)
    listed = implicit.summary_lines([one], pin_file, path)
    unlisted = implicit.summary_lines([two], pin_file, path)

    assert rows[:3] == [
        f"org/one@main {COMMIT[:12]} 1 file 0 B fetched 1 test (first: t.py::a)",
        f"org/two@main {COMMIT[:12]} 2 files 0 B fetched 2 tests (first: t.py::a)",
        f"org/none@main {COMMIT[:12]} 0 files 0 B fetched 1 test (first: t.py::a)",
    ]
    assert rows[3].startswith("hfsnapshot: 3 implicit snapshots are not in a pin file; record them with")
    assert listed[1] == f"hfsnapshot: the 1 implicit snapshot is in the pin file {path}"
    assert unlisted[1].startswith(f"hfsnapshot: 1 implicit snapshot is not in the pin file {path}; record it with")
