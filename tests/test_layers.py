"""Folder = layer: every project module's layer is the folder it lives in, and layers only import downward (every
import statement counts, function-level ones included):

    core  <-  rules, workloads  <-  simulation, net, ryu-app  <-  results  <-  run (plumbing)  <-  backends  <-  commands
          <-  api

Inside commands/, a command module never imports another command module nor the harness; only the harness
(registry, cli, reference, __main__) imports command modules, and nothing outside commands/ imports one."""

import ast
import os
import subprocess
import sys

import pytest

from helpers import ROOT

# layer -> the project layers and third-party packages it may import
LAYERS = {
    "core": ({"core"}, {"yaml"}),  # yaml: topology files are read wherever a spec is, workers included
    "rules": ({"core", "rules"}, set()),
    "workloads": ({"core", "workloads"}, {"torch", "scipy", "lz4", "sklearn"}),
    "simulation": ({"core", "rules", "workloads", "simulation"}, {"scipy"}),
    "net": ({"core", "rules", "net"}, {"mininet"}),
    "ryu-app": ({"core", "rules", "ryu-app"}, {"ryu", "eventlet"}),
    "results": ({"core", "rules", "workloads", "simulation", "results"}, {"matplotlib"}),
    "run": ({"core", "rules", "workloads", "simulation", "net", "results", "run"}, {"yaml", "matplotlib", "tqdm"}),
    "backends": ({"core", "rules", "workloads", "simulation", "net", "results", "run", "backends"},
                 {"yaml", "matplotlib"}),
    "commands": ({"core", "rules", "workloads", "simulation", "net", "results", "run", "backends", "commands"},
                 {"yaml", "matplotlib"}),
    "api": ({"core", "rules", "workloads", "simulation", "net", "results", "run", "backends", "commands", "api"},
            {"torch", "yaml"}),  # yaml: the labs' checker reads a student's answers.yaml
}
THIRD_PARTY_WATCHED = {"torch", "scipy", "lz4", "sklearn", "mininet", "ryu", "eventlet", "yaml", "matplotlib", "tqdm"}
FOLDERS = {"core", "simulation", "net", "results", "run", "backends", "commands"}  # emulation/<folder> is its own layer
HARNESS = {"registry", "cli", "reference", "__main__", "base", "command_rows", "matrix_child"}  # commands/ modules that are not commands (matrix_child: a matrix task's process)
SHARED = {"base", "command_rows"}  # of those, what command modules may import (the harness hands command_rows its parser)


def layer_of(module: str) -> str:
    """The layer a project module belongs to: its folder (None for third-party and stdlib)."""
    parts = module.split(".")
    if parts[0] == "emulation" and len(parts) > 1:
        return parts[1] if parts[1] in FOLDERS else None
    if parts[0] == "controllers":
        return "rules" if len(parts) > 1 and parts[1] in ("flow_rules", "paths") else "ryu-app"
    if parts[0] == "workloads":
        return "workloads"
    if parts[0] == "dmlbed":
        return "api"
    return None


