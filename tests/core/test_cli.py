"""The command line: `pytest-hfsnapshot prefetch ...` and `python -m pytest_hfsnapshot prefetch ...`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import file_fetches

from pytest_hfsnapshot.cli import main
from pytest_hfsnapshot.testing.hub import LocalHub

FILES: dict[str, bytes | str] = {"config.json": "{}", "model.safetensors": b"\x05" * 4096}
SCRIPT = str(Path(sys.executable).with_name("pytest-hfsnapshot"))
MODULE = [sys.executable, "-m", "pytest_hfsnapshot"]


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=120)


@pytest.fixture
def suite(pytester: pytest.Pytester, local_hub: LocalHub) -> Path:
    local_hub.add_repo("org/tiny", files=FILES)
    local_hub.add_repo("org/other", files=FILES)
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_tiny(tiny):
            assert False, "a prefetch runs no test"

        @pytest.mark.hf_snapshot("org/other", allow_patterns="*.json")
        def test_other(hf_snapshot):
            assert False, "a prefetch runs no test"
        """
    )
    return pytester.path


@pytest.mark.parametrize("command", [[SCRIPT], MODULE], ids=["console-script", "python-m"])
def test_prefetch_through_pytest(command: list[str], suite: Path, local_hub: LocalHub) -> None:
    done = cli(suite, *command, "prefetch", "-p", "no:cacheprovider", "--hf-manifest=m.json")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "hfsnapshot: prefetching 2 snapshots of 2 repos, 2 at a time" in lines
    ready = r"hfsnapshot: \[[12]/2\] org/tiny@main ready \(download, 2 files, 4\.0 KiB, [0-9.]+s\)"
    assert any(re.fullmatch(ready, line) for line in lines)
    assert "hfsnapshot: 2 snapshots ready in " in done.stdout
    assert "no tests ran" in done.stdout
    assert "Warning" not in done.stdout + done.stderr
    assert [e["repo_id"] for e in json.loads((suite / "m.json").read_text())] == ["org/other", "org/tiny"]
    assert file_fetches(local_hub, "*/resolve/*/model.safetensors") == 1


