"""CONTRACT §7, read-only cache layers, as the plugin offers them: options, the summary, exit codes,
a mount that dies during a session, and prefetch. Each pytest run is a subprocess (a session of its
own) against the local Hub, with a layer on a read-only rclone mount of an S3 bucket or a local folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from reliability.conftest import repo_files

from pytest_hfsnapshot.testing.hub import LocalHub

from .conftest import Mount
from .storage import fusermount

REPO = "org/layered"
OTHER = "org/second"
FILE_BYTES = "*/resolve/*"

Prefetched = Callable[..., Path]
S3Layer = Callable[..., Mount]

SUITE = """
    def test_uses(hf_snapshots):
        snap = hf_snapshots("{repo}", revision="{commit}")
        assert (snap / "config.json").is_file()
        assert len((snap / "model.safetensors").read_bytes()) == {size}
    """


def run(pytester: pytest.Pytester, hub: LocalHub, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(f"--hf-cache-dir={hub.cache_dir}", "-p", "no:cacheprovider", "-rw", *args)


def summary_section(result: pytest.RunResult) -> str:
    """The ``hf snapshots`` section of the terminal summary."""
    lines = result.stdout.lines
    start = next((i for i, line in enumerate(lines) if "hf snapshots" in line), None)
    assert start is not None, result.stdout.str()
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("=")), len(lines))
    return "\n".join(lines[start:end])


def assert_names_layer(result: pytest.RunResult, repo_id: str, layer: Path) -> None:
    section = summary_section(result)
    rows = [line for line in section.splitlines() if repo_id in line]
    assert rows and all("layer" in row for row in rows), section
    assert str(layer) in section, f"the summary does not name the layer {layer}:\n{section}"


def _suite(pytester: pytest.Pytester, hub: LocalHub, repo_id: str = REPO, seed: int = 60) -> str:
    files = repo_files(seed)
    commit = hub.add_repo(repo_id, files)
    pytester.makepyfile(SUITE.format(repo=repo_id, commit=commit, size=len(files["model.safetensors"])))
    return commit


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_session_serves_from_a_mounted_bucket_and_its_summary_names_the_layer(
    pytester: pytest.Pytester, local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer
) -> None:
    commit = _suite(pytester, local_hub)
    mount = s3_layer(prefetched(f"{REPO}@{commit}"))
    local_hub.reset_counters()

    result = run(pytester, local_hub, f"--hf-cache-layer={mount.layer}")

    result.assert_outcomes(passed=1)
    assert local_hub.served(FILE_BYTES) == 0, local_hub.requests
    assert_names_layer(result, REPO, mount.layer)


@pytest.mark.transports("xet")
@pytest.mark.parametrize("how", ["flags", "ini", "env"])
def test_layers_come_from_repeated_flags_ini_lines_or_the_environment(
    pytester: pytest.Pytester,
    local_hub: LocalHub,
    prefetched: Prefetched,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    commit = _suite(pytester, local_hub)
    local_hub.add_repo(OTHER, repo_files(61))
    # The first layer lacks the repo: it is searched, then the second one serves.
    layers = [prefetched(OTHER), prefetched(f"{REPO}@{commit}")]
    args: list[str] = []
    if how == "flags":
        args = [f"--hf-cache-layer={layer}" for layer in layers]
    elif how == "ini":
        pytester.makeini("[pytest]\nhf_cache_layers =\n" + "".join(f"    {layer}\n" for layer in layers))
    else:
        monkeypatch.setenv("HFSNAPSHOT_CACHE_LAYERS", os.pathsep.join(map(str, layers)))
    local_hub.reset_counters()

    result = run(pytester, local_hub, *args)

    result.assert_outcomes(passed=1)
    assert local_hub.served(FILE_BYTES) == 0, local_hub.requests
    assert_names_layer(result, REPO, layers[1])


@pytest.mark.transports("xet")
@pytest.mark.parametrize("bad", ["missing", "dead-mount"])
def test_bad_layer_path_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, local_hub: LocalHub, tmp_path: Path, s3_layer: S3Layer, bad: str
) -> None:
    _suite(pytester, local_hub)
    if bad == "missing":
        layer = tmp_path / "no-such-layer"
    else:
        cache = tmp_path / "cache"
        cache.mkdir()
        mount = s3_layer(cache)
        mount.crash()
        layer = mount.layer
    local_hub.reset_counters()

    result = run(pytester, local_hub, f"--hf-cache-layer={layer}")

    output = result.stderr.str() + result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    assert str(layer) in output and "unrecognized arguments" not in output, output
    assert local_hub.requests == []


DYING_SUITE = """
    import os, signal, subprocess

    def test_first(hf_snapshots):
        snap = hf_snapshots("{repo}", revision="{commit}")
        assert snap.source == "layer"
        assert (snap / "config.json").read_bytes()

    def test_the_mount_dies():
        {die}

    def test_second(hf_snapshots):
        snap = hf_snapshots("{other}", revision="{other_commit}")
        assert snap.source == "download"
        assert len((snap / "model.safetensors").read_bytes()) == {size}

    def test_second_again(hf_snapshots):
        snap = hf_snapshots("{other}", revision="{other_commit}", allow_patterns=["*.json"])
        assert (snap / "config.json").is_file()
    """


@pytest.mark.transports("xet", "xet-noshare", "http")
@pytest.mark.parametrize("death", ["detached", "crashed"])
def test_mount_that_dies_during_the_session_gives_one_warning_and_the_writable_cache_serves(
    pytester: pytest.Pytester, local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer, death: str
) -> None:
    files, other_files = repo_files(62), repo_files(63)
    commit = local_hub.add_repo(REPO, files)
    other_commit = local_hub.add_repo(OTHER, other_files)
    mount = s3_layer(prefetched(f"{REPO}@{commit}", f"{OTHER}@{other_commit}"))
    if death == "detached":
        die = f"subprocess.run([{fusermount()!r}, '-u', '-z', {str(mount.path)!r}], check=True)"
    else:
        die = f"os.kill({mount.pid}, signal.SIGKILL)"
    pytester.makepyfile(
        DYING_SUITE.format(
            repo=REPO,
            commit=commit,
            other=OTHER,
            other_commit=other_commit,
            die=die,
            size=len(other_files["model.safetensors"]),
        )
    )

    result = run(pytester, local_hub, f"--hf-cache-layer={mount.layer}")

    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed", 0), outcomes.get("errors", 0)) == (4, 0, 0), outcomes
    assert outcomes.get("warnings") == 1, result.stdout.str()
    warnings_section = result.stdout.str().split("warnings summary", 1)[-1]
    assert str(mount.layer) in warnings_section, result.stdout.str()


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_prefetch_only_fetches_what_the_layers_do_not_hold(
    pytester: pytest.Pytester, local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer
) -> None:
    files, other_files = repo_files(64), repo_files(65)
    commit = local_hub.add_repo(REPO, files)
    other_commit = local_hub.add_repo(OTHER, other_files)
    mount = s3_layer(prefetched(f"{REPO}@{commit}"), links=False)
    pytester.makeconftest(
        f"""
        from pytest_hfsnapshot import snapshot_fixture

        layered = snapshot_fixture("{REPO}", revision="{commit}")
        second = snapshot_fixture("{OTHER}", revision="{other_commit}")
        """
    )
    pytester.makepyfile("def test_both(layered, second):\n    pass\n")
    local_hub.reset_counters()

    result = run(pytester, local_hub, "--hf-prefetch-only", f"--hf-cache-layer={mount.layer}")

    assert result.ret == 0, result.stdout.str()
    assert local_hub.served(f"/{REPO}/*") == 0, "a prefetch fetched what the layer holds"
    assert local_hub.served(f"/{OTHER}/resolve/*/model.safetensors") >= len(other_files["model.safetensors"])


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_prefetch_command_honours_the_layers_of_the_environment(
    local_hub: LocalHub, prefetched: Prefetched, s3_layer: S3Layer, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, other_files = repo_files(66), repo_files(67)
    commit = local_hub.add_repo(REPO, files)
    other_commit = local_hub.add_repo(OTHER, other_files)
    mount = s3_layer(prefetched(f"{REPO}@{commit}"))
    monkeypatch.setenv("HFSNAPSHOT_CACHE_LAYERS", str(mount.layer))
    local_hub.reset_counters()

    repos = ["--repo", f"{REPO}@{commit}", "--repo", f"{OTHER}@{other_commit}"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest_hfsnapshot", "prefetch", *repos, "--cache-dir", str(local_hub.cache_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert local_hub.served(f"/{REPO}/*") == 0, "a prefetch fetched what the layer holds"
    assert local_hub.served(f"/{OTHER}/resolve/*/model.safetensors") >= len(other_files["model.safetensors"])