def project_modules():
    for top in ("emulation", "controllers", "workloads", "dmlbed"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    yield rel.removesuffix(".__init__"), path


def imports_of(path: str, module: str):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative imports are not used in this project"
            yield node.module, node.lineno
            for alias in node.names:  # `from emulation import net` imports emulation.net
                yield f"{node.module}.{alias.name}", node.lineno


MODULES = sorted(project_modules())


def test_every_module_has_a_layer_and_every_folder_is_one():
    assert [m for m, _ in MODULES if m not in ("emulation", "controllers") and layer_of(m) is None] == []
    folders = {d for d in os.listdir(os.path.join(ROOT, "emulation"))
               if os.path.isfile(os.path.join(ROOT, "emulation", d, "__init__.py"))}
    assert folders == FOLDERS
    assert layer_of("dmlbed.ddp") == "api" and "run" not in LAYERS["workloads"][0]


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_downward(module, path):
    layer = layer_of(module)
    if layer is None:
        return
    allowed_layers, allowed_packages = LAYERS[layer]
    bad = []
    for target, line in imports_of(path, module):
        top = target.split(".")[0]
        target_layer = layer_of(target)
        if target_layer is not None and target_layer not in allowed_layers:
            bad.append(f"line {line}: {target} ({target_layer})")
        elif target_layer is None and top in THIRD_PARTY_WATCHED and top not in allowed_packages:
            bad.append(f"line {line}: {target}")
    assert bad == [], f"{module} ({layer}) imports above its layer"


def test_the_checker_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from emulation.commands import run\n")
    assert ("emulation.commands", 2) in list(imports_of(str(bad), "workloads.bad"))
    assert layer_of("emulation.commands.run") not in LAYERS["run"][0]
    assert layer_of("emulation.backends.emulator") not in LAYERS["run"][0]


def test_only_the_registry_names_algorithms():
    """Outside workloads/algorithms/, nothing compares an algorithm name."""
    from workloads.algorithms import ALGORITHMS
    names = set(ALGORITHMS)
    found = []
    for module, path in MODULES:
        if module.startswith("workloads.algorithms"):
            continue
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for operand in [node.left] + node.comparators:
                    values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                    for v in values:
                        if isinstance(v, ast.Constant) and v.value in names:
                            found.append(f"{module}:{node.lineno} compares {v.value!r}")
    assert found == []


def test_nothing_dispatches_on_a_back_end_mode():
    """Outside backends/__init__.py (the registry), no module compares a mode name to pick a back end."""
    from emulation.backends import BACKENDS
    found = []
    for module, path in MODULES:
        if module in ("emulation.backends",) or not module.startswith(("emulation.", "dmlbed")):
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
                operands = [node.test.left] + node.test.comparators
                if any(isinstance(o, ast.Attribute) and o.attr == "mode" for o in operands) and \
                        any(isinstance(o, ast.Constant) and o.value in BACKENDS for o in operands):
                    found.append(f"{module}:{node.lineno}")
    assert found == []


def project_imports(module: str, path: str):
    """The project modules `module` imports (module-level and function-level), by dotted name."""
    known = {m for m, _ in MODULES}
    out = set()
    for target, _ in imports_of(path, module):
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != module:
            out.add(target)
    return out


def command_modules():
    return {m for m, _ in MODULES if m.startswith("emulation.commands.") and m.rsplit(".", 1)[1] not in HARNESS}


def test_no_command_module_is_imported_but_by_the_harness():
    commands, bad = command_modules(), []
    for module, path in MODULES:
        name = module.rsplit(".", 1)[-1]
        harness = module.startswith("emulation.commands.") and name in HARNESS - SHARED
        in_commands = module.startswith("emulation.commands.")
        for target in project_imports(module, path):
            if target in commands and not harness and (in_commands or module.startswith("emulation.")):
                bad.append(f"{module} imports the command module {target}")
            if in_commands and not harness and target.rsplit(".", 1)[1] in HARNESS - SHARED and \
                    target.startswith("emulation.commands."):
                bad.append(f"{module} imports the harness {target}")
    assert bad == []


def test_every_command_is_one_module_in_the_registry():
    from emulation.commands.registry import COMMANDS
    modules = {type(c).__module__ for c in COMMANDS}
    assert modules == command_modules()
    assert len(modules) == len(COMMANDS)  # one command per module, its plug-in, work and table together


def cycles(prefix: str):
    """Import cycles among the project modules under prefix (each as a list of modules)."""
    paths = dict(MODULES)
    graph = {m: {t for t in project_imports(m, p) if t.startswith(prefix)} for m, p in paths.items()
             if m.startswith(prefix)}
    found, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


@pytest.mark.parametrize("prefix", ["emulation.net", "emulation.run", "emulation.core", "emulation.simulation",
                                    "emulation.backends", "emulation.commands", "controllers"])
def test_no_import_cycle(prefix):
    assert cycles(prefix) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from emulation.net import zz_b\n")
    b.write_text("def f():\n    from emulation.net import zz_a\n")
    monkeypatch.setattr(__import__(__name__), "MODULES", MODULES + [("emulation.net.zz_a", str(a)),
                                                                      ("emulation.net.zz_b", str(b))])
    assert cycles("emulation.net") == [["emulation.net.zz_a", "emulation.net.zz_b", "emulation.net.zz_a"]]


def test_kernel_probes_need_no_mininet():
    path = dict(MODULES)["emulation.net.kernel_probes"]
    assert not [t for t, _ in imports_of(path, "emulation.net.kernel_probes") if t.split(".")[0] == "mininet"]


def test_no_module_name_is_used_twice():
    """Names that explain themselves: no two module files share a name, but for one algorithm seen from two layers
    (its descriptor in workloads/algorithms, its ranks' strategy in workloads/strategies) and a folder's base.py
    (dmlbed/ddp.py, the public name users know from `dmlbed.ddp.register`, aside)."""
    paths = dict(MODULES)
    seen = {}
    for module, path in MODULES:
        name = os.path.basename(path)
        if name in ("__init__.py", "__main__.py", "base.py") or module == "dmlbed.ddp":
            continue
        seen.setdefault(name, []).append(module)
    parallel = {m for m in paths if m.startswith(("workloads.algorithms.", "workloads.strategies."))}
    twice = {n: ms for n, ms in seen.items() if len(ms) > 1 and not set(ms) <= parallel}
    assert twice == {}


def test_no_sys_path_edits():
    """Scripts, labs and the packages import the installed packages (make setup installs them)."""
    found = subprocess.run(["grep", "-rn", "--include=*.py", "sys.path", "emulation", "workloads", "controllers",
                            "scripts", "labs", "dmlbed"], cwd=ROOT, capture_output=True, text=True).stdout
    assert found == ""


def test_the_cli_starts_without_torch():
    """Every dmlbed command starts in a fraction of a second: torch is imported only by what trains (ranks)."""
    r = subprocess.run([sys.executable, "-c", "import sys, emulation.commands.registry, "
                        "emulation.commands.cli; print('torch' in sys.modules)"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr


RESULT_FILES = ("summary.json", "iterations.csv", "workers.csv", "trace.json", "links.csv", "background.csv",
                "comparison.csv", "comparison.json", "accuracy.csv", "paper.csv", "papers.csv", "sim_vs_emu.csv",
                "jobs.json", "bench.json", "bench.csv", "calibration.json", "report.html", "provenance.json",
                "RunFolder.SUMMARY", "RunFolder.ITERATIONS", "RunFolder.WORKERS_CSV", "RunFolder.LINKS",
                "RunFolder.TRACE", "RunFolder.BACKGROUND", "RunFolder.TIMELINE")


def opened_paths(node):
    """The path arguments of the file opens in a function: open(X) and os.open(X)."""
    for c in ast.walk(node):
        if isinstance(c, ast.Call) and c.args and (isinstance(c.func, ast.Name) and c.func.id == "open" or
                                                   isinstance(c.func, ast.Attribute) and c.func.attr == "open"):
            yield c.args[0]


def openers_of_result_files(path: str):
    """(function, line) of every function that opens a result file itself: the path it opens names one, directly
    or through a variable the function assigned from an expression that names one."""
    source = open(path).read()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigned = {}
        for a in ast.walk(node):
            if isinstance(a, ast.Assign):
                for t in a.targets:
                    if isinstance(t, ast.Name):
                        assigned[t.id] = assigned.get(t.id, "") + (ast.get_source_segment(source, a.value) or "")
        for arg in opened_paths(node):
            text = ast.get_source_segment(source, arg) or ""
            text += "".join(assigned.get(n.id, "") for n in ast.walk(arg) if isinstance(n, ast.Name))
            if any(name in text for name in RESULT_FILES):
                yield node.name, node.lineno
                break


def test_only_the_results_files_module_opens_a_result_file():
    """Every result file of a results folder is written and read through emulation/results/files.py (the rank side
    writes its own records through workloads/runfolder.py, the process boundary's contract)."""
    found = [f"{module}.{name} (line {line})" for module, path in MODULES
             if module not in ("emulation.results.files", "workloads.runfolder")
             for name, line in openers_of_result_files(path)]
    assert found == []


def test_the_result_file_check_catches_an_open(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('import json, os\n\ndef f(out):\n    """Read it."""\n'
                   '    return json.load(open(os.path.join(out, "summary.json")))\n')
    assert list(openers_of_result_files(str(bad))) == [("f", 3)]
