"""`pytest --hf-prefetch-only`: every declared snapshot made ready, in parallel, with progress; no test run."""

from __future__ import annotations

import threading

import pytest
from conftest import file_fetches

from pytest_hfsnapshot.core.engine.prefetch import Display, PrefetchResult, RequestResult, prefetch, report_lines
from pytest_hfsnapshot.core.engine.specs import parse_spec
from pytest_hfsnapshot.errors import AuthError, RevisionNotFoundError
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.snapshot import Snapshot
from pytest_hfsnapshot.testing.hub import LocalHub

FILES: dict[str, bytes | str] = {"config.json": "{}", "model.safetensors": b"\x03" * (64 * 1024)}
WEIGHT_GET = "*/resolve/*/model.safetensors"

# Tests that would fail if they ran: a prefetch must not run them.
SUITE = """
    import pytest

    def test_a(tiny):
        assert False, "a prefetch runs no test"

    def test_b(tiny, other):
        assert False, "a prefetch runs no test"
    """

CONFTEST = """
    from pytest_hfsnapshot import snapshot_fixture

    tiny = snapshot_fixture("org/tiny")
    other = snapshot_fixture("org/other", allow_patterns=["*.json"])
    """

FORCE_TTY = """
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_configure(config):
        config.pluginmanager.get_plugin("terminalreporter").isatty = lambda: True
    """


@pytest.fixture
def repos(local_hub: LocalHub) -> dict[str, str]:
    return {name: local_hub.add_repo(name, files=FILES) for name in ("org/tiny", "org/other")}


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", *args)


