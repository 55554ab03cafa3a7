"""Models defined with torch.nn (no torchvision here), in a registry: lenet5, vgg19, alexnet, mlp:SIZE."""

from __future__ import annotations

import re
from typing import Callable, Dict, Tuple

import torch
from torch import nn


class ModelError(ValueError):
    """Unknown model name or bad size."""


def lenet5() -> nn.Module:
    """The BML paper's LeNet-5: conv 5x5x32, conv 5x5x64, fc 3136->1024, fc 1024->10 (3.27M parameters)."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))


VGG19_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
             512, 512, 512, 512, "M"]


def vgg19() -> nn.Module:
    """VGG-19 for 3x224x224 inputs and 1000 classes (143.67M parameters)."""
    layers, channels = [], 3
    for v in VGG19_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(channels, v, 3, padding=1), nn.ReLU()]
            channels = v
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(512 * 7 * 7, 4096), nn.ReLU(),
                         nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))


def alexnet() -> nn.Module:
    """AlexNet (the torchvision layout) for 3x224x224 inputs and 1000 classes (61.1M parameters)."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.AdaptiveAvgPool2d((6, 6)), nn.Flatten(),
        nn.Linear(256 * 36, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1000))


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


def mlp(size: str) -> nn.Module:
    """Two-layer perceptron 256 -> h -> 10 with h chosen so the model has about SIZE parameters."""
    hidden = max(1, round((parse_size(size) - MLP_CLASSES) / (MLP_INPUT + 1 + MLP_CLASSES)))
    return nn.Sequential(nn.Linear(MLP_INPUT, hidden), nn.ReLU(), nn.Linear(hidden, MLP_CLASSES))


MODELS: Dict[str, Tuple[Callable[[], nn.Module], Tuple[int, ...]]] = {
    "lenet5": (lenet5, (1, 28, 28)),
    "vgg19": (vgg19, (3, 224, 224)),
    "alexnet": (alexnet, (3, 224, 224)),
}


def build_model(name: str, seed: int = 0) -> Tuple[nn.Module, Tuple[int, ...]]:
    """(model with seeded identical initial weights, input shape) for a registry name or mlp:SIZE."""
    torch.manual_seed(seed)
    if name.startswith("mlp:"):
        return mlp(name[4:]), (MLP_INPUT,)
    if name not in MODELS:
        raise ModelError(f"unknown model '{name}': valid are {', '.join(MODELS)}, mlp:SIZE (e.g. mlp:12.5MB)")
    factory, shape = MODELS[name]
    return factory(), shape


def input_shape(name: str) -> Tuple[int, ...]:
    """A model's input shape, validating the name without building the model (cheap for big models)."""
    if name.startswith("mlp:"):
        parse_size(name[4:])
        return (MLP_INPUT,)
    if name not in MODELS:
        raise ModelError(f"unknown model '{name}': valid are {', '.join(MODELS)}, mlp:SIZE (e.g. mlp:12.5MB)")
    return MODELS[name][1]


def parameter_count(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
