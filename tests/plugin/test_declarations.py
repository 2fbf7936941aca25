"""Declaring snapshots: snapshot_fixture, the hf_snapshot marker, hf_snapshots, and their validation."""

from __future__ import annotations

import pytest
from conftest import file_fetches

from pytest_hfsnapshot.testing.hub import LocalHub

FILES = {"config.json": "{}", "tokenizer.json": '{"v": 1}', "model.safetensors": b"\x00" * 4096}


@pytest.fixture
def tiny(local_hub: LocalHub) -> str:
    return local_hub.add_repo("org/tiny", files=FILES)


def cache_arg(hub: LocalHub) -> str:
    return f"--hf-cache-dir={hub.cache_dir}"


def weight_downloads(hub: LocalHub) -> int:
    return file_fetches(hub, "*/resolve/*/model.safetensors")


def test_snapshot_fixture_is_named_after_its_variable(
    pytester: pytest.Pytester, local_hub: LocalHub, tiny: str
) -> None:
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny_bert = snapshot_fixture("org/tiny", revision="main")
        """
    )
    pytester.makepyfile(
        f"""
        import os
        from pytest_hfsnapshot import Snapshot

        def test_loads(tiny_bert):
            assert isinstance(tiny_bert, Snapshot)
            assert (tiny_bert / "config.json").is_file()
            assert os.path.isdir(str(tiny_bert))
            assert tiny_bert.commit == "{tiny}"
            assert tiny_bert.files == ("config.json", "model.safetensors", "tokenizer.json")

        def test_same_object_for_the_session(tiny_bert, request):
            assert tiny_bert is request.getfixturevalue("tiny_bert")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=2)
    assert weight_downloads(local_hub) == 1


def test_snapshot_fixture_is_session_scoped_and_listed(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture

        tiny_bert = snapshot_fixture("org/tiny", allow_patterns=["*.json"])
        """
    )
    result = pytester.runpytest("--fixtures")
    result.stdout.fnmatch_lines(
        [
            "tiny_bert [[]session scope[]]*",
            "    Snapshot of org/tiny@main (declared with snapshot_fixture).",
        ]
    )


def test_declarations_in_a_test_module_and_two_names_for_one_request(
    pytester: pytest.Pytester, local_hub: LocalHub, tiny: str
) -> None:
    pytester.makepyfile(
        """
        from pytest_hfsnapshot import snapshot_fixture

        first = snapshot_fixture("org/tiny")
        second = snapshot_fixture("org/tiny", revision="main", repo_type="model")
        configs = snapshot_fixture("org/tiny", metadata_only=True)

        def test_both(first, second, configs):
            assert first == second
            assert configs.files == ("config.json", "tokenizer.json")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=1)
    assert weight_downloads(local_hub) == 1


def test_marker_and_fixture(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    local_hub.add_repo("org/data", files={"README.md": "# data", "train.csv": "a,b\n"}, repo_type="dataset")
    pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.hf_snapshot("org/tiny", allow_patterns="*.json")

        def test_module_marker(hf_snapshot):
            assert hf_snapshot.files == ("config.json", "tokenizer.json")

        @pytest.mark.hf_snapshot("org/data", repo_type="dataset")
        def test_closest_marker_wins(hf_snapshot):
            assert hf_snapshot.repo_type == "dataset"
            assert hf_snapshot.files == ("README.md", "train.csv")

        @pytest.mark.hf_snapshot(repo_id="org/tiny", ignore_patterns=["*.safetensors"])
        def test_keyword_repo_id(hf_snapshot):
            assert "model.safetensors" not in hf_snapshot.files
        """
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=3)
    assert weight_downloads(local_hub) == 0


def test_marked_test_gets_its_snapshot_without_the_fixture(
    pytester: pytest.Pytester, local_hub: LocalHub, tiny: str
) -> None:
    pytester.makepyfile(
        f"""
        import pytest
        from huggingface_hub import snapshot_download

        @pytest.mark.hf_snapshot("org/tiny")
        def test_reads_by_repo_id():
            path = snapshot_download("org/tiny", local_files_only=True)
            assert path.endswith("{tiny}")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=1)


def test_hf_snapshot_fixture_without_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_unmarked(hf_snapshot): pass")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*test_unmarked: the hf_snapshot fixture needs @pytest.mark.hf_snapshot('org/name', ...)*"]
    )


def test_factory(pytester: pytest.Pytester, local_hub: LocalHub, tiny: str) -> None:
    pytester.makepyfile(
        """
        import pytest
        from pytest_hfsnapshot import InvalidRequestError

        def test_factory(hf_snapshots):
            snap = hf_snapshots("org/tiny", allow_patterns=["config.json"])
            assert snap.files == ("config.json",)
            assert hf_snapshots("org/tiny", allow_patterns="config.json") is snap

        def test_factory_validates(hf_snapshots):
            with pytest.raises(InvalidRequestError, match="Unknown repo_type 'models'"):
                hf_snapshots("org/tiny", repo_type="models")
        """
    )
    result = pytester.runpytest(cache_arg(local_hub))
    result.assert_outcomes(passed=2)
    assert local_hub.request_count("*/tree/*") == 1


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ('snapshot_fixture("not a repo id")', "*Invalid repo id 'not a repo id'*"),
        ('snapshot_fixture("org/x", repo_type="models")', "*Unknown repo_type 'models' for 'org/x'*"),
        ('snapshot_fixture("org/x", revision="../main")', "*Invalid revision '../main' for 'org/x'*"),
        ('snapshot_fixture("org/x", allow_patterns=[""])', "*allow_patterns for 'org/x' holds ''*"),
        ('snapshot_fixture("org/x", ignore_patterns=3)', "*ignore_patterns for 'org/x' must be a string*"),
    ],
)
def test_bad_conftest_declaration_names_the_line(pytester: pytest.Pytester, declaration: str, message: str) -> None:
    conftest = pytester.makeconftest(
        f"""
        from pytest_hfsnapshot import snapshot_fixture

        ok = snapshot_fixture("org/fine")
        broken = {declaration}
        """
    )
    pytester.makepyfile("def test_never(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ImportError while loading conftest '{conftest}'.",
            # The traceback ends at the declaring line.
            f"{conftest.name}:4: in <module>",
            f"    broken = {declaration}",
            "E   *InvalidRequestError: invalid snapshot_fixture(...): *",
        ]
    )
    result.stderr.fnmatch_lines([message])
    assert "pytest_hfsnapshot/plugin/declarations.py" not in result.stderr.str()


