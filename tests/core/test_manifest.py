"""`--hf-manifest=PATH`: deterministic JSON of every snapshot a run used or prefetched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hfsnapshot.core.engine import manifest
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.snapshot import Snapshot
from pytest_hfsnapshot.testing.hub import LocalHub

FILES: dict[str, bytes | str] = {"config.json": "{}", "tokenizer.json": "{}", "model.safetensors": b"\x04" * 8192}

CONFTEST = """
    from pytest_hfsnapshot import snapshot_fixture

    tiny = snapshot_fixture("org/tiny")
    tiny_json = snapshot_fixture("org/tiny", allow_patterns=["*.json"])
    corpus = snapshot_fixture("org/corpus", repo_type="dataset")
    """

SUITE = """
    import pytest

    def test_tiny(tiny): pass

    def test_json(tiny_json, corpus): pass

    @pytest.mark.hf_snapshot("org/alpha", revision="v1")
    def test_alpha(hf_snapshot): pass

    def test_factory(hf_snapshots):
        hf_snapshots("org/alpha", revision="v1", metadata_only=True)
    """


@pytest.fixture
def commits(local_hub: LocalHub, pytester: pytest.Pytester) -> dict[str, str]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    return {
        "tiny": local_hub.add_repo("org/tiny", files=FILES),
        "alpha": local_hub.add_repo("org/alpha", files=FILES, tag="v1"),
        "corpus": local_hub.add_repo("org/corpus", files={"README.md": "# c", "a.json": "[]"}, repo_type="dataset"),
    }


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", *args)


def test_manifest_of_a_test_run(pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]) -> None:
    run(pytester, local_hub, "--hf-manifest=out/manifest.json").assert_outcomes(passed=4)
    text = (pytester.path / "out" / "manifest.json").read_text()
    assert text.endswith("]\n")
    data = json.loads(text)
    assert text == json.dumps(data, indent=2, sort_keys=True) + "\n"
    assert all(list(entry) == sorted(manifest.KEYS) for entry in data)
    weights = ["config.json", "model.safetensors", "tokenizer.json"]
    assert [(e["repo_type"], e["repo_id"], e["revision"], e["commit"], e["files"]) for e in data] == [
        ("dataset", "org/corpus", "main", commits["corpus"], ["README.md", "a.json"]),
        ("model", "org/alpha", "v1", commits["alpha"], weights),
        ("model", "org/alpha", "v1", commits["alpha"], ["config.json", "tokenizer.json"]),
        ("model", "org/tiny", "main", commits["tiny"], weights),
        ("model", "org/tiny", "main", commits["tiny"], ["config.json", "tokenizer.json"]),
    ]
    assert data[3]["size"] == 2 + 2 + 8192
    assert data[4]["size"] == 4


def test_same_run_twice_same_bytes(pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]) -> None:
    run(pytester, local_hub, "--hf-manifest=first.json").assert_outcomes(passed=4)
    run(pytester, local_hub, "-p", "no:randomly", "--hf-manifest=second.json").assert_outcomes(passed=4)
    first = (pytester.path / "first.json").read_bytes()
    assert first == (pytester.path / "second.json").read_bytes()
    assert b'"source"' not in first  # how a snapshot arrived is not part of what it is


def test_prefetch_and_the_following_run_agree(
    pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]
) -> None:
    # The factory call is declared for the prefetch through the ini option.
    pytester.makeini(
        """
        [pytest]
        hf_prefetch = {"repo_id": "org/alpha", "revision": "v1", "metadata_only": true}
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only", "--hf-manifest=prefetch.json")
    assert result.ret == 0
    run(pytester, local_hub, "--hf-offline", "--hf-manifest=run.json").assert_outcomes(passed=4)
    prefetched = (pytester.path / "prefetch.json").read_bytes()
    assert len(json.loads(prefetched)) == 5
    assert prefetched == (pytester.path / "run.json").read_bytes()


