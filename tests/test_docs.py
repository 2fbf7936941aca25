"""The README's quick start and CI recipe, and the tutorial, run as written; the manual says what the code does.

Code blocks are found by the section they stand in and by their fence: ```` ```python
title="conftest.py" ```` is a file to write, a ```` ```bash ```` block holds commands. Each test
writes the files, runs the commands (``pytest`` as this interpreter's ``python -m pytest``)
against a local Hub, and checks the outcomes the text promises.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import file_fetches

from pytest_hfsnapshot import cli
from pytest_hfsnapshot.plugin.options import OPTIONS
from pytest_hfsnapshot.testing.hub import LocalHub

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial.md"

#: Options and commands of CONTRACT.md that the manual documents before their code has landed.
#: When one lands, test_pending_features_have_not_landed fails: take it out of here and re-check
#: the pages that name it (docs/how-to/fleets.md, docs/concepts/locking.md, troubleshooting).
PENDING_OPTIONS: set[str] = set()
PENDING_COMMANDS: set[str] = set()
#: Fixed words of messages not yet in the code that docs/how-to/troubleshooting.md quotes.
PENDING_PHRASES: set[str] = set()

pytestmark = pytest.mark.transports("xet")


@dataclasses.dataclass(frozen=True)
class Block:
    section: str
    lang: str
    title: str | None
    text: str

    def commands(self) -> list[str]:
        """The block's command lines, comments and blank lines left out."""
        lines = (re.sub(r"\s+#.*$", "", line).strip() for line in self.text.splitlines())
        return [line for line in lines if line and not line.startswith("#")]


def blocks(path: Path) -> list[Block]:
    """Every top-level fenced block of a Markdown file, with the ``##``/``###`` heading above it."""
    found: list[Block] = []
    section = ""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        heading = re.match(r"#{2,3} (.*)", line)
        fence = re.match(r"```(\w*)(.*)$", line)
        if heading:
            section = heading.group(1).strip()
        elif fence:
            end = lines.index("```", index + 1)
            title = re.search(r'title="([^"]+)"', fence.group(2))
            text = "\n".join(lines[index + 1 : end]) + "\n"
            found.append(Block(section, fence.group(1), title.group(1) if title else None, text))
            index = end
        index += 1
    return found


def in_section(path: Path, section: str) -> list[Block]:
    chosen = [block for block in blocks(path) if block.section == section]
    assert chosen, f"{path.name} has no code block under a heading {section!r}"
    return chosen


