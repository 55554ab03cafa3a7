"""Models as layer lists (no torchvision here): lenet5, vgg19, alexnet, mlp:SIZE. The same list builds the torch
model and gives the parameter count without torch, so theory and validation stay instant."""

from __future__ import annotations

import re
from typing import List, Tuple

Layer = Tuple  # ("conv", in, out, kernel, stride, padding) | ("linear", in, out) | ("relu",) | ("maxpool", k, s)
               # | ("avgpool", h, w) | ("flatten",)


class ModelError(ValueError):
    """Unknown model name or bad size."""


def lenet5() -> List[Layer]:
    """The BML paper's LeNet-5: conv 5x5x32, conv 5x5x64, fc 3136->1024, fc 1024->10 (3.27M parameters)."""
    return [("conv", 1, 32, 5, 1, 2), ("relu",), ("maxpool", 2, 2),
            ("conv", 32, 64, 5, 1, 2), ("relu",), ("maxpool", 2, 2),
            ("flatten",), ("linear", 3136, 1024), ("relu",), ("linear", 1024, 10)]


VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
             512, 512, 512, 512, "M"]


def vgg19() -> List[Layer]:
    """VGG-19 for 3x224x224 inputs and 1000 classes (143.67M parameters)."""
    layers, channels = [], 3
    for v in VGG19_CFG:
        if v == "M":
            layers.append(("maxpool", 2, 2))
        else:
            layers += [("conv", channels, v, 3, 1, 1), ("relu",)]
            channels = v
    return layers + [("flatten",), ("linear", 512 * 7 * 7, 4096), ("relu",), ("linear", 4096, 4096), ("relu",),
                     ("linear", 4096, 1000)]


def alexnet() -> List[Layer]:
    """AlexNet (the torchvision layout) for 3x224x224 inputs and 1000 classes (61.1M parameters)."""
    return [("conv", 3, 64, 11, 4, 2), ("relu",), ("maxpool", 3, 2),
            ("conv", 64, 192, 5, 1, 2), ("relu",), ("maxpool", 3, 2),
            ("conv", 192, 384, 3, 1, 1), ("relu",),
            ("conv", 384, 256, 3, 1, 1), ("relu",),
            ("conv", 256, 256, 3, 1, 1), ("relu",), ("maxpool", 3, 2),
            ("avgpool", 6, 6), ("flatten",),
            ("linear", 256 * 36, 4096), ("relu",), ("linear", 4096, 4096), ("relu",), ("linear", 4096, 1000)]


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


MODELS = {
    "lenet5": (lenet5, (1, 28, 28)),
    "vgg19": (vgg19, (3, 224, 224)),
    "alexnet": (alexnet, (3, 224, 224)),
}
VALID = f"{', '.join(MODELS)}, mlp:SIZE (e.g. mlp:12.5MB)"


def layers_of(name: str) -> Tuple[List[Layer], Tuple[int, ...]]:
    """(layer list, input shape) of a registry name or mlp:SIZE."""
    if name.startswith("mlp:"):
        return mlp(name[4:]), (MLP_INPUT,)
    if name not in MODELS:
        raise ModelError(f"unknown model '{name}': valid are {VALID}")
    factory, shape = MODELS[name]
    return factory(), shape


def input_shape(name: str) -> Tuple[int, ...]:
    """A model's input shape, validating the name (no torch)."""
    return layers_of(name)[1]


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


def tensor_sizes(name: str) -> List[int]:
    """Elements of each parameter tensor (weight, then bias, layer by layer), as torch's model.parameters()."""
    return [n for layer in layers_of(name)[0] for n in layer_tensors(layer)]


def parameter_count_of(name: str) -> int:
    """Trainable parameters of a model, counted from its layer list (no torch)."""
    return sum(layer_parameters(l) for l in layers_of(name)[0])


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
    raise ModelError(f"unknown layer kind {kind!r}")


def build_model(name: str, seed: int = 0):
    """(torch model with seeded identical initial weights, input shape) for a registry name or mlp:SIZE."""
    import torch
    layers, shape = layers_of(name)
    torch.manual_seed(seed)
    return torch.nn.Sequential(*[to_module(l) for l in layers]), shape


def parameter_count(model) -> int:
    """Number of trainable parameters of a built model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
