"""Read-only cache layers in a test session: the option, its ini and environment twins, the header,
the summary row, a prefetch, xdist, and a mount that dies mid-session (CONTRACT section 7)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from core.test_layers import can_fuse, copy_cache, transfers
from core.test_layers import mounted as mounted  # fixtures
from core.test_layers import rclone_mount as rclone_mount

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.core.cache.layers import LAYERS_ENV
from pytest_hfsnapshot.testing.hub import LocalHub

ALL = pytest.mark.transports("xet", "xet-noshare", "http")
FILES = {"config.json": "{}", "tokenizer_config.json": "{}", "model.safetensors": b"\x05" * (128 * 1024)}

SHOW_LAYERS = """
from pytest_hfsnapshot.plugin.hooks import get_options

def pytest_sessionstart(session):
    print("LAYERS", [str(p) for p in get_options(session.config).cache_layers])
"""

USES_TINY = """
from huggingface_hub import snapshot_download

def test_loads_by_repo_id(tiny):
    assert (tiny / "model.safetensors").stat().st_size == 128 * 1024
    assert snapshot_download("org/tiny", local_files_only=True) == str(tiny)
"""


# --- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["command line", "ini", "environment"])
def test_a_layer_that_does_not_exist_is_a_usage_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    good = pytester.mkdir("good")
    missing = pytester.path / "missing"
    pytester.makepyfile("def test_ok(): pass")
    args: list[str] = [f"--hf-cache-dir={pytester.path / 'cache'}"]
    if where == "command line":
        args += [f"--hf-cache-layer={good}", "--hf-cache-layer=missing"]
        named = "--hf-cache-layer"
    elif where == "ini":
        pytester.makeini(f"[pytest]\nhf_cache_layers =\n    {good}\n    missing\n")
        named = "ini option hf_cache_layers"
    else:
        monkeypatch.setenv(LAYERS_ENV, os.pathsep.join([str(good), str(missing)]))
        named = LAYERS_ENV

    result = pytester.runpytest(*args)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {named}: The cache layer {missing} does not exist.*"])


def test_the_writable_cache_cannot_be_a_layer(pytester: pytest.Pytester) -> None:
    cache = pytester.mkdir("cache")
    pytester.makepyfile("def test_ok(): pass")

    result = pytester.runpytest(f"--hf-cache-dir={cache}", f"--hf-cache-layer={cache}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --hf-cache-layer: The cache layer {cache} overlaps the writable cache*"])


def test_the_command_line_wins_over_the_ini_file_and_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, c, d = (pytester.mkdir(name) for name in "abcd")
    pytester.makeconftest(SHOW_LAYERS)
    monkeypatch.setenv(LAYERS_ENV, os.pathsep.join([str(d), str(c)]))

    assert f"LAYERS {[str(d), str(c)]}" in pytester.runpytest("-s").stdout.str()
    pytester.makeini("[pytest]\nhf_cache_layers =\n    c\n    b\n")
    assert f"LAYERS {[str(c), str(b)]}" in pytester.runpytest("-s").stdout.str()
    result = pytester.runpytest("-s", "--hf-cache-layer=b", "--hf-cache-layer=a")
    assert f"LAYERS {[str(b), str(a)]}" in result.stdout.str()


def test_the_option_is_in_help(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--help").stdout.str()
    assert "--hf-cache-layer=PATH" in out
    assert "hf_cache_layers " in out
    assert LAYERS_ENV in out


# --- a session served from a layer ---------------------------------------------------------------


@pytest.fixture
def layer(local_hub: LocalHub, pytester: pytest.Pytester, tmp_path: Path) -> Path:
    """org/tiny prefetched by a writer job, its cache copied without symlinks; the tests declare it."""
    local_hub.add_repo("org/tiny", FILES)
    scratch = tmp_path / "scratch"
    materialize("org/tiny", cache_dir=scratch)
    local_hub.reset_counters()
    pytester.makeconftest("from pytest_hfsnapshot import snapshot_fixture\n\ntiny = snapshot_fixture('org/tiny')\n")
    return copy_cache(scratch, tmp_path / "layer", "no-links")


@ALL
def test_the_summary_row_and_the_header_name_the_layer(
    pytester: pytest.Pytester, local_hub: LocalHub, layer: Path
) -> None:
    pytester.makepyfile(USES_TINY)

    result = pytester.runpytest(f"--hf-cache-dir={local_hub.cache_dir}", f"--hf-cache-layer={layer}")

    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"hfsnapshot: cache={local_hub.cache_dir} endpoint=* layers={layer}",
            "*= hf snapshots =*",
            f"org/tiny@main  * 3 files  128.0 KiB  layer  *s  lock wait *s  from layer {layer}",
        ]
    )
    assert transfers(local_hub) == 0


@ALL
def test_xdist_workers_share_the_layer(pytester: pytest.Pytester, local_hub: LocalHub, layer: Path) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(
        USES_TINY + "".join(f"\n\ndef test_{n}(tiny):\n    assert tiny.source == 'layer'\n" for n in range(4))
    )

    result = pytester.runpytest_subprocess(
        f"--hf-cache-dir={local_hub.cache_dir}", f"--hf-cache-layer={layer}", "-n", "2", "-p", "no:cacheprovider"
    )

    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines([f"org/tiny@main  * 3 files  128.0 KiB  layer  *from layer {layer}"])
    assert transfers(local_hub) == 0


@ALL
def test_a_prefetch_only_run_fetches_nothing_the_layer_holds(
    pytester: pytest.Pytester, local_hub: LocalHub, layer: Path
) -> None:
    pytester.makepyfile(USES_TINY)
    manifest = pytester.path / "manifest.json"

    result = pytester.runpytest(
        f"--hf-cache-dir={local_hub.cache_dir}",
        f"--hf-cache-layer={layer}",
        "--hf-prefetch-only",
        f"--hf-manifest={manifest}",
    )

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["hfsnapshot: [[]1/1] org/tiny@main ready (layer, 3 files, 128.0 KiB, *s)"])
    assert transfers(local_hub) == 0
    assert manifest.is_file()


@ALL
@pytest.mark.skipif(not can_fuse(), reason="needs root, /dev/fuse, rclone and fusermount")
def test_a_mount_unmounted_mid_session_warns_once_and_the_tests_pass(
    pytester: pytest.Pytester,
    local_hub: LocalHub,
    mounted: tuple[Path, Path, subprocess.Popen[bytes]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, point, _ = mounted
    monkeypatch.setenv("LAYER_MOUNT", str(point))
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny = snapshot_fixture("org/tiny")
        tiny_json = snapshot_fixture("org/tiny", allow_patterns=["*.json"])
        tiny_weights = snapshot_fixture("org/tiny", allow_patterns=["*.safetensors"])
        """
    )
    pytester.makepyfile(
        """
        import os, subprocess

        def test_1_from_the_layer(tiny):
            assert tiny.source == "layer"

        def test_2_the_mount_goes(tiny):
            subprocess.run(["fusermount", "-u", "-z", os.environ["LAYER_MOUNT"]], check=True)

        def test_3_json(tiny_json):
            assert tiny_json.source == "repair"

        def test_4_weights(tiny_weights):
            assert tiny_weights.source == "repair"
            assert (tiny_weights / "model.safetensors").stat().st_size == 128 * 1024
        """
    )

    result = pytester.runpytest(f"--hf-cache-dir={local_hub.cache_dir}", f"--hf-cache-layer={root}")

    result.assert_outcomes(passed=4, warnings=1)
    assert result.stdout.str().count(f"the cache layer {root} failed") == 1
    cause = "it is no longer mounted*" if root == point else "No such file or directory)*"
    result.stdout.fnmatch_lines([f"*HfSnapshotWarning: hfsnapshot: the cache layer {root} failed ({cause}"])
