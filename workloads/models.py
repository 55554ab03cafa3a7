"""Models by name: the papers' models in torchvision's layouts (lenet5, alexnet, vgg19, vgg19-22k as layer lists;
resnet50, googlenet, inception_v3 in workloads/zoo.py), mlp:SIZE, a mixture of experts moe:ExD (workloads/moe.py),
and a user's own nn.Module as
package.module:factory. Sizes and FLOPs of every named model come from model_table.json (generated from the built
models by scripts/model_table.py and checked against them by a test), so theory, simulation and validation answer
without torch."""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from workloads.transformer import FORMAT as TRANSFORMER_FORMAT, is_transformer

Layer = Tuple  # ("conv", in, out, kernel, stride, padding) | ("linear", in, out) | ("relu",) | ("maxpool", k, s)
               # | ("avgpool", h, w) | ("flatten",) | ("dropout", p)
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_table.json")
IMAGENET_22K_CLASSES = 21841


class ModelError(ValueError):
    """Unknown model name or bad size."""


def lenet5() -> List[Layer]:
    """The BML paper's LeNet-5: conv 5x5x32, conv 5x5x64, fc 3136->1024, fc 1024->10 (3.27M parameters)."""
    return [("conv", 1, 32, 5, 1, 2), ("relu",), ("maxpool", 2, 2),
            ("conv", 32, 64, 5, 1, 2), ("relu",), ("maxpool", 2, 2),
            ("flatten",), ("linear", 3136, 1024), ("relu",), ("linear", 1024, 10)]


VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
             512, 512, 512, 512, "M"]


def vgg19(classes: int = 1000) -> List[Layer]:
    """VGG-19 as torchvision lays it out, for 3x224x224 inputs (143,667,240 parameters with 1000 classes; the iBatch
    paper's VGG19-22K has 21,841)."""
    layers, channels = [], 3
    for v in VGG19_CFG:
        if v == "M":
            layers.append(("maxpool", 2, 2))
        else:
            layers += [("conv", channels, v, 3, 1, 1), ("relu",)]
            channels = v
    return layers + [("avgpool", 7, 7), ("flatten",), ("linear", 512 * 7 * 7, 4096), ("relu",), ("dropout", 0.5),
                     ("linear", 4096, 4096), ("relu",), ("dropout", 0.5), ("linear", 4096, classes)]


def alexnet() -> List[Layer]:
    """AlexNet as torchvision lays it out, for 3x224x224 inputs and 1000 classes (61,100,840 parameters)."""
    return [("conv", 3, 64, 11, 4, 2), ("relu",), ("maxpool", 3, 2),
            ("conv", 64, 192, 5, 1, 2), ("relu",), ("maxpool", 3, 2),
            ("conv", 192, 384, 3, 1, 1), ("relu",),
            ("conv", 384, 256, 3, 1, 1), ("relu",),
            ("conv", 256, 256, 3, 1, 1), ("relu",), ("maxpool", 3, 2),
            ("avgpool", 6, 6), ("flatten",), ("dropout", 0.5),
            ("linear", 256 * 36, 4096), ("relu",), ("dropout", 0.5), ("linear", 4096, 4096), ("relu",),
            ("linear", 4096, 1000)]


MLP_INPUT = 256
MLP_CLASSES = 10