def write_files(chosen: list[Block], folder: Path) -> list[str]:
    names = []
    for block in chosen:
        if block.title is not None and block.title.endswith(".py"):
            (folder / block.title).write_text(block.text, encoding="utf-8")
            names.append(block.title)
    return names


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment (the local Hub's patches included) without the outer pytest's."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env.update(extra)
    return env


def run(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A documented ``pytest ...`` or ``python -m pytest ...`` line, run with this interpreter."""
    words = command.split()
    if words[:3] == ["python", "-m", "pytest"]:
        words = words[3:]
    elif words[0] == "pytest":
        words = words[1:]
    else:
        raise AssertionError(f"not a pytest command: {command!r}")
    return subprocess.run(
        [sys.executable, "-m", "pytest", *words], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


def passed(result: subprocess.CompletedProcess[str], summary: str) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"=+ {summary} in [\d.]+s", result.stdout), result.stdout
    return result.stdout


def needs_xdist() -> None:
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("the documented commands use pytest -n auto (pytest-xdist)")


# --- the README -----------------------------------------------------------------------------------


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)


def test_the_readmes_links_lead_somewhere() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [target for target in targets if not target.startswith(("http://", "https://"))]
    assert len(local) >= 20, local
    assert [target for target in local if not (ROOT / target).exists()] == []


def test_the_readmes_set_up_commands_are_what_ci_runs() -> None:
    first = blocks(README)[0]
    assert first.commands() == [
        "python -m pip install tox && python -m tox -e demo",
        "python -m pip install tox && python -m tox",
    ]
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    assert "[testenv:demo]" in tox
    assert re.search(r"^env_list = \S", tox, re.MULTILINE)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # The default env_list; a missing interpreter fails instead of being skipped; two envs at a time
    # is scheduling only (tox.ini's `depends` keeps the order plain `tox` has).
    assert re.search(
        r"^python3 -m tox( --skip-missing-interpreters false)?( --parallel 2 --parallel-live)?$", ci, re.MULTILINE
    ), "CI no longer runs the default env_list"
    assert re.search(r"^python3 -m tox -e demo\b", ci, re.MULTILINE), "CI no longer runs the demo"


def tiny_bert(hub: LocalHub) -> str:
    """A stand-in for hf-internal-testing/tiny-random-bert, with the files the quick start reads."""
    return hub.add_repo(
        "hf-internal-testing/tiny-random-bert",
        {
            "config.json": json.dumps({"model_type": "bert", "hidden_size": 32}),
            "tokenizer_config.json": "{}",
            "vocab.txt": "[PAD]\n[UNK]\n[CLS]\n[SEP]\n",
            "model.safetensors": b"\x01" * 4096,
        },
    )


@pytest.fixture
def quick_start(pytester: pytest.Pytester, local_hub: LocalHub) -> Iterator[Path]:
    """The quick start's files, written to a fresh project, and its repo on the local Hub."""
    needs_xdist()
    tiny_bert(local_hub)
    names = write_files(in_section(README, "Quick start"), pytester.path)
    assert names == ["conftest.py", "test_tiny_bert.py"]
    yield pytester.path


def test_the_quick_start_runs_as_written(quick_start: Path, local_hub: LocalHub) -> None:
    shell = next(b for b in in_section(README, "Quick start") if b.lang == "bash").commands()
    install, command = shell
    assert install == 'pip install "pytest-hfsnapshot[xdist]"'
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'name = "pytest-hfsnapshot"' in pyproject
    assert re.search(r"^xdist = \[", pyproject, re.MULTILINE)

    out = passed(run(command, quick_start, clean_env()), "2 passed")
    # The summary row has the shape the README shows, and the selected files crossed the wire once.
    row = r"hf-internal-testing/tiny-random-bert@main \[allow \*\.json,\*\.txt\] +[0-9a-f]{12}  3 files .* download .*"
    assert re.search(row, out), out
    shown = next(b for b in in_section(README, "Quick start") if b.lang == "text").text
    assert re.search(row, shown), shown
    assert file_fetches(local_hub, "*/tiny-random-bert/resolve/*/vocab.txt") == 1
    assert local_hub.served("*model.safetensors") == 0


def test_the_ci_recipe_runs_as_written(quick_start: Path, local_hub: LocalHub) -> None:
    prefetch, offline = in_section(README, "CI recipe in brief")[0].commands()
    workflow = (ROOT / "examples" / "github-actions.yml").read_text(encoding="utf-8")
    assert f"run: {prefetch}" in workflow and f"run: {offline}" in workflow

    out = passed(run(prefetch, quick_start, clean_env()), "no tests ran")
    assert "1 snapshot ready" in out, out
    manifest = json.loads((quick_start / "hf-manifest.json").read_text())
    assert [(e["repo_id"], e["files"]) for e in manifest] == [
        ("hf-internal-testing/tiny-random-bert", ["config.json", "tokenizer_config.json", "vocab.txt"])
    ]
    first = (quick_start / "hf-manifest.json").read_bytes()

    local_hub.reset_counters()
    passed(run(offline, quick_start, clean_env()), "2 passed")
    assert local_hub.requests == []
    # The cache key: a second prefetch writes the same bytes.
    passed(run(prefetch, quick_start, clean_env()), "no tests ran")
    assert (quick_start / "hf-manifest.json").read_bytes() == first


# --- the tutorial ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Served:
    process: subprocess.Popen[str]
    exports: dict[str, str]


def serve(command: str, folder: Path) -> Served:
    words = command.split()
    assert words[:2] == ["pytest-hfsnapshot", "serve"], command
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_hfsnapshot", *words[1:]],
        cwd=folder,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "until interrupted" in line:
            return Served(process, dict(re.findall(r"^export (\w+)=(\S+)$", "".join(lines), re.MULTILINE)))
    process.kill()
    pytest.fail("serve did not come up:\n" + "".join(lines))


def stop(server: Served) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=30) == 0


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    needs_xdist()
    make_hub = in_section(TUTORIAL, "2. Make a Hub to talk to")
    *make_repos, serve_line = make_hub[0].commands()
    subprocess.run(["bash", "-euc", "\n".join(make_repos)], cwd=tmp_path, check=True)
    server = serve(serve_line, tmp_path)
    try:
        # Shell 2 exports what serve printed, less the token, and a cache of its own.
        shell2 = make_hub[-1].commands()
        exported = dict(re.findall(r"^export (\w+)=(\S+)$", "\n".join(shell2), re.MULTILINE))
        assert set(exported) == set(server.exports) - {"HF_TOKEN"} | {"HF_HUB_CACHE"}, shell2
        assert exported["HF_HUB_CACHE"] == "$PWD/hf-cache"
        env = {name: value for name, value in clean_env().items() if not name.startswith(("HF_", "HUGGING"))}
        env.update({k: v for k, v in server.exports.items() if k != "HF_TOKEN"})
        env["HF_HUB_CACHE"] = str(tmp_path / "hf-cache")

        write_files(in_section(TUTORIAL, "3. Declare the snapshots"), tmp_path)
        write_files(in_section(TUTORIAL, "4. Use them in tests"), tmp_path)

        # 5: one download for both workers; the gated repo skipped with the reason shown.
        first_run = in_section(TUTORIAL, "5. Run them on every core")
        out = passed(run(first_run[0].commands()[0], tmp_path, env), "3 passed, 1 skipped")
        shown = first_run[1].text.replace("41585", server.exports["HF_ENDPOINT"].rsplit(":", 1)[1])
        skip_line = next(line for line in shown.splitlines() if line.startswith("SKIPPED"))
        assert skip_line in out, out
        assert re.search(r"^acme/tiny-bert@main +[0-9a-f]{12}  3 files  1\.0 MiB  download ", out, re.MULTILINE), out

        # 6: a cut weight file is repaired, that file only.
        damage, again = in_section(TUTORIAL, "6. Break the cache")[0].commands()
        subprocess.run(["bash", "-euc", damage.replace("python ", f"{sys.executable} ", 1)], cwd=tmp_path, check=True)
        out = passed(run(again, tmp_path, env), "3 passed, 1 skipped")
        assert re.search(r"^acme/tiny-bert@main .* repair .*repaired 1 file", out, re.MULTILINE), out

        # 7: with the token, the gated test runs; the tiny model comes from the cache.
        env["HF_TOKEN"] = server.exports["HF_TOKEN"]
        out = passed(run("pytest -n auto", tmp_path, env), "4 passed")
        assert re.search(r"^acme/tiny-bert@main +\S+  3 files  1\.0 MiB  cache ", out, re.MULTILINE), out

        # 8: prefetch, stop the Hub, run offline.
        prefetch = in_section(TUTORIAL, "8. Run it the way CI does")
        passed(run(prefetch[0].commands()[0], tmp_path, env), "no tests ran")
        assert json.loads((tmp_path / "hf-manifest.json").read_text())
        stop(server)
        passed(run(prefetch[1].commands()[0], tmp_path, env), "4 passed")
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=30)


# --- the manual and the code ----------------------------------------------------------------------


def manual_texts() -> dict[Path, str]:
    pages = [README, *sorted(DOCS.rglob("*.md")), *sorted((ROOT / "examples").rglob("*"))]
    return {path: path.read_text(encoding="utf-8") for path in pages if path.is_file()}


def test_every_troubleshooting_heading_is_words_the_code_writes() -> None:
    page = (DOCS / "how-to" / "troubleshooting.md").read_text(encoding="utf-8")
    # A heading of code spans (`a` ... `b`) names fixed parts of one message.
    headings = re.findall(r"^### (`.*`)$", page, re.MULTILINE)
    phrases = [phrase for heading in headings for phrase in re.findall(r"`([^`]+)`", heading)]
    assert len(phrases) >= 25, phrases
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "pytest_hfsnapshot").rglob("*.py"))
    missing = [phrase for phrase in phrases if phrase not in source and phrase not in PENDING_PHRASES]
    assert missing == [], f"troubleshooting headings no message of the code contains: {missing}"


def help_options(pytester: pytest.Pytester) -> set[str]:
    result = pytester.runpytest("--help")
    return set(re.findall(r"--hf-[a-z-]*[a-z]", result.stdout.str()))


def test_every_documented_option_and_command_exists(pytester: pytest.Pytester) -> None:
    known = help_options(pytester)
    documented = {
        (path.relative_to(ROOT).as_posix(), option)
        for path, text in manual_texts().items()
        for option in re.findall(r"--hf-[a-z-]*[a-z]", text)
    }
    unknown = sorted((where, option) for where, option in documented if option not in known | PENDING_OPTIONS)
    assert unknown == []
    # Commands as code: inline code spans and the lines of fenced blocks (prose names the project too).
    code = [
        piece
        for text in manual_texts().values()
        for piece in re.findall(r"`([^`\n]+)`", text) + re.findall(r"^```.*?^```$", text, re.MULTILINE | re.DOTALL)
    ]
    commands = {c for piece in code for c in re.findall(r"(?:^|[\s$`])pytest-hfsnapshot ([a-z]+)", piece, re.MULTILINE)}
    assert commands - set(cli.COMMANDS) - PENDING_COMMANDS - {"demo"} == set()


