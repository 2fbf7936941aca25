"""How the package hangs together, read from its folders: the face, the core, the plugin, the kit, no cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_hfsnapshot"
#: The folders of the package and what each may import, besides itself. The public face is the
#: modules directly in the package (errors, snapshot, request, settings); they import only each other.
MAY_IMPORT = {
    "face": {"face"},
    "core": {"face"},
    "plugin": {"face", "core", "endpoint"},
    # The session's Hub for every process a test starts (CONTRACT section 11).
    "endpoint": {"face", "core"},
    "testing": {"face", "core"},
    "demo": {"face", "core", "testing"},
    # The command line runs the core's commands and the kit's `serve`, never pytest in-process.
    "cli": {"face", "core", "testing"},
    # `import pytest_hfsnapshot` hands out materialize and snapshot_fixture on first use.
    "front": {"face", "core", "plugin"},
}
MAX_TOP_MODULES = 8


def layer(name: str) -> str:
    """The folder a module belongs to, as ``MAY_IMPORT`` names it."""
    parts = name.split(".")
    if name == "pytest_hfsnapshot":
        return "front"
    if (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "cli" if parts[1] in ("cli", "__main__") else "face"


def our_entry_points() -> dict[str, str]:
    """The pytest11 entry points of the installed distribution: name -> module."""
    from importlib.metadata import entry_points

    found = entry_points(group="pytest11")
    return {ep.name: ep.value for ep in found if ep.value.partition(".")[0] == "pytest_hfsnapshot"}


def entry_point_modules() -> set[str]:
    """The modules the pytest11 entry points name."""
    return set(our_entry_points().values())


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every module of the package, the demo's example suite (test files, not modules) aside."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "suite" not in path.relative_to(PACKAGE).parts[:-1]:
            found[module_name(path)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """What ``name`` imports at run time, in functions too; ``if TYPE_CHECKING:`` blocks are skipped."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known)
    return found


def import_graph() -> dict[str, set[str]]:
    """The package's modules and, for each, the package modules it imports."""
    modules = package_modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        found = imports(name, path, known)
        # A module's own parent packages are imported before it, whatever it imports: not an edge.
        graph[name] = {target for target in found if target in known and not f"{name}.".startswith(f"{target}.")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_deferred_or_not() -> None:
    assert cycles(import_graph()) == []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # Both are imported inside functions only.
    assert "pytest_hfsnapshot.core.engine" in graph["pytest_hfsnapshot.plugin.session"]
    assert "pytest_hfsnapshot.plugin.prefetch_run" in graph["pytest_hfsnapshot.plugin.hooks"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def pytest_modules(graph: dict[str, set[str]]) -> set[str]:
    """The modules that may import pytest: the plugin folder, each entry point, and what only an entry point imports."""
    entry_points = entry_point_modules()
    importers: dict[str, set[str]] = {name: set() for name in graph}
    for name, targets in graph.items():
        for target in targets:
            importers[target].add(name)
    allowed = {name for name in graph if layer(name) == "plugin"} | entry_points
    allowed |= {name for name, by in importers.items() if by and by <= entry_points}
    return allowed


def test_each_folder_imports_only_the_folders_below_it() -> None:
    graph = import_graph()
    offending = {
        name: sorted(t for t in targets if layer(t) != layer(name) and layer(t) not in MAY_IMPORT[layer(name)])
        for name, targets in graph.items()
    }
    assert {name: targets for name, targets in offending.items() if targets} == {}
    assert {layer(name) for name in graph} == set(MAY_IMPORT), "a folder was added or removed: update MAY_IMPORT"


def test_only_the_plugin_and_the_entry_points_import_pytest() -> None:
    graph = import_graph()
    modules = package_modules()
    allowed = pytest_modules(graph)
    direct = {
        name: sorted(t for t in imports(name, path, set(modules)) if t.partition(".")[0] in ("pytest", "_pytest"))
        for name, path in modules.items()
        if name not in allowed
    }
    assert {name: found for name, found in direct.items() if found} == {}
    assert "pytest_hfsnapshot.testing.fixtures" in allowed and "pytest_hfsnapshot.testing.hub" not in allowed


def test_the_public_face_is_at_most_eight_modules() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top
    subpackages = sorted(path.parent.name for path in PACKAGE.glob("*/__init__.py"))
    assert {"core", "plugin", "testing"} <= set(subpackages)


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_plugin_start_up_imports_no_http_stack() -> None:
    loaded = run_python(
        "import sys, pytest_hfsnapshot.plugin.hooks, pytest_hfsnapshot.testing.plugin; print('\\n'.join(sys.modules))"
    ).split()
    heavy = {"httpx", "httpx2", "huggingface_hub.errors", "huggingface_hub.utils", "huggingface_hub.hf_api"}
    ours = {"pytest_hfsnapshot.core.engine", "pytest_hfsnapshot.core.prefetch", "pytest_hfsnapshot.core.refusals"}
    assert sorted(set(loaded) & (heavy | ours)) == []


def test_every_core_module_imports_where_pytest_cannot_be() -> None:
    from core.test_cli import NO_PYTEST

    pytest_free = pytest_modules(import_graph())
    core = sorted(name for name in package_modules() if name not in pytest_free)
    assert "pytest_hfsnapshot.core.prefetch" in core
    run_python(NO_PYTEST + "".join(f"import {name}\n" for name in core))
    layer = subprocess.run(
        [sys.executable, "-c", NO_PYTEST + "import pytest_hfsnapshot.plugin.hooks"], capture_output=True
    )
    assert layer.returncode != 0 and b"pytest is not installed here" in layer.stderr


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (
            "pytest_hfsnapshot",
            "AuthError DiskError EntryNotFoundError HfSnapshotError HfSnapshotWarning InvalidRequestError "
            "LockTimeoutError OfflineMissingError RateLimitError RevisionNotFoundError Snapshot TransientError "
            "UnsafeCacheError UnverifiedRevisionError VerificationError materialize snapshot_fixture",
        ),
        ("pytest_hfsnapshot.testing.hub", "LocalHub"),
        (
            "pytest_hfsnapshot.testing.half_written",
            "interrupted_download missing_file truncated_blob corrupted_blob dangling_link orphan_incomplete "
            "empty_ref garbage_ref stale_lock",
        ),
    ],
)
def test_the_contracts_public_names_are_where_it_says(module: str, names: str) -> None:
    imported = __import__(module, fromlist=["_"])
    assert [name for name in names.split() if not hasattr(imported, name)] == []