def parse_size(text: str) -> int:
    """Parameter count from '3.27M', '500K', '1000', or a byte size of fp32 gradient like '12.5MB'."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMG]?)(B?)\s*", text.upper())
    if not m:
        raise ModelError(f"mlp size '{text}' is invalid: give parameters (e.g. 3.27M, 500K) or "
                         f"gradient bytes (e.g. 12.5MB)")
    value = float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
    params = value / 4 if m.group(3) else value
    if not 1e3 <= params <= 5e8:
        raise ModelError(f"mlp size '{text}' gives {params:.0f} parameters: valid is 1K..500M")
    return int(params)


def mlp(size: str) -> List[Layer]:
    """Two-layer perceptron 256 -> h -> 10 with h chosen so the model has about SIZE parameters."""
    hidden = max(1, round((parse_size(size) - MLP_CLASSES) / (MLP_INPUT + 1 + MLP_CLASSES)))
    return [("linear", MLP_INPUT, hidden), ("relu",), ("linear", hidden, MLP_CLASSES)]


MOE_TOKENS = 16  # an input of MLP_INPUT features is read as 16 tokens of 16 features
MOE_SPEC = re.compile(r"moe:(\d+)x(\d+)")
MOE_VALID = "moe:EXPERTSxWIDTH, e.g. moe:8x256 (2-1024 experts, width 4-8192)"


def moe_shape(name: str) -> Tuple[int, int]:
    """(experts, width) of moe:ExD (ModelError naming the valid form)."""
    m = MOE_SPEC.fullmatch(name)
    if not m or not (2 <= int(m.group(1)) <= 1024 and 4 <= int(m.group(2)) <= 8192):
        raise ModelError(f"model '{name}' is invalid: give {MOE_VALID}")
    return int(m.group(1)), int(m.group(2))


def moe_tensors(experts: int, width: int) -> List[Tuple[str, int]]:
    """(role, elements) of each parameter tensor of moe:ExD in parameters() order: the token embedding, the gate,
    every expert's two layers, the classifier head; role 'expert' for an expert's tensors, 'dense' otherwise."""
    d = width
    dense = lambda *n: [("dense", v) for v in n]  # noqa: E731
    expert = [("expert", v) for v in (d * d, d, d * d, d)]
    return (dense(MLP_INPUT // MOE_TOKENS * d, d, d * experts, experts) + expert * experts
            + dense(MLP_CLASSES * d, MLP_CLASSES))


def moe_shape_of_sizes(sizes) -> Tuple[int, int]:
    """(experts, width) of the moe:ExD model whose tensors have these sizes (ModelError for any other model)."""
    sizes = [int(n) for n in sizes]
    if len(sizes) >= 4:
        experts, width = sizes[3], sizes[1]
        if 2 <= experts <= 1024 and [n for _, n in moe_tensors(experts, width)] == sizes:
            return experts, width
    raise ModelError(f"expert parallelism needs a mixture-of-experts model: give --model {MOE_VALID}")


def moe_entry(name: str) -> dict:
    """The table entry of moe:ExD: its tensors and forward FLOPs per sample (an expert's share of the tokens is
    1/experts of them at full capacity)."""
    experts, d = moe_shape(name)
    tensors = moe_tensors(experts, d)
    per_weight = [2.0 * MLP_INPUT * d, 0.0, 2.0 * MOE_TOKENS * d * experts, 0.0]
    per_weight += [2.0 * MOE_TOKENS / experts * d * d, 0.0] * 2 * experts + [2.0 * d * MLP_CLASSES, 0.0]
    return {"input": [MLP_INPUT], "tensors": [n for _, n in tensors], "flops": per_weight, "ready_order": None}


def is_moe(name: str) -> bool:
    """A moe:... name."""
    return name.startswith("moe:")


LAYER_MODELS = {
    "lenet5": (lenet5, (1, 28, 28)),
    "alexnet": (alexnet, (3, 224, 224)),
    "vgg19": (vgg19, (3, 224, 224)),
    "vgg19-22k": (lambda: vgg19(IMAGENET_22K_CLASSES), (3, 224, 224)),
}
ZOO_MODELS = ("resnet50", "googlenet", "inception_v3")  # built by workloads.zoo (needs torch)
NAMED = tuple(LAYER_MODELS) + ZOO_MODELS
VALID = (f"{', '.join(NAMED)}, mlp:SIZE (e.g. mlp:12.5MB), {MOE_VALID}, or package.module:factory (your own "
         f"nn.Module)")
TRANSFORMER_HINT = {True: f" (a transformer, {TRANSFORMER_FORMAT} or a preset, runs with --parallel in theory and "
                         f"simulate)"}
USER_MODEL = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def is_user_model(name: str) -> bool:
    """A package.module:factory name."""
    return not name.startswith(("mlp:", "moe:")) and bool(USER_MODEL.fullmatch(name))


def layers_of(name: str) -> Tuple[List[Layer], Tuple[int, ...]]:
    """(layer list, input shape) of a layer-list model or mlp:SIZE."""
    if name.startswith("mlp:"):
        return mlp(name[4:]), (MLP_INPUT,)
    factory, shape = LAYER_MODELS[name]
    return factory(), shape


@functools.lru_cache(maxsize=None)
def table() -> Dict[str, dict]:
    """The generated per-tensor sizes and FLOPs of every named model."""
    with open(TABLE) as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def user_model(name: str) -> dict:
    """A user model's entry, in the table's form, from building it once (ModelError when it cannot be built)."""
    model, shape = build_model(name)
    params = [p for p in model.parameters() if p.requires_grad]
    return {"input": list(shape), "tensors": [p.numel() for p in params], "shapes": [list(p.shape) for p in params],
            "flops": None, "ready_order": None}


def entry(name: str) -> dict:
    """{input, tensors, flops} of a model (ModelError for an unknown name)."""
    if name.startswith("mlp:"):
        layers, shape = layers_of(name)
        tensors = [n for l in layers for n in layer_tensors(l)]  # weight, bias of each linear layer
        return {"input": list(shape), "tensors": tensors, "shapes": [s for l in layers for s in layer_shapes(l)],
                "flops": [2.0 * n if i % 2 == 0 else 0.0 for i, n in enumerate(tensors)], "ready_order": None}
    if is_moe(name):
        return moe_entry(name)
    if name in NAMED:
        return table()[name]
    if is_user_model(name):
        return user_model(name)
    raise ModelError(f"unknown model '{name}': valid are {VALID}" + TRANSFORMER_HINT.get(is_transformer(name), ""))


def input_shape(name: str) -> Tuple[int, ...]:
    """A model's input shape, validating the name (no torch for a named model)."""
    return tuple(entry(name)["input"])


