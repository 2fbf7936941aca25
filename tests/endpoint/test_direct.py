"""A client that hard-codes the Hub's address cannot be sent to the session endpoint: from a Python
session process, its connection is named in the summary with its file and line, and refused offline."""

from __future__ import annotations

import os

import pytest

from pytest_hfsnapshot.endpoint.environ import HUB_HOSTS, watched_hosts
from pytest_hfsnapshot.testing.hub import LocalHub

from .test_session import run

#: A test whose child loads a file as diffusers' ``load_numpy`` does: a hard-coded URL, no HF_ENDPOINT.
HARD_CODED = '''
import subprocess, sys

CLIENT = """import urllib.request
try:
    urllib.request.urlopen("https://huggingface.co/datasets/org/data/resolve/main/a.npy", timeout=10)
except OSError as error:
    print("failed:", error)
"""


def test_hard_coded(tmp_path):
    script = tmp_path / "load_numpy.py"
    script.write_text(CLIENT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    print(done.stdout)
    assert done.returncode == 0
'''


def test_the_summary_names_a_hard_coded_connection_with_its_file_and_line(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    pytester.makepyfile(test_direct=HARD_CODED)
    result = run(pytester, local_hub, "-s")
    result.assert_outcomes(passed=1)
    lines = [line for line in result.outlines if "directly, past HF_ENDPOINT" in line]
    assert len(lines) == 1, result.stdout.str()
    assert lines[0].startswith("hfsnapshot: /") and "load_numpy.py:3 connected to huggingface.co directly" in lines[0]
    assert lines[0].endswith(
        "(a process of test_direct.py::test_hard_coded); "
        "its loads are not recorded, verified, retried or served offline"
    )


def test_offline_the_hard_coded_connection_fails_with_a_line_saying_so(
    pytester: pytest.Pytester, local_hub: LocalHub
) -> None:
    pytester.makepyfile(test_direct=HARD_CODED)
    result = run(pytester, local_hub, "-s", "--hf-offline")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "load_numpy.py:3 connects to huggingface.co directly, past HF_ENDPOINT, and this test session is " in output
    assert "offline (--hf-offline): the connection is refused" in output
    assert "(a process of test_direct.py::test_hard_coded); refused: this session is offline (--hf-offline)" in output


def test_the_hosts_watched_are_the_hubs_and_another_upstream() -> None:
    assert watched_hosts("https://huggingface.co") == list(HUB_HOSTS)
    assert watched_hosts("https://hub.hf.co/") == list(HUB_HOSTS)
    assert watched_hosts("http://127.0.0.1:8123") == [*HUB_HOSTS, "127.0.0.1:8123"]
    assert watched_hosts("https://mirror.example") == [*HUB_HOSTS, "mirror.example:443"]


def test_the_start_up_hook_is_first_on_a_childs_python_path(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    pytester.makepyfile(test_env="import os\n\ndef test_env():\n    print('PYTHONPATH=' + os.environ['PYTHONPATH'])\n")
    result = run(pytester, local_hub, "-s")
    result.assert_outcomes(passed=1)
    (line,) = [line for line in result.outlines if "PYTHONPATH=" in line]
    entries = line.split("PYTHONPATH=", 1)[1].split(os.pathsep)
    assert entries[0].endswith(os.path.join("endpoint", "_startup"))
    assert entries.count(entries[0]) == 1