def test_the_plugin_is_registered_as_hfsnapshot() -> None:
    assert set(our_entry_points()) == {"hfsnapshot", "hfsnapshot-testing"}
    for module in entry_point_modules():
        __import__(module)


# What reads interpreter frames: the attributes that lead to one or out of one, and the functions
# that hand them out. Decisions made from frames break when a library renames a function or local.
_FRAME_ATTRIBUTES = {
    "__traceback__",
    "tb_frame",
    "tb_next",
    "f_back",
    "f_code",
    "f_globals",
    "f_lineno",
    "f_locals",
    "gi_frame",
    "cr_frame",
    "ag_frame",
}
_FRAME_FUNCTIONS = {
    "sys": {"_getframe", "_current_frames", "exc_info"},
    "inspect": {"currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getframeinfo"},
    "traceback": {"extract_stack", "extract_tb", "walk_stack", "walk_tb", "format_stack", "print_stack"},
}


def frame_reads(path: Path) -> list[str]:
    """Where a module reads interpreter frames (``line: what``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in _FRAME_ATTRIBUTES:
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in _FRAME_FUNCTIONS.get(node.value.id, ()):
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in _FRAME_FUNCTIONS:
            names = [a.name for a in node.names if a.name in _FRAME_FUNCTIONS[node.module]]
            found += [f"{node.lineno}: from {node.module} import {name}" for name in names]
    return found


#: Modules that read frames to name a place to the user, deciding nothing from them: the start-up
#: hook of a session's Python processes names the file and line of a hard-coded connection.
NAMES_PLACES = {"pytest_hfsnapshot.endpoint._startup.sitecustomize"}


def test_no_module_reads_interpreter_frames(tmp_path: Path) -> None:
    modules = package_modules()
    reading = {
        name: found for name, path in modules.items() if (found := frame_reads(path)) and name not in NAMES_PLACES
    }
    assert reading == {}
    assert set(modules) >= NAMES_PLACES
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import sys\nfrom inspect import stack\n"
        "def f(error):\n    return error.__traceback__.tb_frame.f_locals, sys._getframe(1)\n"
    )
    assert sorted(frame_reads(sample)) == [
        "2: from inspect import stack",
        "4: .__traceback__",
        "4: .f_locals",
        "4: .tb_frame",
        "4: sys._getframe",
    ]


if __name__ == "__main__":
    graph = import_graph()
    print(f"{len(graph)} modules, {sum(map(len, graph.values()))} import edges")
    print("cycles:", cycles(graph) or "none")