def test_xdist_workers_records_are_merged(
    pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]
) -> None:
    pytest.importorskip("xdist")
    run(pytester, local_hub, "--hf-manifest=single.json").assert_outcomes(passed=4)
    result = pytester.runpytest_subprocess(
        f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider", "-n", "2", "--hf-manifest=xdist.json"
    )
    result.assert_outcomes(passed=4)
    assert (pytester.path / "xdist.json").read_bytes() == (pytester.path / "single.json").read_bytes()


def test_failed_snapshots_are_left_out_and_a_run_without_snapshots_writes_an_empty_list(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.hf_snapshot("org/tiny", revision="v9")
        def test_bad(hf_snapshot): pass

        def test_plain(): pass
        """
    )
    result = run(pytester, local_hub, "--hf-manifest=m.json")
    result.assert_outcomes(passed=1, errors=1)
    assert (pytester.path / "m.json").read_text() == "[]\n"


def test_relative_paths_start_from_the_invocation_folder_or_the_ini(
    pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]
) -> None:
    pytester.makeini(
        """
        [pytest]
        hf_manifest = ci/from-ini.json
        """
    )
    run(pytester, local_hub, "-k", "tiny").assert_outcomes(passed=1)
    data = json.loads((pytester.path / "ci" / "from-ini.json").read_text())
    assert [entry["repo_id"] for entry in data] == ["org/tiny"]


def test_an_unwritable_manifest_fails_the_run(
    pytester: pytest.Pytester, local_hub: LocalHub, commits: dict[str, str]
) -> None:
    (pytester.path / "blocker").write_text("a file, not a folder")
    result = run(pytester, local_hub, "-k", "tiny", "--hf-manifest=blocker/m.json")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["hfsnapshot: could not write the manifest */blocker/m.json: *"])


# --- the module, without pytest ------------------------------------------------------------------


def snap(request: SnapshotRequest, commit: str, files: tuple[str, ...], size: int = 10) -> Snapshot:
    return Snapshot(
        path=Path("/x"),
        repo_id=request.repo_id,
        repo_type=request.repo_type,
        revision=request.revision,
        commit=commit,
        files=files,
        size=size,
        source="download",
    )


def test_entries_order_and_deduplication() -> None:
    full = SnapshotRequest.build("org/b")
    json_only = SnapshotRequest.build("org/b", allow_patterns=["*.json"])
    metadata = SnapshotRequest.build("org/b", metadata_only=True)
    dataset = SnapshotRequest.build("org/z", repo_type="dataset")
    tagged = SnapshotRequest.build("org/a", revision="v2")
    pairs = [
        (metadata, snap(metadata, "1" * 40, ("config.json",), 2)),
        (full, snap(full, "1" * 40, ("model.bin", "config.json"))),
        (tagged, snap(tagged, "2" * 40, ("config.json",))),
        (json_only, snap(json_only, "1" * 40, ("config.json",), 2)),
        (dataset, snap(dataset, "3" * 40, ("README.md",))),
    ]
    entries = manifest.entries(pairs)
    assert [(e["repo_type"], e["repo_id"], e["files"]) for e in entries] == [
        ("dataset", "org/z", ["README.md"]),
        ("model", "org/a", ["config.json"]),
        ("model", "org/b", ["config.json", "model.bin"]),
        ("model", "org/b", ["config.json"]),  # json_only and metadata_only selected the same: once
    ]
    assert manifest.render(pairs) == manifest.render(reversed(pairs))


def test_write_is_atomic_and_readable(tmp_path: Path) -> None:
    request = SnapshotRequest.build("org/a")
    target = tmp_path / "deep" / "m.json"
    assert manifest.write(target, [(request, snap(request, "1" * 40, ("config.json",)))]) == target
    assert json.loads(target.read_text())[0]["commit"] == "1" * 40
    # Made like any file the user writes (umask), not with a temporary file's 0600.
    reference = tmp_path / "reference"
    reference.write_text("")
    assert target.stat().st_mode & 0o777 == reference.stat().st_mode & 0o777
    assert [p.name for p in target.parent.iterdir()] == ["m.json"]