def test_prefetch_passes_the_selection_and_the_exit_status_through(suite: Path, local_hub: LocalHub) -> None:
    done = cli(suite, SCRIPT, "prefetch", "-p", "no:cacheprovider", "-k", "other")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hfsnapshot: [1/1] org/other@main [allow *.json] ready (download, 1 file, 2 B, " in done.stdout
    assert local_hub.request_count("/org/tiny/*") == 0
    done = cli(suite, SCRIPT, "prefetch", "-p", "no:cacheprovider", "--hf-on-auth-error=sometimes")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--hf-on-auth-error: invalid value 'sometimes'" in done.stderr


def test_prefetch_repos_without_pytest(tmp_path: Path, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    local_hub.add_repo("org/data", files={"README.md": "# d"}, repo_type="dataset")
    done = cli(
        tmp_path,
        *MODULE,
        "prefetch",
        "--repo",
        "org/tiny@main",
        "--repo=datasets/org/data",
        "--repo",
        '{"repo_id": "org/tiny", "allow_patterns": ["*.json"]}',
        "--manifest",
        "out/m.json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hfsnapshot: prefetching 3 snapshots of 2 repos, 2 at a time"
    assert sorted(line.split("] ", 1)[1].split(" (")[0] for line in lines[1:4]) == [
        "datasets/org/data@main ready",
        "org/tiny@main [allow *.json] ready",
        "org/tiny@main ready",
    ]
    assert lines[-1].startswith("hfsnapshot: 3 snapshots ready in ")
    entries = json.loads((tmp_path / "out" / "m.json").read_text())
    assert [(e["repo_type"], e["repo_id"], e["files"]) for e in entries] == [
        ("dataset", "org/data", ["README.md"]),
        ("model", "org/tiny", ["config.json", "model.safetensors"]),
        ("model", "org/tiny", ["config.json"]),
    ]
    # Warm, then offline: the same command answers from the cache.
    local_hub.reset_counters()
    done = cli(tmp_path, SCRIPT, "prefetch", "--repo", "org/tiny", "--offline")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "org/tiny@main ready (cache, 2 files" in done.stdout
    assert local_hub.requests == []


# A wrapper for `python -c`: pytest cannot be imported in it, as in a CI step without pytest.
NO_PYTEST = """
import sys

class NoPytest:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pytest", "_pytest"):
            raise ImportError(f"pytest is not installed here (import of {name})")
        return None

sys.meta_path.insert(0, NoPytest())
"""
RUN_CLI = NO_PYTEST + "import runpy; runpy.run_module('pytest_hfsnapshot', run_name='__main__', alter_sys=True)"


def test_prefetch_repos_works_where_pytest_cannot_be_imported(tmp_path: Path, local_hub: LocalHub) -> None:
    blocked = cli(tmp_path, sys.executable, "-c", NO_PYTEST + "import pytest")
    assert blocked.returncode != 0 and "pytest is not installed here" in blocked.stderr
    local_hub.add_repo("org/tiny", files=FILES)
    done = cli(tmp_path, sys.executable, "-c", RUN_CLI, "prefetch", "--repo", "org/tiny", "--manifest", "m.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "org/tiny@main ready (download, 2 files" in done.stdout
    (entry,) = json.loads((tmp_path / "m.json").read_text())
    snapshot = local_hub.cache_dir / "models--org--tiny" / "snapshots" / entry["commit"]
    assert sorted(path.name for path in snapshot.iterdir()) == ["config.json", "model.safetensors"]
    assert (snapshot / "model.safetensors").read_bytes() == FILES["model.safetensors"]


def test_prefetch_repos_manifest_matches_the_pytest_one(suite: Path, local_hub: LocalHub) -> None:
    assert cli(suite, SCRIPT, "prefetch", "-p", "no:cacheprovider", "--hf-manifest=pytest.json").returncode == 0
    done = cli(
        suite,
        SCRIPT,
        "prefetch",
        "--repo",
        "org/tiny",
        "--repo",
        '{"repo_id": "org/other", "allow_patterns": "*.json"}',
        "--manifest",
        "direct.json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (suite / "direct.json").read_bytes() == (suite / "pytest.json").read_bytes()


def test_prefetch_repos_failures(tmp_path: Path, local_hub: LocalHub) -> None:
    local_hub.add_repo("org/tiny", files=FILES)
    local_hub.add_repo("org/gated", files=FILES, gated=True)
    done = cli(tmp_path, SCRIPT, "prefetch", "--repo", "org/tiny", "--repo", "org/gated")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hfsnapshot: the Hub refused 1 snapshot; the tests needing it will be skipped" in done.stdout
    done = cli(tmp_path, SCRIPT, "prefetch", "--repo", "org/gated", "--on-auth-error", "fail")
    assert done.returncode == 1
    done = cli(tmp_path, SCRIPT, "prefetch", "--repo", "org/tiny@v9", "--repo", "org/tiny")
    assert done.returncode == 1
    assert "  org/tiny@v9    RevisionNotFoundError: Revision 'v9' does not exist in model 'org/tiny'" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("hfsnapshot: prefetch FAILED: 1 snapshot ready in ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prefetch", "--repo", "not a repo"], "--repo 'not a repo': Invalid repo id"),
        (["prefetch", "--repo", "org/x", "--workers", "0"], "--workers must be at least 1, got 0"),
        (["prefetch", "--repo", "org/x", "--verify", "md5"], "argument --verify: invalid choice: 'md5'"),
        (["prefetch", "--repo"], "argument --repo: expected one argument"),
    ],
)
def test_bad_usage(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pytest-hfsnapshot prefetch [PYTEST ARGS...]")
    assert message in err


def test_help_and_unknown_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pytest-hfsnapshot COMMAND [ARGS...]\n")
    assert "  prefetch [PYTEST ARGS...]  " in out
    assert "  prefetch --repo ORG/NAME[@REV]  " in out
    assert main([]) == 2
    assert capsys.readouterr().err.startswith("usage: pytest-hfsnapshot COMMAND")
    assert main(["frobnicate"]) == 2
    assert capsys.readouterr().err.endswith("pytest-hfsnapshot: error: unknown command 'frobnicate'\n")
    assert main(["prefetch", "--help"]) == 0
    assert "With --repo: fetch the given snapshots, without pytest." in " ".join(capsys.readouterr().out.split())


def test_python_m_help_in_a_fresh_interpreter(tmp_path: Path) -> None:
    done = cli(tmp_path, *MODULE, "--help")
    assert done.returncode == 0
    assert done.stdout.startswith("usage: pytest-hfsnapshot COMMAND [ARGS...]")
    done = cli(tmp_path, SCRIPT, "nope")
    assert done.returncode == 2
    assert "unknown command 'nope'" in done.stderr


def test_prefetch_repos_fails_for_a_repo_the_hub_does_not_show(tmp_path: Path, local_hub: LocalHub) -> None:
    local_hub.add_repo("acme/tiny-bert", files=FILES)
    local_hub.add_repo("acme/secret", files=FILES, private=True)
    done = cli(tmp_path, *MODULE, "prefetch", "--repo", "acme/tiny-bret")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "acme/tiny-bret@main was not found at" in done.stdout
    assert "prefetch FAILED" in done.stdout
    declared = cli(tmp_path, *MODULE, "prefetch", "--repo", '{"repo_id": "acme/secret", "private": true}')
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert "acme/secret@main is declared private=True and no Hub token is set" in declared.stdout
