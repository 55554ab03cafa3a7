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
}
THIRD_PARTY_WATCHED = {"torch", "scipy", "lz4", "sklearn", "mininet", "ryu", "eventlet", "yaml", "matplotlib", "tqdm"}


def layer_of(module: str) -> str:
    """The layer a project module belongs to (None for third-party and stdlib)."""
    parts = module.split(".")
    if parts[0] == "emulation" and len(parts) > 1:
        return {"spec": "spec", "net": "net", "simulation": "simulation",
                "orchestration": "orchestration"}.get(parts[1])
    if parts[0] == "controllers":
        return "rules" if len(parts) > 1 and parts[1] in ("rules", "trace") else "ryu-app"
    if parts[0] == "workloads":
        return "workloads"
    return None


def project_modules():
    for top in ("emulation", "controllers", "workloads"):
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