def run_subprocess(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", *args)


def test_prefetch_fetches_every_declared_snapshot_and_runs_no_test(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == 0
    result.assert_outcomes()
    result.stdout.fnmatch_lines(
        [
            "hfsnapshot: prefetching 2 snapshots of 2 repos, 2 at a time",
            "hfsnapshot: [[]?/2] org/tiny@main ready (download, 2 files, 64.0 KiB, *s)",
            "hfsnapshot: 2 snapshots ready in *s",
            "*no tests ran*",
        ],
        consecutive=False,
    )
    result.stdout.fnmatch_lines(
        ["hfsnapshot: [[]?/2] org/other@main [[]allow [*].json] ready (download, 1 file, 2 B, *s)"]
    )
    # Not a terminal: plain lines only, no status line redrawn in place.
    assert "working on" not in result.stdout.str()
    assert "\r" not in capsys.readouterr().out
    assert file_fetches(local_hub, WEIGHT_GET) == 1
    # The cache is ready: the suite's own run needs the network no more.
    local_hub.reset_counters()
    run(pytester, local_hub, "--hf-offline").assert_outcomes(failed=2)
    assert local_hub.requests == []


def test_progress_on_a_terminal_redraws_one_status_line(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeconftest(CONFTEST + FORCE_TTY)
    pytester.makepyfile(SUITE)
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == 0
    raw = capsys.readouterr().out
    # The status names what is in flight (nothing left, "...", when the other repo finished in
    # the meantime) and is overwritten ("\r") by the next line.
    assert "\rhfsnapshot: [1/2] working on " in raw
    assert "\rhfsnapshot: [2/2] org/" in raw
    assert "\rhfsnapshot: 2 snapshots ready in " in raw
    for name in ("org/tiny@main", "org/other@main"):
        assert any(
            line.startswith("hfsnapshot: [") and f"] {name}" in line and " ready (download, " in line
            for line in result.stdout.lines
        )


def test_one_download_for_fixtures_and_a_marker_asking_the_same(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_one(tiny): pass

        def test_two(tiny): pass

        @pytest.mark.hf_snapshot("org/tiny")
        def test_marked(hf_snapshot): pass
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hfsnapshot: prefetching 1 snapshot of 1 repo, 1 at a time"])
    assert file_fetches(local_hub, WEIGHT_GET) == 1
    assert file_fetches(local_hub, "*/revision/main") == 1


def test_only_the_selected_tests_count(pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_uses_tiny(tiny): pass

        @pytest.mark.hf_snapshot("org/other")
        def test_uses_other(hf_snapshot): pass
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only", "-k", "other")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hfsnapshot: [[]1/1] org/other@main ready (download, *"])
    assert local_hub.request_count("/org/tiny/*") == 0
    assert local_hub.request_count("/api/models/org/tiny/*") == 0


def test_repos_are_fetched_in_parallel(pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]) -> None:
    # Each repo's revision call first gets a 503 asking to retry in 2 s (the client never retries
    # it, the engine does). One after the other, the second repo would be asked only after the
    # first one's retry succeeded; in parallel both are refused before either is retried. The order
    # of the answers proves it without a wall-clock bound (noisy on shared machines).
    for name in repos:
        local_hub.fail(f"/api/models/{name}/revision/*", 503, retry_after=2)
    pytester.makeconftest(CONFTEST.replace(', allow_patterns=["*.json"]', ""))
    pytester.makepyfile(SUITE)
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == 0
    revisions = [status for _, path, status in local_hub.requests if "/revision/" in path]
    assert revisions == [503, 503, 200, 200], "both repos were refused before either was retried"


def test_same_repo_requests_run_one_after_another_other_repos_at_once() -> None:
    running: dict[str, int] = {}
    started: list[str] = []
    peak = {"all": 0, "org/a": 0}
    changed = threading.Condition()

    def fetch(request: SnapshotRequest) -> Snapshot:
        with changed:
            first_of_a = request.repo_id == "org/a" and "org/a" not in started
            started.append(request.repo_id)
            running[request.repo_id] = running.get(request.repo_id, 0) + 1
            peak["all"] = max(peak["all"], sum(running.values()))
            peak["org/a"] = max(peak["org/a"], running.get("org/a", 0))
            changed.notify_all()
            # Each fetch holds until four run at once (a prefetch one at a time never gets there);
            # org/a's first until org/e started too, so that org/a's second would have started
            # beside it had it been a request of its own.
            assert changed.wait_for(lambda: peak["all"] == 4, timeout=30), "never four fetches at once"
            if first_of_a:
                assert changed.wait_for(lambda: "org/e" in started, timeout=30), "org/e never started"
            running[request.repo_id] -= 1
        return _snapshot(request)

    requests = [SnapshotRequest.build(name) for name in ("org/a", "org/b", "org/c", "org/d", "org/e")]
    requests.append(SnapshotRequest.build("org/a", allow_patterns="*.json"))
    lines: list[str] = []
    result = prefetch(requests, fetch, Display(lines.append), workers=4)
    assert [r.request for r in result.results] == requests
    assert result.ok(), [r.error for r in result.results]
    assert peak == {"all": 4, "org/a": 1}
    assert started.index("org/e") < started.index("org/a", 1)
    assert lines[0] == "hfsnapshot: prefetching 6 snapshots of 5 repos, 4 at a time"
    assert sorted(line.split("] ")[0] for line in lines[1:]) == [f"hfsnapshot: [{n}/6" for n in range(1, 7)]


def test_an_unexpected_exception_is_that_request_s_outcome() -> None:
    def fetch(request: SnapshotRequest) -> Snapshot:
        if request.repo_id == "org/bad":
            raise OSError("disk full")
        return _snapshot(request)

    lines: list[str] = []
    result = prefetch(
        [SnapshotRequest.build("org/bad"), SnapshotRequest.build("org/good")], fetch, Display(lines.append)
    )
    assert [o.request.repo_id for o in result.failed] == ["org/bad"]
    assert [o.request.repo_id for o in result.ready] == ["org/good"]
    assert any(line.endswith("] org/bad@main FAILED (OSError)") for line in lines)
    assert not result.ok()


def test_a_snapshot_that_cannot_be_made_ready_fails_the_prefetch_with_a_table(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_ok(tiny): pass

        @pytest.mark.hf_snapshot("org/tiny", revision="v9")
        def test_bad_revision(hf_snapshot): pass
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "hfsnapshot: [[]?/2] org/tiny@v9 FAILED (RevisionNotFoundError)",
            "hfsnapshot: 1 of 2 snapshots could not be made ready:",
            "  org/tiny@v9    RevisionNotFoundError: Revision 'v9' does not exist in model 'org/tiny': *",
            "hfsnapshot: prefetch FAILED: 1 snapshot ready in *s, 1 not ready",
        ],
        consecutive=False,
    )


@pytest.mark.parametrize(
    ("action", "ret", "will"),
    [("skip", 0, "will be skipped"), ("xfail", 0, "will be xfailed"), ("fail", 1, "will fail")],
)
def test_refused_repos_are_listed_apart_and_fail_only_when_their_tests_will(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str], action: str, ret: int, will: str
) -> None:
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_ok(tiny): pass

        @pytest.mark.hf_snapshot("org/gated")
        def test_gated(hf_snapshot): pass
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only", f"--hf-on-auth-error={action}")
    assert result.ret == ret
    result.stdout.fnmatch_lines(
        [
            "hfsnapshot: [[]?/2] org/gated@main refused by the Hub (gated)",
            f"hfsnapshot: the Hub refused 1 snapshot; the tests needing it {will} (--hf-on-auth-error={action}):",
            "  org/gated@main  gated: org/gated@main is gated and no Hub token is set: accept the conditions at *",
        ],
        consecutive=False,
    )
    if ret == 0:
        result.stdout.fnmatch_lines(["hfsnapshot: 1 snapshot ready in *s, 1 refused"])
    else:
        result.stdout.fnmatch_lines(["hfsnapshot: prefetch FAILED: 1 snapshot ready in *s, 1 not ready"])
    assert "could not be made ready" not in result.stdout.str()


def test_ini_hf_prefetch_declares_what_the_factory_gets(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    local_hub.add_repo("org/corpus", files={"README.md": "# corpus", "data.json": "[]"}, repo_type="dataset")
    pytester.makeini(
        """
        [pytest]
        hf_prefetch =
            org/tiny@main
            {"repo_id": "org/corpus", "repo_type": "dataset", "allow_patterns": ["*.json"]}
        """
    )
    pytester.makepyfile(
        """
        def test_factory(hf_snapshots):
            assert (hf_snapshots("org/tiny") / "config.json").is_file()
            corpus = hf_snapshots("org/corpus", repo_type="dataset", allow_patterns=["*.json"])
            assert corpus.files == ("data.json",)
        """
    )
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["hfsnapshot: prefetching 2 snapshots of 2 repos, 2 at a time"])
    result.stdout.fnmatch_lines(["*datasets/org/corpus@main [[]allow [*].json] ready (download, 1 file, 2 B, *"])
    local_hub.reset_counters()
    run(pytester, local_hub, "--hf-offline").assert_outcomes(passed=1)
    assert local_hub.requests == []


def test_a_malformed_hf_prefetch_entry_is_a_usage_error(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    pytester.makeini(
        """
        [pytest]
        hf_prefetch =
            org/fine
            {"repo_id": "org/x", "revison": "v1"}
        """
    )
    pytester.makepyfile("def test_nothing(): pass")
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: ini option hf_prefetch, entry 2 (*): unknown key(s) revison; use repo_id, revision, *"]
    )
    assert local_hub.requests == []


