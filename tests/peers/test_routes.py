"""CONTRACT section 9, edge cases: the routes real suites take into the Hub, in every mode.

Each test writes a small suite in the style of the library it is about (transformers' probe of an
absent file, ``datasets.load_dataset``, vLLM's weight loader) and runs it in a fresh pytest process
against the local Hub, with the peer suite's helpers (:mod:`.test_modes`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot.testing.hub import LocalHub

# Imported once by this process: pytester drops the modules a test imported, and datasets registers
# its pyarrow types at import, once per process.
pytest.importorskip("datasets")

from .test_modes import (
    RUN_TIMEOUT,
    SCRIPT,
    Key,
    cache_folder,
    fetched_files,
    implicit_entries,
    junit_failures,
    key,
    obtained,
    prefetch,
    run,
    summary_rows,
    write_pins,
)


def assert_cached(
    hub: LocalHub, snapshot: Key, entry: Mapping[str, Any], contents: Mapping[str, str], encoding: str = "utf-8"
) -> None:
    """``refs/main`` names the entry's commit, its files hold the Hub's bytes, its missing paths are marked."""
    folder = cache_folder(hub, snapshot)
    commit = entry["commit"]
    assert (folder / "refs" / "main").read_text() == commit, snapshot
    for path in entry["files"]:
        cached = (folder / "snapshots" / commit / path).read_text(encoding=encoding)
        assert cached == contents[path], f"{snapshot} {path}"
    for path in entry.get("missing", ()):
        assert (folder / ".no_exist" / commit / path).is_file(), f"no .no_exist marker for {snapshot} {path}"


# --- an entry that obtained no file -------------------------------------------------------------------

PROBED = "peers/probed"
#: transformers' test_non_existence_is_cached: an absent optional file, asked online and from the cache.
PROBE_SUITE = f"""
    from transformers.utils import cached_file

    def test_non_existence_is_cached():
        assert cached_file("{PROBED}", "conf", _raise_exceptions_for_missing_entries=False) is None
        # Then from the cache alone: the marker huggingface_hub left for the absent file answers.
        assert cached_file(
            "{PROBED}", "conf", local_files_only=True, _raise_exceptions_for_missing_entries=False
        ) is None
    """


@pytest.mark.parametrize("how", ["pytest", "cli"])
def test_an_entry_that_obtained_no_file_is_prefetched_then_served_offline(
    pytester: pytest.Pytester, local_hub: LocalHub, how: str
) -> None:
    commit = local_hub.add_repo(PROBED, {"config.json": "{}"})
    pytester.makepyfile(test_probe=PROBE_SUITE)
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=1)
    pins_file = pytester.path / "pins.json"
    (entry,) = json.loads(pins_file.read_text())
    assert (entry["commit"], entry["files"], entry["missing"]) == (commit, [], ["conf"]), entry
    folder = cache_folder(local_hub, key(PROBED))
    shutil.rmtree(folder)

    code, output = prefetch(how, pytester, local_hub, pins_file)

    assert code == 0, output
    assert (folder / "refs" / "main").read_text() == commit
    assert (folder / ".no_exist" / commit / "conf").is_file()
    local_hub.reset_counters()
    offline = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json")

    offline.assert_outcomes(passed=1)
    assert local_hub.requests == []


# --- a refused use ----------------------------------------------------------------------------------------

GATED_SUITE = """
    import pytest
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import GatedRepoError

    def test_gated():
        with pytest.raises(GatedRepoError):
            hf_hub_download("peers/gated", "config.json")

    def test_open():
        assert open(hf_hub_download("peers/open", "config.json")).read() == "{}"
    """


def test_a_refused_use_is_pinned_with_no_commit_and_every_reader_takes_it(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    local_hub.add_repo("peers/gated", {"config.json": "{}"}, gated=True)
    local_hub.add_repo("peers/open", {"config.json": "{}"})
    pytester.makepyfile(test_gated=GATED_SUITE)
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=2)
    pins_file = pytester.path / "pins.json"
    gated = next(e for e in json.loads(pins_file.read_text()) if e["repo_id"] == "peers/gated")
    assert gated == {"files": [], "refused": "GatedRepo", "repo_id": "peers/gated", "repo_type": "model",
                     "revision": "main"}  # fmt: skip
    shutil.rmtree(cache_folder(local_hub, key("peers/open")))

    prefetch = run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json")
    cli = [SCRIPT, "prefetch", "--pins", str(pins_file), "--cache-dir", str(local_hub.cache_dir)]
    prefetched = subprocess.run(cli, cwd=pytester.path, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    checked = subprocess.run(
        [SCRIPT, "pins", "check", str(pins_file)],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )

    assert prefetch.ret == 0, prefetch.stdout.str()
    assert prefetched.returncode == 0, prefetched.stdout + prefetched.stderr
    assert checked.returncode == 0, checked.stdout + checked.stderr
    local_hub.reset_counters()
    offline = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json", "--hf-implicit=fail")
    offline.assert_outcomes(passed=2)
    assert local_hub.requests == []


# --- datasets.load_dataset ----------------------------------------------------------------------------

TABLE = "peers/tiny-table"
ROWS = 100_000
#: 1.3 MB of rows, an LFS file (Xet-backed on the local Hub, which stores files of 1 MiB or more as
#: LFS), and a small file beside it.
TABLE_FILES = {
    "README.md": "---\nlicense: mit\n---\n# tiny-table\n",
    "data/train.csv": "text,label\n" + "".join(f"row {i:06d},{i % 2}\n" for i in range(ROWS)),
    "data/test.csv": "text,label\na test,1\n",
}
DATASETS_SUITE = f"""
    import datasets

    def test_load_dataset():
        loaded = datasets.load_dataset("{TABLE}")
        assert loaded["train"]["text"] == [f"row {{i:06d}}" for i in range({ROWS})]
        assert loaded["test"]["text"] == ["a test"]
    """


@pytest.fixture
def table(local_hub: LocalHub, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> str:
    """The dataset repo on the Hub, the suite that loads it, and datasets' own cache in the test's folder."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(pytester.path / "datasets-cache"))
    pytester.makepyfile(test_table=DATASETS_SUITE)
    return local_hub.add_repo(TABLE, TABLE_FILES, repo_type="dataset")


def fresh_datasets_cache(pytester: pytest.Pytester) -> None:
    """datasets keeps the tables it built: a run after this one reads the Hub's files again."""
    shutil.rmtree(pytester.path / "datasets-cache", ignore_errors=True)


@pytest.mark.transports("xet", "http")
def test_load_dataset_is_recorded_prefetched_and_served_offline(
    pytester: pytest.Pytester, local_hub: LocalHub, table: str
) -> None:
    run(pytester, local_hub, "--hf-pins=pins.json", "--hf-update-pins").assert_outcomes(passed=1)
    assert local_hub.cache_dir is not None
    left = obtained(local_hub.cache_dir)[key(TABLE, "dataset")]
    recorded = implicit_entries(pytester.path / "pins.json")[key(TABLE, "dataset")]
    assert recorded == left, "the pin file records what huggingface_hub left in the cache"
    assert recorded["commit"] == table and recorded["files"] == sorted(TABLE_FILES), recorded
    shutil.rmtree(cache_folder(local_hub, key(TABLE, "dataset")))
    fresh_datasets_cache(pytester)

    assert run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json").ret == 0
    assert_cached(local_hub, key(TABLE, "dataset"), recorded, TABLE_FILES)
    local_hub.reset_counters()
    offline = run(pytester, local_hub, "--hf-offline", "--hf-pins=pins.json")

    offline.assert_outcomes(passed=1)
    assert local_hub.requests == []


@pytest.mark.transports("xet", "http")
def test_load_dataset_is_managed_under_faults(pytester: pytest.Pytester, local_hub: LocalHub, table: str) -> None:
    train, test = f"*/{TABLE}/resolve/*/data/train.csv", f"*/{TABLE}/resolve/*/data/test.csv"
    local_hub.fail(train, 503)
    local_hub.cut(train, 4096)
    local_hub.corrupt(train)
    local_hub.corrupt(test)

    result = run(pytester, local_hub, "--hf-implicit=manage")

    result.assert_outcomes(passed=1)
    assert local_hub.pending_faults() == []
    assert_cached(local_hub, key(TABLE, "dataset"), {"commit": table, "files": sorted(TABLE_FILES)}, TABLE_FILES)


