"""The architecture, enforced over the imports: model <- device <- engine <- {server, cli};
the engine sees telemetry only through the tracer interface; inside telemetry, trace/ <-
{recording/, analysis/} and trace/ + analysis/ <- export/; analysis imports no engine,
dashboard or server; the dashboard no engine, and from telemetry only trace/ and analysis/;
every one of them may read the tracer interface's enums (``Phase``: the phase names); the
scheduler side is plain Python; no import cycles; names unique in their folder.

Imports are read from the source (every ``import``/``from`` statement, lazy ones inside
functions included), so a layer cannot be crossed by an import hidden in a function.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "photon_trace"
HELPERS = Path(__file__).resolve().parent / "helpers"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = PKG.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """Absolute names of the photon_trace modules ``path`` imports. ``from pkg import name``
    counts as an import of ``pkg.name`` when that is a module (the package is only its parent,
    imported before any of its modules), else of ``pkg`` (a name its ``__init__`` defines)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = _module(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if _is_module(sub) else base)
    return {m for m in out if m.startswith("photon_trace")}


MODULES = {_module(p): _imports(p) for p in PKG.rglob("*.py")}


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _violations(importers: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()):
    return sorted((m, i) for m, deps in MODULES.items() if _in(m, *importers)
                  for i in deps if _in(i, *forbidden) and not _in(i, *allowed) and i in MODULES)


E = "photon_trace.engine"
OUTER = ("photon_trace.server", "photon_trace.cli", "photon_trace.dashboard", "photon_trace.workload",
         "photon_trace.traced_run")


def test_the_model_imports_nothing_above_it():
    assert _violations((f"{E}.model",), (E,), allowed=(f"{E}.model",)) == []


def test_the_device_layer_imports_only_the_model_and_itself_from_the_engine():
    assert _violations((f"{E}.device",), (E,), allowed=(f"{E}.device", f"{E}.model")) == []


def test_the_engine_sees_telemetry_only_through_the_tracer_interface():
    assert _violations((E,), ("photon_trace.telemetry",), allowed=("photon_trace.telemetry.tracer",)) == []


def test_nothing_inside_the_engine_imports_the_layers_above_it():
    assert _violations((E,), OUTER + ("photon_trace.telemetry.analysis",)) == []


def test_analysis_imports_no_engine_dashboard_or_server():
    assert _violations(("photon_trace.telemetry",), (E, "photon_trace.dashboard", "photon_trace.server",
                                                     "photon_trace.cli", "photon_trace.workload",
                                                     "photon_trace.traced_run")) == []


def test_the_dashboard_imports_no_engine_or_server():
    assert _violations(("photon_trace.dashboard",), (E, "photon_trace.server", "photon_trace.workload",
                                                     "photon_trace.traced_run")) == []


T = "photon_trace.telemetry"
D = "photon_trace.dashboard"
TRACE, RECORDING, EXPORT, ANALYSIS, TRACER = (f"{T}.trace", f"{T}.recording", f"{T}.export", f"{T}.analysis",
                                              f"{T}.tracer")


def test_the_tracer_interface_imports_nothing_of_the_package():
    """The engine imports it: whatever it imported, the engine would too."""
    assert _violations((TRACER,), ("photon_trace",)) == []


def test_the_trace_layer_imports_nothing_else_of_telemetry():
    """Records, the file, importers: what recording, analysis and export all read. And the tracer
    interface, exactly that module: plain enums importing nothing of the package (the test above),
    whose ``Phase`` names the host phases every layer reads from a trace (``TOP_PHASES``)."""
    assert _violations((TRACE,), (T,), allowed=(TRACE, TRACER)) == []


def test_recording_imports_only_the_tracer_interface_and_the_trace_layer():
    assert _violations((RECORDING,), (T,), allowed=(RECORDING, TRACE, TRACER)) == []


def test_analysis_imports_only_the_trace_layer():
    """And the tracer interface for its ``Phase`` (the phase names), as the trace layer does."""
    assert _violations((ANALYSIS,), (T,), allowed=(ANALYSIS, TRACE, TRACER)) == []


