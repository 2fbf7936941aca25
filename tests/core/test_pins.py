"""Pin files: reading and validating them, writing updates, `materialize(pins=...)` and `pytest-hfsnapshot pins`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_hfsnapshot import InvalidRequestError, OfflineMissingError, RevisionNotFoundError, materialize
from pytest_hfsnapshot.core.cache import pins
from pytest_hfsnapshot.core.cache.layout import own_dir
from pytest_hfsnapshot.core.engine import manifest
from pytest_hfsnapshot.request import SnapshotRequest
from pytest_hfsnapshot.snapshot import Snapshot
from pytest_hfsnapshot.testing.hub import LocalHub

from .test_cli import NO_PYTEST

A = "a" * 40
B = "b" * 40
C = "c" * 40
FILES: dict[str, bytes | str] = {"config.json": "{}", "model.safetensors": b"\x07" * 4096}
NEWER: dict[str, bytes | str] = {"config.json": '{"v": 2}', "model.safetensors": b"\x08" * 4096}
SCRIPT = str(Path(sys.executable).with_name("pytest-hfsnapshot"))
RUN_CLI = NO_PYTEST + "import runpy; runpy.run_module('pytest_hfsnapshot', run_name='__main__', alter_sys=True)"


def entry(repo_id: str, commit: str, revision: str = "main", repo_type: str = "model", **extra: Any) -> dict[str, Any]:
    return {"repo_id": repo_id, "repo_type": repo_type, "revision": revision, "commit": commit, **extra}


def write_pins(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    return path


def cli(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=120, env=env)


# --- reading ------------------------------------------------------------------------------------


def test_a_pin_is_its_repo_type_repo_and_revision_whatever_the_patterns(tmp_path: Path) -> None:
    path = write_pins(
        tmp_path / "pins.json",
        [entry("org/tiny", A), entry("org/tiny", B, revision="v1"), entry("org/corpus", C, repo_type="dataset")],
    )
    pin_file = pins.read(path)
    assert pin_file.commit_for(SnapshotRequest.build("org/tiny")) == A
    assert pin_file.commit_for(SnapshotRequest.build("org/tiny", allow_patterns="*.json", metadata_only=True)) == A
    assert pin_file.commit_for(SnapshotRequest.build("org/tiny", revision="v1")) == B
    assert pin_file.commit_for(SnapshotRequest.build("org/corpus", repo_type="dataset")) == C
    assert pin_file.commit_for(SnapshotRequest.build("org/corpus")) is None  # a model of that name is not pinned
    assert pin_file.commit_for(SnapshotRequest.build("org/tiny", revision="dev")) is None
    assert [pin.label for pin in pin_file.branches()] == ["datasets/org/corpus@main", "org/tiny@main", "org/tiny@v1"]


def test_a_manifest_is_a_pin_file(tmp_path: Path) -> None:
    def pair(request: SnapshotRequest, commit: str, files: tuple[str, ...]) -> tuple[SnapshotRequest, Snapshot]:
        snap = Snapshot(tmp_path, request.repo_id, request.repo_type, request.revision, commit, files, 10, "download")
        return request, snap

    path = tmp_path / "hf-manifest.json"
    manifest.write(
        path,
        [
            pair(SnapshotRequest.build("org/tiny"), A, ("config.json", "model.safetensors")),
            pair(SnapshotRequest.build("org/tiny", allow_patterns="*.json"), A, ("config.json",)),
            pair(SnapshotRequest.build("org/corpus", repo_type="dataset"), C, ("README.md",)),
            pair(SnapshotRequest.build("org/fixed", revision=B), B, ("config.json",)),
        ],
    )
    pin_file = pins.read(path)
    assert len(pin_file.entries) == 4 and len(pin_file.pins) == 3  # two selections of org/tiny@main: one pin
    assert pin_file.commit_for(SnapshotRequest.build("org/tiny", ignore_patterns="*.bin")) == A
    assert pin_file.commit_for(SnapshotRequest.build("org/fixed", revision=B)) == B
    assert [pin.label for pin in pin_file.branches()] == ["datasets/org/corpus@main", "org/tiny@main"]


MALFORMED = [
    pytest.param("[{oops", ["is not JSON (Expecting property name"], id="not-json"),
    pytest.param("", ["is not JSON"], id="empty"),
    pytest.param('{"repo_id": "org/tiny"}', ["holds a JSON object, not a list"], id="not-a-list"),
    pytest.param('["org/tiny@main"]', ['entry 1: a JSON string ("org/tiny@main"), not an object'], id="not-an-object"),
    *(
        pytest.param(
            json.dumps([{k: v for k, v in entry("org/tiny", A).items() if k != missing}]),
            ["entry 1 (", f"the key '{missing}' is missing"],
            id=f"missing-{missing}",
        )
        for missing in pins.KEYS
    ),
    pytest.param(
        json.dumps([entry("org/tiny", A), entry("org/tiny", "abc123")]),
        ["entry 2 (org/tiny@main): commit 'abc123' is not a commit id (40 lowercase hex digits)"],
        id="short-commit",
    ),
    pytest.param(
        json.dumps([entry("org/tiny", "A" * 40)]),
        ["entry 1 (org/tiny@main): commit 'AAAA"],
        id="uppercase-commit",
    ),
    pytest.param(
        json.dumps([entry("org/tiny", A, revision=B)]),
        [f"entry 1 (org/tiny@{B}): the revision is itself a commit id, but the entry pins it to another commit ({A})"],
        id="commit-revision-with-another-commit",
    ),
    pytest.param(
        json.dumps([entry("org/tiny", A), entry("org/other", C), entry("org/tiny", B, files=["config.json"])]),
        [f"entries 1 and 3: both pin org/tiny@main, to different commits ({A} and {B})"],
        id="two-commits-for-one-pin",
    ),
    pytest.param(
        json.dumps([entry("org/data", A, repo_type="dataset"), entry("org/data", B, repo_type="dataset")]),
        ["entries 1 and 2: both pin datasets/org/data@main"],
        id="two-commits-for-one-dataset-pin",
    ),
    pytest.param(
        json.dumps([entry("org/tiny", A, repo_type="notebook")]),
        ["entry 1 (org/tiny@main): Unknown repo_type 'notebook'"],
        id="repo-type",
    ),
    pytest.param(json.dumps([entry("not a repo!", A)]), ["entry 1 (not a repo!@main): Invalid repo id"], id="repo-id"),
    pytest.param(json.dumps([entry("org/tiny", A, revision="../x")]), ["Invalid revision '../x'"], id="revision"),
    pytest.param(json.dumps([entry("org/tiny", A, revision=3)]), ["revision must be a string, got 3"], id="not-a-str"),
]


@pytest.mark.parametrize(("text", "expected"), MALFORMED)
def test_a_malformed_pin_file_names_the_file_and_the_entry(tmp_path: Path, text: str, expected: list[str]) -> None:
    path = tmp_path / "pins.json"
    path.write_text(text)
    with pytest.raises(InvalidRequestError) as raised:
        pins.read(path)
    message = str(raised.value)
    assert message.startswith(f"Pin file {path}")
    for part in expected:
        assert part in message


def test_entries_differing_only_in_their_files_are_one_pin(tmp_path: Path) -> None:
    path = write_pins(
        tmp_path / "pins.json",
        [entry("org/tiny", A, files=["config.json"], size=2), entry("org/tiny", A, files=["a", "b"], size=9)],
    )
    assert len(pins.read(path).pins) == 1


def test_a_missing_pin_file(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidRequestError, match=r"does not exist: write it with `pytest --hf-pins=.*--hf-update-pins`"
    ):
        pins.read(tmp_path / "pins.json")
    assert pins.read(tmp_path / "pins.json", missing_ok=True).pins == {}


def test_load_reads_a_file_again_once_it_changed(tmp_path: Path) -> None:
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", A)])
    first = pins.load(path)
    assert pins.load(path) is first
    write_pins(tmp_path / "pins.json.new", [entry("org/tiny", B)]).replace(path)
    assert pins.load(path).commit_for(SnapshotRequest.build("org/tiny")) == B


# --- updating -----------------------------------------------------------------------------------


def test_an_update_moves_adds_and_keeps(tmp_path: Path) -> None:
    unused = entry("org/unused", C, revision="v2", note="kept as it is")
    manifest_entries = [
        entry("org/steady", A, files=["config.json", "w.bin"], size=9),
        entry("org/steady", A, files=["config.json"], size=2),
    ]
    path = write_pins(
        tmp_path / "pins.json", [entry("org/tiny", A), *manifest_entries, unused, entry("org/fixed", B, revision=B)]
    )
    update = pins.read(path).updated(
        {
            ("model", "org/tiny", "main"): B,
            ("model", "org/steady", "main"): A,
            ("dataset", "org/new", "main"): C,
            ("model", "org/by-commit", A): A,  # a commit id needs no pin
        }
    )
    assert [move.line() for move in update.moved] == [f"org/tiny@main: {A[:12]} -> {B[:12]}"]
    assert [pin.label for pin in update.added] == ["datasets/org/new@main"]
    assert update.unchanged == 3
    assert list(update.entries) == [
        entry("org/new", C, repo_type="dataset"),
        entry("org/fixed", B, revision=B),
        *manifest_entries,  # a pin that did not move keeps its entries, in their order
        entry("org/tiny", B),
        unused,
    ]
    text = update.render()
    assert text == json.dumps(list(update.entries), indent=2, sort_keys=True) + "\n"
    assert pins.write(path, update)
    assert path.read_text() == text
    assert pins.read(path).updated({("model", "org/tiny", "main"): B}).moved == ()


def test_a_moved_manifest_pin_becomes_one_entry(tmp_path: Path) -> None:
    path = write_pins(
        tmp_path / "pins.json", [entry("org/tiny", A, files=["a"], size=1), entry("org/tiny", A, files=["b"], size=2)]
    )
    update = pins.read(path).updated({("model", "org/tiny", "main"): B})
    assert list(update.entries) == [entry("org/tiny", B)]


def test_the_same_pins_give_the_same_bytes(tmp_path: Path) -> None:
    path = write_pins(tmp_path / "pins.json", [entry("org/z", A), entry("org/a", B)])
    commits = {("model", "org/m", "main"): C, ("model", "org/z", "main"): B, ("space", "org/s", "main"): A}
    first = pins.read(path).updated(commits).render()
    second = pins.read(path).updated(dict(reversed(list(commits.items())))).render()
    assert first == second
    assert [(e["repo_type"], e["repo_id"]) for e in json.loads(first)] == [
        ("model", "org/a"),
        ("model", "org/m"),
        ("model", "org/z"),
        ("space", "org/s"),
    ]
    assert first.endswith("]\n") and "\r" not in first


def test_writing_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", A)])
    before = path.read_bytes()
    update = pins.read(path).updated({("model", "org/tiny", "main"): B})

    def interrupted(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(OSError, match="No space left"):
        pins.write(path, update)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pins.json"]  # no temporary file left
    monkeypatch.undo()
    inode = path.stat().st_ino
    assert pins.write(path, update)
    assert path.stat().st_ino != inode  # a new file renamed over the old one, never rewritten in place
    assert pins.read(path).commit_for(SnapshotRequest.build("org/tiny")) == B
    mtime = path.stat().st_mtime_ns
    assert not pins.write(path, update)  # the same bytes: left untouched
    assert path.stat().st_mtime_ns == mtime


# --- materialize(pins=...) ----------------------------------------------------------------------


@pytest.fixture
def moved(local_hub: LocalHub) -> tuple[str, str]:
    """org/tiny with two commits on main: (the older, pinned one; the one main points at now)."""
    old = local_hub.add_repo("org/tiny", FILES)
    return old, local_hub.add_repo("org/tiny", NEWER)


@pytest.mark.transports("xet")
def test_a_pinned_branch_resolves_to_its_commit_without_a_request(
    local_hub: LocalHub, moved: tuple[str, str], tmp_path: Path
) -> None:
    old, new = moved
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", old)])
    snap = materialize("org/tiny", pins=path)
    assert snap.commit == old and snap.revision == "main"
    assert (snap / "config.json").read_text() == "{}"
    json_only = materialize("org/tiny", allow_patterns="*.json", pins=str(path))
    assert json_only.commit == old
    assert local_hub.request_count("*/revision/*") == 0
    assert materialize("org/tiny").commit == new  # without the pin file: what main points at now
    assert local_hub.request_count("*/revision/*") == 1


@pytest.mark.transports("xet", "xet-noshare", "http")
def test_offline_with_pins_needs_no_revision_record(
    local_hub: LocalHub, moved: tuple[str, str], tmp_path: Path
) -> None:
    old, _ = moved
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", old)])
    materialize("org/tiny", pins=path)
    # Neither the client's ref nor any resolution of ours is left: only the pin says what main is.
    shutil.rmtree(local_hub.cache_dir / "models--org--tiny" / "refs")
    shutil.rmtree(own_dir(local_hub.cache_dir) / "resolutions", ignore_errors=True)
    local_hub.reset_counters()
    snap = materialize("org/tiny", pins=path, offline=True, verify="sha256")
    assert snap.commit == old and snap.source == "cache"
    assert (snap / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    assert local_hub.requests == []
    with pytest.raises(OfflineMissingError, match="no usable refs/main"):
        materialize("org/tiny", offline=True)


@pytest.mark.transports("xet")
def test_a_pinned_commit_the_hub_does_not_have(local_hub: LocalHub, moved: tuple[str, str], tmp_path: Path) -> None:
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", C)])
    with pytest.raises(RevisionNotFoundError) as raised:
        materialize("org/tiny", pins=path)
    message = str(raised.value)
    for part in (str(path), "org/tiny@main", C, "--hf-update-pins", f"pytest-hfsnapshot pins update {path}"):
        assert part in message
    assert local_hub.request_count("*/revision/*") == 0


@pytest.mark.transports("xet")
def test_materialize_with_a_malformed_pin_file(local_hub: LocalHub, tmp_path: Path) -> None:
    path = tmp_path / "pins.json"
    path.write_text("[1]")
    with pytest.raises(InvalidRequestError, match=r"Pin file .*pins\.json, entry 1: a JSON number"):
        materialize("org/tiny", pins=path)
    with pytest.raises(InvalidRequestError, match=r"pins=3 is not valid: give the path of a pin file, or None"):
        materialize("org/tiny", pins=3)  # type: ignore[arg-type]
    assert local_hub.requests == []


# --- pytest-hfsnapshot pins check / update --------------------------------------------------------


@pytest.fixture
def hub_pins(local_hub: LocalHub, tmp_path: Path) -> dict[str, str]:
    """A pin file of three pins (one of a commit id) that all hold; returns the commits by name."""
    commits = {
        "tiny": local_hub.add_repo("org/tiny", FILES),
        "corpus": local_hub.add_repo("org/corpus", {"README.md": "# c"}, repo_type="dataset"),
        "tagged": local_hub.add_repo("org/tagged", FILES, tag="v1"),
    }
    write_pins(
        tmp_path / "pins.json",
        [
            entry("org/corpus", commits["corpus"], repo_type="dataset"),
            entry("org/tagged", commits["tagged"], revision="v1", note="by hand"),
            entry("org/tiny", commits["tiny"], files=["config.json"], size=2),
            entry("org/tiny", commits["tiny"], revision=commits["tiny"]),
        ],
    )
    return commits


@pytest.mark.transports("xet")
def test_pins_check_and_update(local_hub: LocalHub, tmp_path: Path, hub_pins: dict[str, str]) -> None:
    path = tmp_path / "pins.json"
    done = cli(tmp_path, SCRIPT, "pins", "check", "pins.json")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert "no pin moved" in done.stderr
    assert local_hub.request_count("*/revision/*") == 3  # the branches and the tag, not the commit id

    tiny = local_hub.add_repo("org/tiny", NEWER)
    corpus = local_hub.add_repo("org/corpus", {"README.md": "# c2"}, repo_type="dataset")
    before = path.read_bytes()
    lines = [
        f"datasets/org/corpus@main: {hub_pins['corpus'][:12]} -> {corpus[:12]}",
        f"org/tiny@main: {hub_pins['tiny'][:12]} -> {tiny[:12]}",
    ]
    done = cli(tmp_path, SCRIPT, "pins", "check", str(path))
    assert (done.returncode, done.stdout.splitlines()) == (1, lines), done.stderr
    assert f"2 of 3 pins moved in {path}" in done.stderr
    assert path.read_bytes() == before  # a check writes nothing

    done = cli(tmp_path, sys.executable, "-m", "pytest_hfsnapshot", "pins", "update", "pins.json")
    assert (done.returncode, done.stdout.splitlines()) == (0, lines), done.stderr
    data = json.loads(path.read_text())
    assert data == [
        entry("org/corpus", corpus, repo_type="dataset"),
        entry("org/tagged", hub_pins["tagged"], revision="v1", note="by hand"),
        entry("org/tiny", hub_pins["tiny"], revision=hub_pins["tiny"]),
        entry("org/tiny", tiny),
    ]
    assert path.read_text() == pins.render(data)
    done = cli(tmp_path, SCRIPT, "pins", "check", "pins.json")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    after = path.read_bytes()
    done = cli(tmp_path, SCRIPT, "pins", "update", "pins.json")
    assert (done.returncode, done.stdout) == (0, "") and path.read_bytes() == after


@pytest.mark.transports("xet")
def test_pins_commands_work_where_pytest_cannot_be_imported(
    local_hub: LocalHub, tmp_path: Path, hub_pins: dict[str, str]
) -> None:
    tiny = local_hub.add_repo("org/tiny", NEWER)
    line = f"org/tiny@main: {hub_pins['tiny'][:12]} -> {tiny[:12]}"
    done = cli(tmp_path, sys.executable, "-c", RUN_CLI, "pins", "check", "pins.json")
    assert (done.returncode, done.stdout.splitlines()) == (1, [line]), done.stderr
    done = cli(tmp_path, sys.executable, "-c", RUN_CLI, "pins", "update", "pins.json")
    assert (done.returncode, done.stdout.splitlines()) == (0, [line]), done.stderr
    assert pins.read(tmp_path / "pins.json").commit_for(SnapshotRequest.build("org/tiny")) == tiny


@pytest.mark.transports("xet")
@pytest.mark.parametrize("command", ["check", "update"])
def test_pins_commands_on_a_malformed_file_exit_2(local_hub: LocalHub, tmp_path: Path, command: str) -> None:
    path = write_pins(tmp_path / "pins.json", [entry("org/tiny", A), entry("org/tiny", B)])
    before = path.read_bytes()
    done = cli(tmp_path, SCRIPT, "pins", command, "pins.json")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"Pin file {path}, entries 1 and 2: both pin org/tiny@main" in done.stderr
    assert path.read_bytes() == before
    done = cli(tmp_path, SCRIPT, "pins", command, "absent.json")
    assert done.returncode == 2 and "absent.json does not exist" in done.stderr
    assert local_hub.requests == []


@pytest.mark.transports("xet")
@pytest.mark.parametrize("command", ["check", "update"])
def test_pins_commands_with_the_hub_unreachable_exit_2(
    local_hub: LocalHub, tmp_path: Path, hub_pins: dict[str, str], command: str
) -> None:
    path = tmp_path / "pins.json"
    before = path.read_bytes()
    local_hub.fail("*/revision/*", 503, times=100)
    done = cli(tmp_path, SCRIPT, "pins", command, "pins.json", "--retries", "1")
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "could not ask the Hub what datasets/org/corpus@main points at: Gave up on the revision" in done.stderr
    assert path.read_bytes() == before
    # One repo's give-up tells the command the Hub is down: the others are not asked again and again.
    assert local_hub.request_count("*/revision/*") == 2


@pytest.mark.transports("xet")
def test_pins_commands_retry_and_wait_out_a_rate_limit(
    local_hub: LocalHub, tmp_path: Path, hub_pins: dict[str, str]
) -> None:
    local_hub.fail("*/org/tiny/revision/*", 503)
    local_hub.fail("*/org/corpus/revision/*", 429, retry_after=1)
    done = cli(tmp_path, SCRIPT, "pins", "check", "pins.json")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    assert local_hub.pending_faults() == []
    assert local_hub.request_count("*/revision/*") == 5


@pytest.mark.transports("xet")
def test_pins_update_never_writes_the_token(local_hub: LocalHub, tmp_path: Path) -> None:
    old = local_hub.add_repo("org/secret", FILES, private=True)
    write_pins(tmp_path / "pins.json", [entry("org/secret", old)])
    new = local_hub.add_repo("org/secret", NEWER, private=True)
    env = {**os.environ, "HF_TOKEN": local_hub.token}
    done = cli(tmp_path, SCRIPT, "pins", "update", "pins.json", env=env)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "pins.json").read_text()
    assert new in text and local_hub.token not in text + done.stdout + done.stderr
    # Without the token the Hub does not show the repo: the command cannot check it.
    done = cli(tmp_path, SCRIPT, "pins", "check", "pins.json")
    assert done.returncode == 2 and "org/secret@main" in done.stderr


def test_pins_help(tmp_path: Path) -> None:
    done = cli(tmp_path, SCRIPT, "--help")
    assert "pins check PATH" in done.stdout and "pins update PATH" in done.stdout
    done = cli(tmp_path, SCRIPT, "pins", "--help")
    assert done.returncode == 0 and "exit 1 when any moved" in done.stdout
    done = cli(tmp_path, SCRIPT, "pins", "verify", "pins.json")
    assert done.returncode == 2 and "invalid choice: 'verify'" in done.stderr