def layer_shapes(layer: Layer) -> List[List[int]]:
    """The shapes of one layer's parameter tensors, as torch makes them: [weight, bias], or none."""
    if layer[0] == "conv":
        _, cin, cout, k = layer[:4]
        return [[cout, cin, k, k], [cout]]
    if layer[0] == "linear":
        return [[layer[2], layer[1]], [layer[2]]]
    return []


def tensor_shapes(name: str) -> List[Tuple[int, ...]]:
    """The shape of each parameter tensor in model.parameters() order (no torch for a named model)."""
    found = entry(name).get("shapes")
    return [tuple(s) for s in found] if found else [(n,) for n in tensor_sizes(name)]


def shapes_for(name: str, sizes: Sequence[int]) -> List[Tuple[int, ...]]:
    """The shapes of a run of the model's tensors with these sizes (the whole model or one DDP bucket, in either
    order); vectors where no run matches."""
    every, shapes, want = tensor_sizes(name), tensor_shapes(name), [int(n) for n in sizes]
    for order in (1, -1):
        ordered_sizes, ordered_shapes = every[::order], shapes[::order]
        for start in range(len(every) - len(want) + 1):
            if ordered_sizes[start:start + len(want)] == want:
                return ordered_shapes[start:start + len(want)]
    return [(n,) for n in want]


def layer_tensors(layer: Layer) -> List[int]:
    """Elements of one layer's parameter tensors: [weight, bias], or none."""
    if layer[0] == "conv":
        _, cin, cout, k = layer[:4]
        return [cin * cout * k * k, cout]
    if layer[0] == "linear":
        return [layer[1] * layer[2], layer[2]]
    return []


def layer_parameters(layer: Layer) -> int:
    """Trainable parameters of one layer (weights and bias)."""
    return sum(layer_tensors(layer))


def layer_tensor_counts(name: str) -> List[int]:
    """How many consecutive parameter tensors make each layer (a layer-list model's weight and bias; one per tensor
    where the layers are not listed: a zoo or user model)."""
    if name.startswith("mlp:") or name in LAYER_MODELS:
        return [n for n in (len(layer_tensors(l)) for l in layers_of(name)[0]) if n]
    return [1] * len(tensor_sizes(name))


