"""The mixture-of-experts model moe:ExD (Switch Transformer's layer on a small classifier): 256 input features read
as 16 tokens, embedded to width D, one MoE layer of E two-layer experts behind a top-1 gate with a fixed capacity
per expert (GShard's: tokens past it are dropped and pass through the residual only; empty slots are padded), the
tokens averaged and classified. On one rank every expert is local; expert parallelism (workloads/strategies/
expert.py) keeps E/N experts per rank and exchanges the dispatched tokens with an all-to-all before and after them."""

from __future__ import annotations

import math
from typing import Callable, Optional

import torch
from torch import nn

from workloads.models import MLP_CLASSES, MLP_INPUT, MOE_TOKENS

DEFAULT_CAPACITY_FACTOR = 1.0
BALANCE_COEFFICIENT = 0.01  # Switch Transformer's load-balancing loss weight


class WithAuxiliaryLoss(torch.autograd.Function):
    """Returns the activation unchanged; backward adds the gradient of an auxiliary loss, as if it had been added to
    the training loss (Megatron-core's MoEAuxLossAutoScaler), so the training loop stays cross-entropy alone."""

    @staticmethod
    def forward(ctx, activation, aux):
        ctx.save_for_backward(aux)
        return activation

    @staticmethod
    def backward(ctx, grad):
        (aux,) = ctx.saved_tensors
        return grad, torch.ones_like(aux)


def balance_loss(probs: torch.Tensor, expert: torch.Tensor, experts: int) -> torch.Tensor:
    """Switch Transformer's load-balancing loss: experts x sum over experts of (share of tokens routed to it) x
    (mean gate probability it gets), weighted by BALANCE_COEFFICIENT; 1 x the weight when balanced."""
    share = torch.bincount(expert, minlength=experts).float() / expert.numel()
    return BALANCE_COEFFICIENT * experts * torch.sum(share * probs.mean(dim=0))


def capacity(tokens: int, experts: int, factor: float = DEFAULT_CAPACITY_FACTOR) -> int:
    """Slots per expert for one rank's tokens: ceil(factor x tokens / experts) (GShard, Switch)."""
    return max(1, math.ceil(factor * tokens / experts))


class MoELayer(nn.Module):
    """Top-1 gated experts with a fixed capacity per expert. `exchange` (None: every expert is local) moves the
    dispatched slots, shaped (ranks, experts per rank, capacity, width), to the ranks that own the experts and back
    (an all-to-all, its own transpose); `first` is the index of the first expert held here."""

    def __init__(self, width: int, experts: int):
        super().__init__()
        self.width, self.experts_total = width, experts
        self.gate = nn.Linear(width, experts)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
                                     for _ in range(experts))
        self.first = 0
        self.exchange: Optional[Callable[[torch.Tensor, str], torch.Tensor]] = None
        self.slots: Optional[int] = None  # capacity per expert (None: from the capacity factor)
        self.dropped = 0.0  # share of the last batch's tokens past their expert's capacity

    def keep_only(self, first: int, count: int) -> None:
        """Hold only experts first..first+count-1 (expert parallelism)."""
        self.experts = nn.ModuleList(list(self.experts)[first:first + count])
        self.first = first

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h: (tokens, width) -> h plus each kept token's expert output weighted by its gate probability."""
        tokens = h.shape[0]
        slots = self.slots or capacity(tokens, self.experts_total)
        probs = torch.softmax(self.gate(h), dim=-1)
        weight, expert = probs.max(dim=-1)
        onehot = nn.functional.one_hot(expert, self.experts_total)
        position = (torch.cumsum(onehot, dim=0) * onehot).sum(dim=-1) - 1  # arrival order within its expert
        kept = position < slots
        self.dropped = 1.0 - float(kept.float().mean())
        index = (expert * slots + position)[kept]
        dispatched = h.new_zeros(self.experts_total * slots, self.width).index_copy(0, index, h[kept])
        out = self.run_experts(dispatched.view(self.experts_total, slots, self.width))
        combined = out.reshape(-1, self.width).index_select(0, index)
        y = h.new_zeros(tokens, self.width).index_copy(0, kept.nonzero().squeeze(1), combined * weight[kept, None])
        return WithAuxiliaryLoss.apply(h + y, balance_loss(probs, expert, self.experts_total))

    def run_experts(self, slots: torch.Tensor) -> torch.Tensor:
        """(experts, capacity, width) in, each expert's outputs on its slots out (through the owners when
        exchanged)."""
        if self.exchange is None:
            return torch.stack([expert(s) for expert, s in zip(self.experts, slots)])
        local = len(self.experts)
        ranks = self.experts_total // local
        received = self.exchange(slots.reshape(ranks, local, *slots.shape[1:]), "dispatch")
        outputs = torch.stack([expert(received[:, k].reshape(-1, self.width)).view(ranks, -1, self.width)
                               for k, expert in enumerate(self.experts)], dim=1)
        return self.exchange(outputs, "combine").reshape(slots.shape)


class MoEModel(nn.Module):
    """moe:ExD: embed 16 tokens, one MoE layer (residual), average the tokens, classify."""

    def __init__(self, experts: int, width: int):
        super().__init__()
        self.embed = nn.Linear(MLP_INPUT // MOE_TOKENS, width)
        self.moe = MoELayer(width, experts)
        self.head = nn.Linear(width, MLP_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, 256) -> logits (batch, 10)."""
        batch = x.shape[0]
        h = torch.relu(self.embed(x.reshape(batch * MOE_TOKENS, -1)))
        h = self.moe(h)
        return self.head(h.view(batch, MOE_TOKENS, -1).mean(dim=1))
