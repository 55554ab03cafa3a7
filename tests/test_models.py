"""The papers' models in torchvision's layouts: parameter counts equal torchvision's published ones, the generated
table (what theory and simulation read without torch) equals the built models, users' own models load by name."""

import importlib.util
import os
import sys

import pytest
import torch

from workloads.models import (NAMED, ModelError, build_model, input_shape, parameter_count, parameter_count_of,
                              table, tensor_flops, tensor_sizes)
from workloads.zoo import InceptionAux

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))

# torchvision's published counts (its model documentation and the models themselves with default arguments)
TORCHVISION = {"alexnet": 61_100_840, "vgg19": 143_667_240, "resnet50": 25_557_032,
               "googlenet": 6_624_904,  # aux_logits=False
               "inception_v3": 27_161_264}  # aux_logits=True (torchvision's default)


@pytest.mark.parametrize("name", sorted(TORCHVISION))
def test_parameter_counts_equal_torchvision(name):
    model, _ = build_model(name)
    count = parameter_count(model)
    if name == "inception_v3":  # dmlbed leaves out the auxiliary classifier (DDP needs every parameter used)
        count += parameter_count(InceptionAux(768, 1000))
    assert count == TORCHVISION[name]


def test_vgg19_22k_is_vgg19_with_a_21841_class_head():
    assert parameter_count_of("vgg19-22k") == 143_667_240 + (4096 + 1) * (21_841 - 1000)


@pytest.mark.parametrize("name", NAMED)
def test_the_table_is_the_built_model(name):
    """What theory and simulation read without torch is what the ranks train (regenerate with
    scripts/model_table.py)."""
    import model_table
    model, shape = build_model(name)
    assert tensor_sizes(name) == [p.numel() for p in model.parameters()]
    assert input_shape(name) == shape
    assert table()[name] == model_table.measure(name)


@pytest.mark.parametrize("name,classes", [("resnet50", 1000), ("googlenet", 1000), ("inception_v3", 1000)])
def test_zoo_models_train_one_step(name, classes):
    model, shape = build_model(name)
    model.train()
    x = torch.randn((2,) + tuple(shape))
    loss = torch.nn.functional.cross_entropy(model(x), torch.tensor([1, 2]))
    loss.backward()
    assert model(x).shape == (2, classes)
    assert all(p.grad is not None for p in model.parameters())  # no unused parameter (DDP needs none)


def test_flops_follow_the_known_totals():
    """Forward GFLOPs per image (2 x MACs): AlexNet 1.43, VGG-19 39.3, ResNet-50 8.2, GoogLeNet 3.0, Inception 11.5."""
    expected = {"alexnet": 1.43, "vgg19": 39.3, "resnet50": 8.2, "googlenet": 3.0, "inception_v3": 11.5}
    for name, gflops in expected.items():
        assert sum(tensor_flops(name)) / 1e9 == pytest.approx(gflops, rel=0.02)


def test_a_users_module_factory_model(tmp_path, monkeypatch):
    (tmp_path / "mymodels.py").write_text(
        "import torch\n"
        "def tiny():\n"
        "    m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 7), torch.nn.ReLU(),\n"
        "                            torch.nn.Linear(7, 10))\n"
        "    m.input_shape = (3, 2, 2)\n"
        "    return m\n"
        "def shapeless():\n"
        "    return torch.nn.Linear(3, 3)\n")
    monkeypatch.chdir(tmp_path)
    assert input_shape("mymodels:tiny") == (3, 2, 2)
    assert tensor_sizes("mymodels:tiny") == [84, 7, 70, 10] and tensor_flops("mymodels:tiny") is None
    with pytest.raises(ModelError, match="input_shape attribute"):
        input_shape("mymodels:shapeless")
    with pytest.raises(ModelError, match="cannot import nothere"):
        input_shape("mymodels:nothere")
    with pytest.raises(ModelError, match="unknown model"):
        input_shape("resnet51")


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed")
@pytest.mark.parametrize("name", ["alexnet", "vgg19", "resnet50", "googlenet", "inception_v3"])
def test_module_by_module_against_torchvision(name):
    """Where torchvision loads (not on these machines: its compiled ops do not match this torch), every parameter
    has the name and shape torchvision gives it."""
    try:
        import torchvision.models as tv
    except Exception as exc:  # installed but broken, as here: "operator torchvision::nms does not exist"
        pytest.skip(f"torchvision does not load: {exc}")
    kwargs = {"googlenet": {"aux_logits": False, "init_weights": False},
              "inception_v3": {"aux_logits": False, "init_weights": False}}.get(name, {})
    theirs = dict(getattr(tv, name)(weights=None, **kwargs).named_parameters())
    ours = dict(build_model(name)[0].named_parameters())
    if name in ("alexnet", "vgg19"):  # dmlbed's layer lists are one Sequential: compare shapes in order
        assert [p.shape for p in ours.values()] == [p.shape for p in theirs.values()]
    else:
        assert {k: p.shape for k, p in ours.items()} == {k: p.shape for k, p in theirs.items()}


@pytest.mark.parametrize("model", ["resnet50", "googlenet"])
def test_the_papers_models_train_in_a_run(tmp_path, model):
    from helpers import run_dmlbed
    r = run_dmlbed("run", "--topo", "star:2", "--algo", "ring", "--model", model, "--batch", "1", "--iters", "2",
                   "--local", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = __import__("json").loads(r.stdout)
    assert s["correct"] and s["parameters"] == TORCHVISION[model]


def test_a_users_model_trains_in_a_run(tmp_path):
    from helpers import run_dmlbed
    (tmp_path / "netdef.py").write_text(
        "import torch\n"
        "def small():\n"
        "    m = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),\n"
        "                            torch.nn.Linear(4 * 26 * 26, 10))\n"
        "    m.input_shape = (1, 28, 28)\n"
        "    return m\n")
    import json
    import subprocess
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "run", "--topo", "star:2", "--algo", "ps",
                        "--model", "netdef:small", "--iters", "3", "--local", "--json", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["parameters"] == 4 * 9 + 4 + 4 * 26 * 26 * 10 + 10
    theory = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "theory", "--topo", "star:2",
                             "--algo", "ring", "--model", "netdef:small", "--json"], capture_output=True, text=True,
                            cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__)))))
    assert json.loads(theory.stdout)["parameters"] == s["parameters"]