def test_nothing_declared_keeps_no_tests_collected(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    pytester.makepyfile("def test_plain(): pass")
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == pytest.ExitCode.OK  # a test was collected, it just needs no snapshot
    result.stdout.fnmatch_lines(["hfsnapshot: nothing to prefetch: the selected tests declare no snapshot*"])
    result = run(pytester, local_hub, "--hf-prefetch-only", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_collection_errors_stop_the_prefetch(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_ok="def test_ok(tiny): pass", test_broken="import no_such_module")
    result = run(pytester, local_hub, "--hf-prefetch-only")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*Interrupted: 1 error during collection*"])
    assert local_hub.requests == []


def test_collect_only_prefetches_nothing(pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    result = run(pytester, local_hub, "--hf-prefetch-only", "--collect-only", "-q")
    assert result.ret == 0
    assert local_hub.requests == []


def test_xdist_prefetch_runs_in_the_controller(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    result = run_subprocess(pytester, local_hub, "--hf-prefetch-only", "-n", "2")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "hfsnapshot: -n/--dist ignored: the prefetch runs in this process, repos in parallel threads",
            "hfsnapshot: 2 snapshots ready in *s",
        ],
        consecutive=False,
    )
    result.stdout.no_fnmatch_line("*created: 2/2 workers*")
    assert file_fetches(local_hub, WEIGHT_GET) == 1


def test_after_a_prefetch_an_offline_xdist_run_makes_no_request(
    pytester: pytest.Pytester, local_hub: LocalHub, repos: dict[str, str]
) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        def test_a(tiny): assert (tiny / "model.safetensors").stat().st_size == 64 * 1024

        def test_b(tiny, other): assert other.files == ("config.json",)

        @pytest.mark.hf_snapshot("org/other")
        def test_c(hf_snapshot): assert len(hf_snapshot.files) == 2

        def test_d(tiny): pass
        """
    )
    assert run(pytester, local_hub, "--hf-prefetch-only").ret == 0
    local_hub.reset_counters()
    result = run_subprocess(pytester, local_hub, "-n", "2", "--hf-offline")
    result.assert_outcomes(passed=4)
    assert local_hub.requests == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("org/name", SnapshotRequest("org/name")),
        ("  org/name@v1.0 ", SnapshotRequest("org/name", revision="v1.0")),
        ("datasets/org/data@refs/pr/1", SnapshotRequest("org/data", revision="refs/pr/1", repo_type="dataset")),
        ("spaces/org/app", SnapshotRequest("org/app", repo_type="space")),
        (
            '{"repo_id": "org/name", "allow_patterns": ["*.json"], "metadata_only": true}',
            SnapshotRequest("org/name", allow_patterns=("*.json",), metadata_only=True),
        ),
    ],
)
def test_parse_spec(text: str, expected: SnapshotRequest) -> None:
    assert parse_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not a repo", "Invalid repo id"),
        ("org/name@", "Invalid revision"),
        ('{"repo_id": "org/x"', "not valid JSON"),
        ('["org/x"]', "Invalid repo id"),
        ('{"revision": "v1"}', "a repo_id is required"),
        ('{"repo_id": "org/x", "repo_type": "modle"}', "Unknown repo_type"),
    ],
)
def test_parse_spec_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_spec(text)


def test_report_lines_for_auth_and_other_failures() -> None:
    gated = SnapshotRequest.build("org/gated")
    missing = SnapshotRequest.build("org/tiny", revision="v9")
    result = PrefetchResult(
        (
            RequestResult(gated, None, AuthError("refused", reason="gated"), 0.1),
            RequestResult(missing, None, RevisionNotFoundError("Revision 'v9' does not exist.\nMore."), 0.1),
        ),
        0.2,
    )
    lines = report_lines(result)
    assert lines[:2] == [
        "hfsnapshot: 1 of 2 snapshots could not be made ready:",
        "  org/tiny@v9     RevisionNotFoundError: Revision 'v9' does not exist.",
    ]
    assert lines[2] == (
        "hfsnapshot: the Hub refused 1 snapshot; the tests needing it will be skipped (--hf-on-auth-error=skip):"
    )
    assert lines[3].startswith("  org/gated@main  gated: org/gated@main is gated and ")
    assert lines[4] == "hfsnapshot: prefetch FAILED: 0 snapshots ready in 0.2s, 2 not ready"


def _snapshot(request: SnapshotRequest) -> Snapshot:
    from pathlib import Path

    return Snapshot(
        path=Path("/nonexistent"),
        repo_id=request.repo_id,
        repo_type=request.repo_type,
        revision=request.revision,
        commit="0" * 40,
        files=("config.json",),
        size=2,
        source="cache",
    )