# --- vLLM's weight loader -----------------------------------------------------------------------------

SERVED = "peers/tiny-served"
SERVED_FILES = {
    "config.json": '{"model_type": "bert"}',
    "model-00001-of-00002.safetensors": "\x11" * 65536,
    "model-00002-of-00002.safetensors": "\x12" * 49152,
    "model.safetensors.index.json": '{"weight_map": {"a": "model-00001-of-00002.safetensors"}}',
    # Never loaded: no pattern of vLLM's selects it (a prefetch of what was recorded must not fetch it).
    "tf_model.h5": "\x13" * 32768,
}
#: The files the loader obtains, and what huggingface_hub marks absent for it (nothing).
SERVED_LOADED = sorted(p for p in SERVED_FILES if p.endswith((".safetensors", ".index.json")))
#: vLLM's model_executor/model_loader/weight_utils.py as it loads weights, in a worker thread as its
#: engine does; the glob variant lists even offline (as vLLM's tokenizer and repo helpers do).
VLLM_SUITE = f"""
    import fnmatch, os, tempfile
    from concurrent.futures import ThreadPoolExecutor

    import filelock
    import huggingface_hub.constants
    import pytest
    from huggingface_hub import HfFileSystem, hf_hub_download, snapshot_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    MODEL = "{SERVED}"
    EXPECTED = {SERVED_FILES!r}

    def get_lock(model_name_or_path, cache_dir=None):
        lock_dir = cache_dir or tempfile.gettempdir()
        return filelock.FileLock(os.path.join(lock_dir, model_name_or_path.replace("/", "-") + ".lock"), mode=0o666)

    def list_weights(model, allow_patterns, listing):
        fs = HfFileSystem()
        if listing == "ls":
            file_list = fs.ls(model, detail=False)
        else:
            file_list = fs.glob(model + "/*")
        for pattern in allow_patterns:
            if fnmatch.filter(file_list, pattern):
                return [pattern]
        return allow_patterns

    def download_weights_from_hf(model, allow_patterns, listing):
        local_only = huggingface_hub.constants.HF_HUB_OFFLINE
        if not local_only or listing == "glob":
            allow_patterns = list_weights(model, allow_patterns, listing)
        with get_lock(model):
            return snapshot_download(model, allow_patterns=allow_patterns, local_files_only=local_only)

    def download_safetensors_index_file_from_hf(model, index_file):
        with get_lock(model):
            try:
                hf_hub_download(repo_id=model, filename=index_file)
            except LocalEntryNotFoundError:
                pass
            except EntryNotFoundError:
                pass

    def load(listing):
        folder = download_weights_from_hf(MODEL, ["*.safetensors", "*.bin", "*.pt"], listing)
        download_safetensors_index_file_from_hf(MODEL, "model.safetensors.index.json")
        return folder

    @pytest.mark.parametrize("listing", ["ls", "glob"])
    def test_engine_loads_weights(listing):
        with ThreadPoolExecutor(1) as engine:
            folder = engine.submit(load, listing).result()
        for path in {SERVED_LOADED!r}:
            assert open(os.path.join(folder, path), encoding="latin-1").read() == EXPECTED[path], path
        assert not os.path.exists(os.path.join(folder, "tf_model.h5"))
    """
SERVED_TESTS = {f"test_served.py::test_engine_loads_weights[{listing}]" for listing in ("ls", "glob")}


@pytest.fixture
def served(local_hub: LocalHub, pytester: pytest.Pytester) -> str:
    pytester.makepyfile(test_served=VLLM_SUITE)
    return local_hub.add_repo(SERVED, {p: c.encode("latin-1") for p, c in SERVED_FILES.items()})