def test_bad_declaration_in_a_test_module_is_a_collection_error(pytester: pytest.Pytester) -> None:
    module = pytester.makepyfile(
        """
        from pytest_hfsnapshot import snapshot_fixture

        broken = snapshot_fixture("org/x", metadata_only="yes")

        def test_never(broken): pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            f"{module.name}:3: in <module>",
            '    broken = snapshot_fixture("org/x", metadata_only="yes")',
            "*invalid snapshot_fixture(...): metadata_only must be True or False*",
            "*Interrupted: 1 error during collection*",
        ]
    )


def test_bad_markers_fail_their_tests_at_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_marks="""
        import pytest

        @pytest.mark.hf_snapshot("org/x", revision="..bad")
        def test_bad_revision(hf_snapshot): pass

        def test_unmarked(): pass

        @pytest.mark.hf_snapshot("org/x", revisoin="v1")
        @pytest.mark.parametrize("n", [1, 2])
        def test_typo(n): pass

        @pytest.mark.hf_snapshot("org/x", "org/y")
        def test_two_repos(): pass

        @pytest.mark.hf_snapshot()
        def test_no_repo(): pass

        @pytest.mark.hf_snapshot("org/x")
        class TestClass:
            @pytest.mark.hf_snapshot("org/x", repo_type="modell")
            def test_bad_type(self): pass

            def test_fine(self): pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines_random(
        [
            "test_marks.py::test_bad_revision: invalid @pytest.mark.hf_snapshot('org/x', revision='..bad'): "
            "Invalid revision '..bad' for 'org/x'*",
            "test_marks.py::test_typo[[]1[]]: invalid @pytest.mark.hf_snapshot('org/x', revisoin='v1'): "
            "unknown argument(s) revisoin; hf_snapshot takes the repo id and revision, allow_patterns, "
            "ignore_patterns, repo_type, metadata_only, private",
            "test_marks.py::test_typo[[]2[]]: *unknown argument(s) revisoin*",
            "test_marks.py::test_two_repos: *hf_snapshot takes one positional argument, the repo id*",
            "test_marks.py::test_no_repo: *repo_id must be a non-empty string like 'org/name', got None*",
            "test_marks.py::TestClass::test_bad_type: *Unknown repo_type 'modell' for 'org/x'*",
            "ERROR test_marks.py::test_bad_revision",
            "ERROR test_marks.py::TestClass::test_bad_type",
            "*Interrupted: 6 errors during collection*",
        ]
    )
    # The valid tests beside them are still collected.
    result.stdout.fnmatch_lines_random(["test_marks.py::test_unmarked", "test_marks.py::TestClass::test_fine"])


def test_requests_for_items(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_hfsnapshot import snapshot_fixture
        from pytest_hfsnapshot.plugin.hooks import requests_for_items

        tiny = snapshot_fixture("org/tiny")
        data = snapshot_fixture("org/data", repo_type="dataset", allow_patterns="*.csv")
        unused = snapshot_fixture("org/unused")

        @pytest.fixture
        def model_dir(tiny):
            return tiny

        def pytest_collection_modifyitems(items):
            for request in requests_for_items(items):
                print("REQUEST", request.label, request.allow_patterns)
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_indirect(model_dir): pass

        def test_direct(tiny, data): pass

        @pytest.mark.hf_snapshot("org/marked", revision="v1")
        def test_marked(): pass

        @pytest.mark.hf_snapshot("org/tiny")
        def test_same_as_fixture(): pass

        def test_plain(): pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q", "-s")
    lines = [line for line in result.stdout.lines if line.startswith("REQUEST")]
    assert lines == [
        "REQUEST org/tiny@main None",
        "REQUEST datasets/org/data@main ('*.csv',)",
        "REQUEST org/marked@v1 None",
    ]


def test_requests_for_items_follows_overrides(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_hfsnapshot import snapshot_fixture
        from pytest_hfsnapshot.plugin.hooks import requests_for_items

        model = snapshot_fixture("org/base")

        def pytest_collection_modifyitems(items):
            print("REQUESTS", sorted(r.repo_id for r in requests_for_items(items)))
        """
    )
    pytester.makepyfile(
        test_override="""
        from pytest_hfsnapshot import snapshot_fixture

        model = snapshot_fixture("org/override")

        def test_uses_override(model): pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q", "-s")
    result.stdout.fnmatch_lines(["REQUESTS ['org/override']"])