def tensor_sizes(name: str) -> List[int]:
    """Elements of each parameter tensor in model.parameters() order (no torch for a named model)."""
    return list(entry(name)["tensors"])


def tensor_flops(name: str) -> Optional[List[float]]:
    """Forward FLOPs per sample attributed to each parameter tensor (its module's), or None for a user model."""
    flops = entry(name)["flops"]
    return None if flops is None else list(flops)


def ready_order(name: str) -> Optional[List[int]]:
    """The order in which backward makes the parameters' gradients ready (None: the reverse parameter order)."""
    order = entry(name).get("ready_order")
    return None if order is None else list(order)


def parameter_count_of(name: str) -> int:
    """Trainable parameters of a model (no torch for a named model)."""
    return sum(tensor_sizes(name))


def to_module(layer: Layer):
    """The torch module of one layer."""
    from torch import nn
    kind = layer[0]
    if kind == "conv":
        _, cin, cout, k, stride, padding = layer
        return nn.Conv2d(cin, cout, k, stride=stride, padding=padding)
    if kind == "linear":
        return nn.Linear(layer[1], layer[2])
    if kind == "relu":
        return nn.ReLU()
    if kind == "maxpool":
        return nn.MaxPool2d(layer[1], layer[2])
    if kind == "avgpool":
        return nn.AdaptiveAvgPool2d((layer[1], layer[2]))
    if kind == "flatten":
        return nn.Flatten()
    if kind == "dropout":
        return nn.Dropout(layer[1])
    raise ModelError(f"unknown layer kind {kind!r}")


class UserModules(importlib.abc.MetaPathFinder):
    """Finds top-level modules in the user's folders first, as `python -m` finds them from the working directory (and
    their own imports of sibling modules), without changing the interpreter's search path."""

    def __init__(self, folders: Sequence[str]):
        self.folders = list(folders)

    def find_spec(self, name, path=None, target=None):
        """A top-level module in one of the folders (submodules are found through their package's __path__)."""
        if path is not None:
            return None
        return importlib.machinery.PathFinder.find_spec(name, self.folders)


def user_modules(folders: Sequence[str]) -> None:
    """Let imports find modules in these folders first (once per folder set)."""
    if not any(isinstance(f, UserModules) and f.folders == list(folders) for f in sys.meta_path):
        sys.meta_path.insert(0, UserModules(folders))


def build_user_model(name: str, folders: Sequence[str] = ()):
    """(module, input shape) from package.module:factory: factory() returns an nn.Module with an `input_shape`; the
    module is found in folders (default: the working directory) before the installed packages."""
    module_name, _, factory_name = name.partition(":")
    user_modules(list(folders) or [os.getcwd()])
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError) as exc:
        raise ModelError(f"--model {name}: cannot import {factory_name} from {module_name} ({exc}); give "
                         f"package.module:factory importable from the working directory") from None
    model = factory()
    shape = getattr(model, "input_shape", None)
    if not hasattr(model, "parameters") or not shape:
        raise ModelError(f"--model {name}: {factory_name}() must return an nn.Module with an input_shape attribute "
                         f"(e.g. model.input_shape = (3, 224, 224))")
    return model, tuple(int(v) for v in shape)


def build_model(name: str, seed: int = 0, folders: Sequence[str] = ()):
    """(torch model with seeded identical initial weights, input shape) for any model name (a user's model found in
    folders first, default the working directory)."""
    import torch
    torch.manual_seed(seed)
    if name in ZOO_MODELS:
        from workloads import zoo
        factory, shape = zoo.ZOO[name]
        return factory(), shape
    if is_user_model(name):
        return build_user_model(name, folders)
    if is_moe(name):
        from workloads.moe import MoEModel
        return MoEModel(*moe_shape(name)), (MLP_INPUT,)
    if name not in LAYER_MODELS and not name.startswith("mlp:"):
        raise ModelError(f"unknown model '{name}': valid are {VALID}" + TRANSFORMER_HINT.get(is_transformer(name), ""))
    layers, shape = layers_of(name)
    return torch.nn.Sequential(*[to_module(l) for l in layers]), shape


def parameter_count(model) -> int:
    """Number of trainable parameters of a built model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