def test_export_imports_only_the_trace_layer_and_the_analysis():
    """And the tracer interface for its ``Phase`` (the phase names), as the trace layer does."""
    assert _violations((EXPORT,), (T,), allowed=(EXPORT, TRACE, ANALYSIS, TRACER)) == []


def test_the_dashboard_takes_from_telemetry_only_the_trace_layer_and_the_analysis():
    """Not the exporters (the times it shares with Perfetto are the trace layer's) nor the
    recorder (live mode reads records and merges headers: the trace layer's too). The tracer
    interface only for its ``Phase`` (the phase names and their colours), as the trace layer does."""
    assert _violations((D,), (T,), allowed=(TRACE, ANALYSIS, TRACER)) == []


def test_the_figure_builders_import_nothing_of_the_page():
    """timeline/ and panels/ are pure functions of the data: no callbacks, sources, layout or app."""
    assert _violations((f"{D}.timeline", f"{D}.panels"), (D,), allowed=(f"{D}.timeline", f"{D}.panels")) == []


def test_the_server_imports_no_cli_or_dashboard():
    assert _violations(("photon_trace.server",), ("photon_trace.cli", "photon_trace.dashboard")) == []


def _cycles() -> list[list[str]]:
    """The import cycles of the package, each as the modules around it (the first repeated at
    the end); lazy imports count: a function-local import is still a dependency, only later."""
    graph = {m: sorted(d for d in deps if d in MODULES and d != m) for m, deps in MODULES.items()}
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    found = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in graph[m]:
            if state.get(d) == 1:
                found.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_the_package_imports_form_no_cycle():
    """A cycle makes import order matter (a module seen half-initialised) and hides which of
    its modules is the lower layer; the way out is a module below both."""
    assert _cycles() == []


def _module_names(folder: Path) -> list[str]:
    """What ``import`` can find in ``folder``: its modules and its sub-packages (any folder
    holding Python), lower-cased as a case-insensitive file system sees them."""
    modules = [p.stem for p in folder.glob("*.py")]
    packages = [d.name for d in folder.iterdir() if d.is_dir() and d.name != "__pycache__" and any(d.rglob("*.py"))]
    return [n.lower() for n in modules + packages]


@pytest.mark.parametrize("root", [PKG, HELPERS], ids=["package", "test-helpers"])
def test_every_name_is_unique_in_its_folder(root):
    """The folder gives a name its context (``callbacks/live.py`` and ``sources/live.py``), so a
    name need only be unique beside its neighbours; a module ``x.py`` beside a package ``x/``
    would leave ``import x`` naming one of them by accident."""
    clashes = []
    for folder in [root, *(d for d in root.rglob("*") if d.is_dir() and d.name != "__pycache__")]:
        names = _module_names(folder)
        clashes += [f"{folder.relative_to(root.parent)}/{n}" for n in sorted(set(names)) if names.count(n) > 1]
    assert clashes == []


def test_every_folder_of_the_package_is_a_package():
    """A folder of Python without ``__init__.py`` is left out of the wheel (setuptools finds packages)."""
    folders = {p.parent for p in PKG.rglob("*.py")}
    assert sorted(str(d.relative_to(PKG.parent)) for d in folders if not (d / "__init__.py").is_file()) == []


def test_nothing_test_only_ships_in_the_package():
    for p in PKG.rglob("*.py"):
        assert not p.name.startswith(("test", "testing", "conftest")), p
        assert "import pytest" not in p.read_text(encoding="utf-8"), p


@pytest.mark.parametrize("module", [f"{E}.scheduler", f"{E}.pages", f"{E}.sequence", f"{E}.request_book",
                                    f"{E}.model.segments"])
def test_the_host_side_bookkeeping_is_plain_python(module):
    """Importable with torch made unimportable: testable anywhere, and no device work in it."""
    code = ("import sys, importlib.abc\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.split('.')[0] == 'torch': raise ImportError('torch is blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            f"import {module}\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=PKG.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
