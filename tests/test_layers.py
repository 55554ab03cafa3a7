"""Layers only import downward: pure description <- workloads <- orchestration (every import statement counts,
function-level ones included)."""

import ast
import os

import pytest

from helpers import ROOT

# layer -> the project layers and third-party packages it may import
LAYERS = {
    "spec": ({"spec"}, set()),
    "rules": ({"spec", "rules"}, set()),
    "workloads": ({"spec", "workloads"}, {"torch", "scipy", "lz4", "sklearn"}),
    "simulation": ({"spec", "rules", "workloads", "simulation"}, {"scipy"}),
    "net": ({"spec", "rules", "net"}, {"mininet"}),
    "ryu-app": ({"spec", "rules", "ryu-app"}, {"ryu", "eventlet"}),
    "orchestration": ({"spec", "rules", "workloads", "simulation", "net", "orchestration"},
                      {"torch", "scipy", "yaml", "matplotlib", "tqdm"}),
    "api": ({"spec", "rules", "workloads", "simulation", "net", "orchestration", "api"}, {"torch"}),
}
THIRD_PARTY_WATCHED = {"torch", "scipy", "lz4", "sklearn", "mininet", "ryu", "eventlet", "yaml", "matplotlib", "tqdm"}


def layer_of(module: str) -> str:
    """The layer a project module belongs to (None for third-party and stdlib)."""
    parts = module.split(".")
    if parts[0] == "emulation" and len(parts) > 1:
        return {"spec": "spec", "net": "net", "simulation": "simulation",
                "orchestration": "orchestration"}.get(parts[1])
    if parts[0] == "controllers":
        return "rules" if len(parts) > 1 and parts[1] in ("rules", "paths") else "ryu-app"
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


def test_every_module_has_a_layer():
    assert [m for m, _ in MODULES if m not in ("emulation", "controllers") and layer_of(m) is None] == []
    assert layer_of("dmlbed.ddp") == "api" and "orchestration" not in LAYERS["workloads"][0]


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
    bad.write_text("def f():\n    from emulation.orchestration import experiment\n")
    assert ("emulation.orchestration", 2) in list(imports_of(str(bad), "workloads.bad"))
    assert layer_of("emulation.orchestration.experiment") not in LAYERS["workloads"][0]


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


# Orchestration: commands side by side over shared plumbing. A command module runs one `dmlbed` command; the
# harness (cli, commands) may import every command, compare may import the two it runs, nothing else imports a
# command (a helper two commands need lives in a plumbing module).
COMMAND_MODULES = {"experiment", "simulate", "compare", "bench", "calibrate", "netcheck", "theory", "launch",
                   "reproduce_all"}
HARNESS = {"cli", "commands", "api"}
COMMAND_IMPORTS = {"compare": {"experiment", "simulate", "theory"}, "reproduce_all": {"compare"}}  # matrices of matrices


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


def test_no_command_module_imports_another_for_a_helper():
    bad = []
    for module, path in MODULES:
        if not module.startswith("emulation.orchestration."):
            continue
        name = module.rsplit(".", 1)[1]
        if name in HARNESS:
            continue
        allowed = COMMAND_IMPORTS.get(name, set())
        for target in project_imports(module, path):
            if target.startswith("emulation.orchestration."):
                other = target.rsplit(".", 1)[1]
                if other in COMMAND_MODULES and other not in allowed:
                    bad.append(f"{name} imports the command module {other}")
    assert bad == []


def test_every_command_module_exists():
    names = {m.rsplit(".", 1)[1] for m, _ in MODULES if m.startswith("emulation.orchestration.")}
    assert COMMAND_MODULES | {"cli", "commands"} <= names


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


@pytest.mark.parametrize("prefix", ["emulation.net", "emulation.orchestration", "emulation.spec",
                                    "emulation.simulation", "controllers"])
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
    path = dict(MODULES)["emulation.net.probes"]
    assert not [t for t, _ in imports_of(path, "emulation.net.probes") if t.split(".")[0] == "mininet"]


def test_the_cli_starts_without_torch():
    """Every dmlbed command starts in a fraction of a second: torch is imported only by what trains (ranks)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import sys, emulation.orchestration.commands, "
                        "emulation.orchestration.cli; print('torch' in sys.modules)"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr
