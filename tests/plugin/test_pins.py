"""`--hf-pins` and `--hf-update-pins` in test sessions: pinned resolution, updates, xdist, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_demo import EXAMPLES, hub_repos

from pytest_hfsnapshot.core.cache import pins
from pytest_hfsnapshot.core.cache.layout import own_dir
from pytest_hfsnapshot.testing.hub import LocalHub

FILES: dict[str, bytes | str] = {"config.json": "{}", "model.safetensors": b"\x09" * 4096}
NEWER: dict[str, bytes | str] = {"config.json": '{"v": 2}', "model.safetensors": b"\x0a" * 4096}
UNUSED = {"commit": "c" * 40, "repo_id": "org/unused", "repo_type": "model", "revision": "main"}

CONFTEST = """
    import os
    import pytest
    from pytest_hfsnapshot import snapshot_fixture

    tiny = snapshot_fixture("org/tiny")
    tiny_json = snapshot_fixture("org/tiny", allow_patterns="*.json")
    corpus = snapshot_fixture("org/corpus", repo_type="dataset")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        # What each xdist worker sees of the pin file once it is done: the controller writes later.
        worker = getattr(session.config, "workerinput", {}).get("workerid")
        if worker and os.path.exists("pins.json"):
            with open(f"seen-by-{worker}", "w") as out, open("pins.json") as pin_file:
                out.write(pin_file.read())
    """


def entry(repo_id: str, commit: str, revision: str = "main", repo_type: str = "model") -> dict[str, Any]:
    return {"commit": commit, "repo_id": repo_id, "repo_type": repo_type, "revision": revision}


def write_pins(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pins.render(entries))
    return path


def suite(pytester: pytest.Pytester, tiny: str, corpus: str) -> None:
    """Tests asserting the commits they get (``tiny`` for org/tiny@main, ``corpus`` for the dataset)."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_a=f"""
        import pytest

        @pytest.mark.xdist_group("a")
        def test_tiny(tiny):
            assert tiny.commit == "{tiny}"

        @pytest.mark.xdist_group("a")
        def test_json(tiny_json):
            assert tiny_json.commit == "{tiny}" and tiny_json.files == ("config.json",)
        """,
        test_b=f"""
        import pytest

        @pytest.mark.xdist_group("b")
        def test_corpus(corpus):
            assert corpus.commit == "{corpus}"
        """,
    )


@pytest.fixture
def hub(local_hub: LocalHub) -> dict[str, str]:
    """org/tiny moved on once (``old``, ``new``) and the dataset org/corpus (``corpus``)."""
    old = local_hub.add_repo("org/tiny", FILES)
    return {
        "old": old,
        "new": local_hub.add_repo("org/tiny", NEWER),
        "corpus": local_hub.add_repo("org/corpus", {"README.md": "# c"}, repo_type="dataset"),
    }


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", *args)


# --- pinned resolution ----------------------------------------------------------------------------


@pytest.mark.transports("xet")
@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadgroup"]], ids=["in-process", "xdist"])
def test_pinned_branches_send_no_revision_request(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str], workers: list[str]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    write_pins(
        pytester.path / "pins.json",
        [entry("org/tiny", hub["old"]), entry("org/corpus", hub["corpus"], repo_type="dataset")],
    )
    suite(pytester, tiny=hub["old"], corpus=hub["corpus"])
    result = run(pytester, local_hub, "--hf-pins=pins.json", *workers)
    result.assert_outcomes(passed=3)
    assert local_hub.request_count("*/revision/*") == 0
    result.stdout.fnmatch_lines([f"org/tiny@main  * {hub['old'][:12]}  2 files  *"])
    result.stdout.no_fnmatch_line("*not pinned*")


@pytest.mark.transports("xet")
def test_ini_hf_pins_and_what_was_not_pinned(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tagged = local_hub.add_repo("org/tagged", FILES, tag="v1")
    write_pins(pytester.path / "ci" / "hf-pins.json", [entry("org/tiny", hub["old"])])
    pytester.makeini("[pytest]\nhf_pins = ci/hf-pins.json\n")
    suite(pytester, tiny=hub["old"], corpus=hub["corpus"])
    pytester.makepyfile(
        test_c=f"""
        import pytest

        @pytest.mark.hf_snapshot("org/tagged", revision="v1")
        def test_tagged(hf_snapshot):
            assert hf_snapshot.commit == "{tagged}"

        def test_by_commit(hf_snapshots):
            assert hf_snapshots("org/tagged", revision="{tagged}").commit == "{tagged}"
        """
    )
    # Relative ini paths start from the ini file's folder, wherever pytest is started.
    monkeypatch.chdir(pytester.mkdir("sub"))
    result = pytester.runpytest(
        f"--hf-cache-dir={local_hub.cache_dir}",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(pytester.path),
        "-c",
        str(pytester.path / "tox.ini"),
        str(pytester.path),
    )
    result.assert_outcomes(passed=5)
    path = pytester.path / "ci" / "hf-pins.json"
    result.stdout.fnmatch_lines(
        [
            f"hfsnapshot: 2 snapshots were not pinned in {path} and were resolved on the Hub: "
            "datasets/org/corpus@main, org/tagged@v1; pin them with --hf-update-pins"
        ]
    )
    assert local_hub.request_count("*/revision/*") == 2


@pytest.mark.transports("xet")
def test_a_pinned_commit_the_hub_no_longer_has_fails_the_test(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str]
) -> None:
    gone = "d" * 40
    write_pins(pytester.path / "pins.json", [entry("org/tiny", gone)])
    suite(pytester, tiny=gone, corpus=hub["corpus"])
    result = run(pytester, local_hub, "--hf-pins=pins.json")
    result.assert_outcomes(passed=1, errors=2)
    path = pytester.path / "pins.json"
    result.stdout.fnmatch_lines(
        [
            f"*org/tiny@main: RevisionNotFoundError: The pin file {path} pins org/tiny@main to commit {gone}, which "
            f"the Hub at {local_hub.url} does not have*--hf-update-pins*"
        ]
    )


# --- prefetch and offline -------------------------------------------------------------------------


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_prefetch_fetches_the_pinned_commits_and_offline_needs_no_revision_record(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str]
) -> None:
    write_pins(
        pytester.path / "pins.json",
        [entry("org/tiny", hub["old"]), entry("org/corpus", hub["corpus"], repo_type="dataset")],
    )
    suite(pytester, tiny=hub["old"], corpus=hub["corpus"])
    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-prefetch-only", "--hf-manifest=m.json")
    assert result.ret == 0
    assert local_hub.request_count("*/revision/*") == 0
    assert {e["commit"] for e in json.loads((pytester.path / "m.json").read_text()) if e["repo_id"] == "org/tiny"} == {
        hub["old"]
    }
    assert local_hub.request_count(f"*/resolve/{hub['new']}/*") == 0
    # Offline, with neither the client's refs nor a resolution of ours: the pins say what main is.
    for repo in ("models--org--tiny", "datasets--org--corpus"):
        shutil.rmtree(local_hub.cache_dir / repo / "refs")
    shutil.rmtree(own_dir(local_hub.cache_dir) / "resolutions", ignore_errors=True)
    local_hub.reset_counters()
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-offline", "--hf-verify=sha256").assert_outcomes(passed=3)
    assert local_hub.requests == []


# --- updates ----------------------------------------------------------------------------------------


@pytest.mark.transports("xet")
def test_update_pins_with_xdist_one_writer_merged_and_deterministic(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str]
) -> None:
    pytest.importorskip("xdist")
    path = pytester.path / "pins.json"
    original = pins.render([UNUSED, entry("org/tiny", hub["old"])])
    path.write_text(original)
    suite(pytester, tiny=hub["new"], corpus=hub["corpus"])
    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins", "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=3)
    assert local_hub.request_count("*/revision/*") == 2  # every snapshot resolved on the Hub, once per session
    expected = [entry("org/corpus", hub["corpus"], repo_type="dataset"), entry("org/tiny", hub["new"]), UNUSED]
    written = path.read_text()
    assert json.loads(written) == expected and written == pins.render(expected)
    # The workers never write it: the controller does, once they are all done.
    seen = sorted(pytester.path.glob("seen-by-gw*"))
    assert [p.read_text() for p in seen] == [original] * len(seen) and len(seen) == 2
    assert sorted(p.name for p in pytester.path.iterdir() if p.name.startswith(".pins.json")) == []
    result.stdout.fnmatch_lines(
        [
            "*= hf snapshots =*",
            f"hfsnapshot: pin file {path} written: 1 moved, 1 added, 1 unchanged",
            f"org/tiny@main: {hub['old'][:12]} -> {hub['new'][:12]}",
            f"hfsnapshot: 1 snapshot was not pinned in {path}, now pinned: datasets/org/corpus@main",
        ]
    )
    # The same session again, from the same file, however it is run: the same bytes.
    path.write_text(original)
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=3)
    assert path.read_text() == written
    # Nothing moved since: the file is left as it was, and the run pins what it did not know.
    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins", "-n", "2")
    result.stdout.fnmatch_lines([f"hfsnapshot: pin file {path} left as it was: 0 moved, 0 added, 3 unchanged"])
    result.stdout.no_fnmatch_line("* -> *")
    assert path.read_text() == written


@pytest.mark.transports("xet")
def test_update_pins_creates_the_file_and_moves_the_run_onto_it(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str]
) -> None:
    suite(pytester, tiny=hub["new"], corpus=hub["corpus"])
    result = run(pytester, local_hub, "--hf-pins=ci/pins.json", "--hf-update-pins", "--hf-prefetch-only")
    assert result.ret == 0
    path = pytester.path / "ci" / "pins.json"
    assert json.loads(path.read_text()) == [
        entry("org/corpus", hub["corpus"], repo_type="dataset"),
        entry("org/tiny", hub["new"]),
    ]
    result.stdout.fnmatch_lines([f"hfsnapshot: pin file {path} written: 0 moved, 2 added, 0 unchanged"])
    local_hub.add_repo("org/tiny", FILES)  # main moves on: the pinned run does not follow it
    local_hub.reset_counters()
    run(pytester, local_hub, "--hf-pins=ci/pins.json").assert_outcomes(passed=3)
    assert local_hub.request_count("*/revision/*") == 0


@pytest.mark.transports("xet")
def test_update_pins_leaves_the_pins_the_hub_could_not_confirm(
    pytester: pytest.Pytester, local_hub: LocalHub, hub: dict[str, str]
) -> None:
    path = write_pins(pytester.path / "pins.json", [entry("org/tiny", hub["old"])])
    before = path.read_text()
    suite(pytester, tiny=hub["new"], corpus=hub["corpus"])
    run(pytester, local_hub).assert_outcomes(passed=3)  # the cache has main of both
    local_hub.fail("*/revision/*", 503, times=10)
    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins", "--hf-retries=0")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            f"hfsnapshot: pin file {path} left as it was: 0 moved, 0 added, 1 unchanged",
            "hfsnapshot: the Hub could not be reached to confirm 2 snapshots; their pins are left as they were: "
            "datasets/org/corpus@main, org/tiny@main",
        ]
    )
    result.stdout.no_fnmatch_line("*now pinned*")
    assert path.read_text() == before


@pytest.mark.transports("xet")
def test_a_pin_file_that_cannot_be_written_fails_the_run(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", FILES)
    pytester.makeconftest('from pytest_hfsnapshot import snapshot_fixture\ntiny = snapshot_fixture("org/tiny")\n')
    # A folder where the file was: nothing can be renamed over it.
    pytester.makepyfile("import os\n\ndef test_tiny(tiny):\n    os.remove('pins.json')\n    os.mkdir('pins.json')\n")
    write_pins(pytester.path / "pins.json", [])
    result = run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"hfsnapshot: could not write the pin file {pytester.path / 'pins.json'}: *"])
    assert [p.name for p in pytester.path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.transports("xet")
def test_update_pins_never_writes_the_token(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = local_hub.add_repo("org/secret", FILES, private=True)
    monkeypatch.setenv("HF_TOKEN", local_hub.token)
    pytester.makeconftest(
        'from pytest_hfsnapshot import snapshot_fixture\nsecret = snapshot_fixture("org/secret", private=True)\n'
    )
    pytester.makepyfile("def test_secret(secret): pass")
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=1)
    text = (pytester.path / "pins.json").read_text()
    assert commit in text and local_hub.token not in text


# --- bad input --------------------------------------------------------------------------------------


@pytest.mark.transports("xet")
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "ERROR: Pin file {path} is not JSON (Expecting value: line 1 column 1 (char 0)): *"),
        (
            '[{"repo_id": "org/tiny", "repo_type": "model", "revision": "main"}]',
            "ERROR: Pin file {path}, entry 1 (org/tiny@main): the key 'commit' is missing: *",
        ),
        (
            json.dumps([entry("org/tiny", "a" * 40), entry("org/tiny", "b" * 39)]),
            "ERROR: Pin file {path}, entry 2 (org/tiny@main): commit 'bbb*' is not a commit id "
            "(40 lowercase hex digits).",
        ),
        (
            json.dumps([entry("org/tiny", "a" * 40, revision="b" * 40)]),
            "ERROR: Pin file {path}, entry 1 (org/tiny@bbb*): the revision is itself a commit id, "
            "but the entry pins it to another commit*",
        ),
        (
            json.dumps([entry("org/tiny", "a" * 40), entry("org/tiny", "b" * 40)]),
            "ERROR: Pin file {path}, entries 1 and 2: both pin org/tiny@main, to different commits*",
        ),
    ],
    ids=["not-json", "missing-key", "bad-commit", "commit-revision", "two-commits"],
)
@pytest.mark.parametrize("update", [[], ["--hf-update-pins"]], ids=["pins", "update-pins"])
def test_a_malformed_pin_file_is_a_usage_error(
    pytester: pytest.Pytester, local_hub: LocalHub, text: str, message: str, update: list[str]
) -> None:
    (pytester.path / "pins.json").write_text(text)
    pytester.makepyfile("def test_never(): pass")
    result = run(pytester, local_hub, "--hf-pins=pins.json", *update)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message.format(path=pytester.path / "pins.json")])
    result.stdout.no_fnmatch_line("*test_never*")
    assert (pytester.path / "pins.json").read_text() == text
    assert local_hub.requests == []


@pytest.mark.transports("xet")
def test_usage_errors_of_the_pin_options(
    pytester: pytest.Pytester, local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile("def test_never(): pass")
    for args, message in [
        (
            ["--hf-pins=absent.json"],
            f"ERROR: Pin file {pytester.path / 'absent.json'} does not exist: "
            "write it with `pytest --hf-pins=* --hf-update-pins`*",
        ),
        (
            ["--hf-update-pins"],
            "ERROR: --hf-update-pins needs --hf-pins=PATH (or the ini option hf_pins): the pin file to write",
        ),
        (
            ["--hf-update-pins", "--hf-pins=p.json", "--hf-offline"],
            "ERROR: --hf-update-pins asks the Hub what every branch and tag points at, "
            "and --hf-offline makes this run offline: drop one of them",
        ),
    ]:
        result = run(pytester, local_hub, *args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([message])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run(pytester, local_hub, "--hf-update-pins", "--hf-pins=p.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --hf-update-pins asks the Hub *, and HF_HUB_OFFLINE=1 makes this run offline: *"]
    )
    assert not (pytester.path / "p.json").exists()


# --- the CI recipe ------------------------------------------------------------------------------------


@pytest.mark.transports("xet")
def test_the_example_pin_file_pins_every_branch_the_example_declares(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    hub_repos(local_hub)
    example = EXAMPLES / "conftest_patterns"
    pytester.makeconftest((example / "conftest.py").read_text())
    pytester.makepyfile(test_example=(example / "test_example.py").read_text())
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hf-prefetch-only", "--hf-pins=generated.json", "--hf-update-pins"
    )
    assert result.ret == 0, result.stdout.str()
    shipped = pins.read(example / "hf-pins.json")
    assert sorted(shipped.pins) == sorted(pins.read(pytester.path / "generated.json").pins)
    assert (example / "hf-pins.json").read_text() == pins.render(shipped.entries)


def workflow_steps() -> dict[str, dict[str, Any]]:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((EXAMPLES / "pins-update.yml").read_text())
    assert workflow[True]["schedule"]  # YAML 1.1 reads the key `on` as True
    return {step.get("name", step.get("uses", "")): step for step in workflow["jobs"]["pins"]["steps"]}


def run_step(step: dict[str, Any], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A workflow step's shell script, as GitHub runs it (bash -e), with this venv's commands on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=folder,
        env={**os.environ, **env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.transports("xet")
def test_the_pins_update_workflow_checks_updates_and_describes_the_pull_request(
    local_hub: LocalHub, tmp_path: Path
) -> None:
    steps = workflow_steps()
    check, update, pull = steps["Check the pins"], steps["Update the pins"], steps["Open a pull request"]
    assert update["if"] == pull["if"] == "steps.check.outputs.moved == 'true'"
    assert pull["uses"].startswith("peter-evans/create-pull-request@")
    assert pull["with"]["add-paths"] == "${{ env.PINS }}"
    old = local_hub.add_repo("org/tiny", FILES)
    write_pins(tmp_path / "tests" / "hf-pins.json", [entry("org/tiny", old)])
    (tmp_path / "runner").mkdir()
    env = {
        "PINS": "tests/hf-pins.json",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_OUTPUT": str(tmp_path / "out"),
    }

    done = run_step(check, tmp_path, env)
    assert done.returncode == 0 and not (tmp_path / "out").exists(), done.stderr

    new = local_hub.add_repo("org/tiny", NEWER)
    line = f"org/tiny@main: {old[:12]} -> {new[:12]}"
    done = run_step(check, tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").read_text() == "moved=true\n"
    assert done.stdout.splitlines() == [line]
    done = run_step(update, tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "tests" / "hf-pins.json").read_text()) == [entry("org/tiny", new)]
    assert f"```\n{line}\n```\n" in (tmp_path / "runner" / "body.md").read_text()

    (tmp_path / "tests" / "hf-pins.json").write_text("[{}]")
    done = run_step(check, tmp_path, env)
    assert done.returncode == 2 and "the key 'repo_id' is missing" in done.stderr