def test_pending_features_have_not_landed(pytester: pytest.Pytester) -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "pytest_hfsnapshot").rglob("*.py"))
    landed = sorted(PENDING_OPTIONS & help_options(pytester)) + sorted(PENDING_COMMANDS & set(cli.COMMANDS))
    landed += sorted(phrase for phrase in PENDING_PHRASES if phrase in source)
    assert landed == [], (
        f"{landed} landed: remove them from PENDING_* in tests/test_docs.py and check the pages naming them "
        "against the code (docs/how-to/fleets.md, docs/concepts/locking.md, docs/how-to/troubleshooting.md)"
    )


def reference_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_option_table_is_what_pytest_registers(pytester: pytest.Pytester) -> None:
    assert {option.flag for option in OPTIONS if option.flag is not None} == help_options(pytester)
    result = pytester.runpytest("--help")
    for option in OPTIONS:
        assert f"  {option.ini} (" in result.stdout.str(), option.ini


def test_the_reference_lists_every_option_ini_key_and_marker() -> None:
    hook = reference_hook()
    table = hook.options_table()
    for option in OPTIONS:
        assert f"`{option.ini}`" in table
        if option.flag is not None:
            assert f"`{option.flag}" in table
    environment = hook.environment_table()
    assert all(f"`{option.env}`" in environment for option in OPTIONS if option.env)
    assert "`HFSNAPSHOT_LOCK_MODE`" in environment
    markers = hook.markers_table()
    for marker in ("hf_snapshot(", "hf_requires_token", "local_hub("):
        assert f"`@pytest.mark.{marker}" in markers
    columns = os.environ.get("COLUMNS")
    rendered = hook.on_page_markdown("before\n<!-- generated: cli -->\nafter\n")
    assert all(f"{cli.PROG} {name} --help" in rendered for name in cli.COMMANDS)
    assert os.environ.get("COLUMNS") == columns  # the help's width is set for the page alone
    with pytest.raises(ValueError, match="unknown generated table 'nope'"):
        hook.on_page_markdown("<!-- generated: nope -->\n")
