"""Regenerate workloads/model_table.json: per parameter tensor of every named model, its size and the forward
FLOPs per sample of the module it belongs to (convolutions and linear layers 2 x MACs, batch norm 4 per output
element), and the order in which backward makes the gradients ready (DDP builds its buckets in that order),
measured on the built torch models. tests/test_models.py checks the file against them."""

from __future__ import annotations

import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from workloads.models import NAMED, TABLE, build_model


def module_flops(module: torch.nn.Module, out: torch.Tensor) -> float:
    """Forward FLOPs of one sample through a leaf module that owns parameters."""
    per_sample = out[0].numel()
    if isinstance(module, torch.nn.Conv2d):
        kh, kw = module.kernel_size
        return 2.0 * per_sample * module.in_channels // module.groups * kh * kw
    if isinstance(module, torch.nn.Linear):
        return 2.0 * module.in_features * module.out_features
    if isinstance(module, torch.nn.BatchNorm2d):
        return 4.0 * per_sample
    return 0.0


def measure(name: str) -> dict:
    """The table entry of one model: input shape, tensor sizes and shapes, FLOPs per tensor (all on its first
    tensor)."""
    model, shape = build_model(name)
    model.eval()
    flops = {}
    hooks = [m.register_forward_hook(lambda m, i, o: flops.__setitem__(m, module_flops(m, o)))
             for m in model.modules() if not list(m.children()) and list(m.parameters(recurse=False))]
    with torch.no_grad():
        model(torch.zeros((1,) + tuple(shape)))
    for h in hooks:
        h.remove()
    per_tensor = {}
    for m, f in flops.items():
        params = list(m.parameters(recurse=False))
        per_tensor[id(params[0])] = f
    params = [p for p in model.parameters() if p.requires_grad]
    order = []
    handles = [p.register_post_accumulate_grad_hook(lambda p, i=i: order.append(i)) for i, p in enumerate(params)]
    model.train()
    model(torch.zeros((2,) + tuple(shape))).sum().backward()
    for h in handles:
        h.remove()
    return {"input": list(shape), "tensors": [p.numel() for p in params], "shapes": [list(p.shape) for p in params],
            "flops": [per_tensor.get(id(p), 0.0) for p in params], "ready_order": order}


def main() -> int:
    table = {name: measure(name) for name in NAMED}
    with open(TABLE, "w") as f:
        json.dump(table, f, indent=0)
        f.write("\n")
    for name, e in table.items():
        print(f"{name:<14} {sum(e['tensors']):>12,} parameters {sum(e['flops']) / 1e9:8.3f} GFLOPs forward")
    return 0


if __name__ == "__main__":
    sys.exit(main())