def served_entry(commit: str) -> dict[str, Any]:
    return {"commit": commit, "files": SERVED_LOADED}


def served_pins(path: Path, commit: str) -> Path:
    return write_pins(path, [{"repo_id": SERVED, "repo_type": "model", "revision": "main", **served_entry(commit)}])


def assert_served_cached(hub: LocalHub, commit: str) -> None:
    assert_cached(hub, key(SERVED), served_entry(commit), {p: c for p, c in SERVED_FILES.items()}, "latin-1")


@pytest.mark.transports("xet", "http")
def test_vllm_loader_is_recorded_under_xdist_prefetched_and_served_offline(
    pytester: pytest.Pytester, local_hub: LocalHub, served: str
) -> None:
    recording = run(pytester, local_hub, "-n", "2", "--hf-pins=pins.json", "--hf-update-pins")

    recording.assert_outcomes(passed=2)
    assert local_hub.cache_dir is not None
    assert implicit_entries(pytester.path / "pins.json")[key(SERVED)] == served_entry(served)
    assert obtained(local_hub.cache_dir)[key(SERVED)] == served_entry(served), "recorded as huggingface_hub left it"
    row = summary_rows(recording.stdout.str())[f"{SERVED}@main {served[:12]}"]
    assert (row.files, row.tests) == (len(SERVED_LOADED), 2) and row.first in SERVED_TESTS, row
    shutil.rmtree(local_hub.cache_dir)  # the shared blob store included
    local_hub.cache_dir.mkdir()
    local_hub.reset_counters()

    assert run(pytester, local_hub, "--hf-prefetch-only", "--hf-pins=pins.json").ret == 0
    assert fetched_files(local_hub) == {f"/{SERVED}/resolve/{served}/{path}": 1 for path in SERVED_LOADED}
    assert_served_cached(local_hub, served)
    local_hub.reset_counters()
    offline = run(pytester, local_hub, "-n", "2", "--hf-offline", "--hf-pins=pins.json")

    offline.assert_outcomes(passed=2)
    assert local_hub.requests == []


@pytest.mark.transports("xet", "http")
def test_vllm_loader_is_managed_under_faults_then_warm_with_pins(
    pytester: pytest.Pytester, local_hub: LocalHub, served: str
) -> None:
    first, second = (f"*/{SERVED}/resolve/*/model-0000{n}-of-00002.safetensors" for n in (1, 2))
    local_hub.fail(first, 503)
    local_hub.cut(second, 4096)
    local_hub.corrupt(first)
    local_hub.corrupt(f"*/{SERVED}/resolve/*/model.safetensors.index.json")

    cold = run(pytester, local_hub, "-n", "2", "--hf-implicit=manage")

    cold.assert_outcomes(passed=2)
    assert local_hub.pending_faults() == []
    assert_served_cached(local_hub, served)
    assert local_hub.served("*/tf_model.h5") == 0
    served_pins(pytester.path / "pins.json", served)
    local_hub.reset_counters()
    warm = run(pytester, local_hub, "--hf-implicit=manage", "--hf-pins=pins.json")

    warm.assert_outcomes(passed=2)
    assert [r for r in local_hub.requests if "/main" in r[1]] == [], "a request named the pinned branch"
    assert [r for r in local_hub.requests if "/resolve/" in r[1]] == [], "a pinned file verified in the cache"


def test_vllm_loader_fails_unlisted_then_passes_listed(
    pytester: pytest.Pytester, local_hub: LocalHub, served: str
) -> None:
    write_pins(pytester.path / "empty.json", [])

    unlisted = run(pytester, local_hub, "--hf-implicit=fail", "--hf-pins=empty.json", "--junitxml=report.xml")

    unlisted.assert_outcomes(failed=2)
    failures = junit_failures(pytester.path / "report.xml")
    assert set(failures) == SERVED_TESTS
    assert all(f"{SERVED}@main" in text and "--hf-update-pins" in text for text in failures.values()), failures
    served_pins(pytester.path / "pins.json", served)
    run(pytester, local_hub, "--hf-implicit=fail", "--hf-pins=pins.json").assert_outcomes(passed=2)
