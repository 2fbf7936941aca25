"""How the package hangs together, read from its folders: the face, the core, the plugin, the kit, no cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_hfsnapshot"
#: The wings of the core, lowest first: each may import the wings below it, never one above.
#: Implicit use and the doctor are both on top and import neither each other.
WINGS = ("core.cache", "core.hub", "core.engine", "core.implicit", "core.doctor")
#: The whole core: its root (the package and ``_hf_compat``, the one door to huggingface_hub's
#: private names) and its wings.
CORE = {"core", *WINGS}
#: The folders of the package and what each may import, besides itself. The public face is the
#: modules directly in the package (errors, snapshot, request, settings); they import only each other.
MAY_IMPORT = {
    "face": {"face"},
    "core": {"face"},
    "core.cache": {"face", "core"},
    "core.hub": {"face", "core", "core.cache"},
    "core.engine": {"face", "core", "core.cache", "core.hub"},
    "core.implicit": {"face", "core", "core.cache", "core.hub", "core.engine"},
    "core.doctor": {"face", "core", "core.cache", "core.hub", "core.engine"},
    # The session's Hub endpoint (CONTRACT section 11), a package of its own beside the core.
    "endpoint": {"face", *CORE},
    "plugin": {"face", *CORE, "endpoint"},
    "testing": {"face", *CORE},
    "demo": {"face", *CORE, "testing"},
    # The command line runs the core's commands and the kit's `serve`, never pytest in-process.
    "cli": {"face", *CORE, "testing"},
    # `import pytest_hfsnapshot` hands out materialize and snapshot_fixture on first use.
    "front": {"face", *CORE, "plugin"},
}
#: Folders MAY_IMPORT names ahead of their arrival on this branch.
NOT_YET_HERE: set[str] = set()
MAX_TOP_MODULES = 8


def layer(name: str) -> str:
    """The folder a module belongs to, as ``MAY_IMPORT`` names it (a wing for the core's subpackages)."""
    parts = name.split(".")
    if name == "pytest_hfsnapshot":
        return "front"
    if parts[1] == "core" and len(parts) > 2 and (PACKAGE / "core" / parts[2]).is_dir():
        return f"core.{parts[2]}"
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


def imports(name: str, path: Path, known: set[str], *, typing: bool = False) -> set[str]:
    """What ``name`` imports at run time, in functions too; ``if TYPE_CHECKING:`` blocks only with ``typing``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if not typing and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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


def import_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """The package's modules and, for each, the package modules it imports (for type checks too with ``typing``)."""
    modules = package_modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        found = imports(name, path, known, typing=typing)
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


def test_no_cycle_even_through_the_imports_for_type_checks() -> None:
    assert cycles(import_graph(typing=True)) == []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # Both are imported inside functions only.
    assert "pytest_hfsnapshot.core.engine.engine" in graph["pytest_hfsnapshot.plugin.session"]
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
    found = {layer(name) for name in graph}
    assert set(MAY_IMPORT) - NOT_YET_HERE <= found <= set(MAY_IMPORT), (
        "a folder was added or removed: update MAY_IMPORT"
    )


def test_the_core_is_its_root_and_the_wings_in_order() -> None:
    # Every folder of the core is a wing, and every wing of the order is a folder.
    folders = {f"core.{path.parent.name}" for path in (PACKAGE / "core").glob("*/__init__.py")}
    assert folders == set(WINGS)
    assert {layer(name) for name in package_modules() if name.startswith("pytest_hfsnapshot.core")} == CORE
    # A wing may import only the wings below it in the order (and the core's root), never one above.
    for rank, wing in enumerate(WINGS):
        assert MAY_IMPORT[wing] & CORE <= {"core", *WINGS[:rank]}, wing
    # ... and the imports the wings make run that way, those for type checks too: no arrow points up.
    graph = import_graph(typing=True)
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if layer(name) in WINGS and layer(target) in WINGS and WINGS.index(layer(target)) > WINGS.index(layer(name))
    )
    assert upward == []
    assert layer("pytest_hfsnapshot.core.cache.layout") == "core.cache"
    assert layer("pytest_hfsnapshot.core._hf_compat") == layer("pytest_hfsnapshot.core") == "core"


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


#: The most methods of more than three body lines (docstring aside) a class of the core may have.
MAX_LONG_METHODS = 15


def long_methods(path: Path) -> dict[str, int]:
    """Each class of a module and its methods whose body, docstring aside, has more than three lines."""
    found = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            found[node.name] = sum(1 for m in methods if _body_lines(m) > 3)
    return found


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    return body[-1].end_lineno - body[0].lineno + 1 if body and body[-1].end_lineno else 0


def test_no_class_of_the_core_has_more_than_fifteen_long_methods(tmp_path: Path) -> None:
    crowded = {
        f"{name}.{cls}": count
        for name, path in package_modules().items()
        if name.startswith("pytest_hfsnapshot.core")
        for cls, count in long_methods(path).items()
        if count > MAX_LONG_METHODS
    }
    assert crowded == {}
    sample = tmp_path / "sample.py"
    sample.write_text(
        'class A:\n    def short(self):\n        """Doc."""\n        return 1\n'
        "    def long(self):\n        a = 1\n        b = 2\n        c = 3\n        return a + b + c\n"
    )
    assert long_methods(sample) == {"A": 1}


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_plugin_start_up_imports_no_http_stack() -> None:
    loaded = run_python(
        "import sys, pytest_hfsnapshot.plugin.hooks, pytest_hfsnapshot.testing.plugin; print('\\n'.join(sys.modules))"
    ).split()
    heavy = {"httpx", "httpx2", "huggingface_hub.errors", "huggingface_hub.utils", "huggingface_hub.hf_api"}
    ours = {
        "pytest_hfsnapshot.core.engine.engine",
        "pytest_hfsnapshot.core.engine.prefetch",
        "pytest_hfsnapshot.core.hub.refusals",
    }
    assert sorted(set(loaded) & (heavy | ours)) == []


def test_every_core_module_imports_where_pytest_cannot_be() -> None:
    from core.test_cli import NO_PYTEST

    pytest_free = pytest_modules(import_graph())
    core = sorted(name for name in package_modules() if name not in pytest_free)
    assert "pytest_hfsnapshot.core.engine.prefetch" in core
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
