"""A GPT split over tensor, pipeline and data parallel ranks as Megatron-LM splits it: column-parallel QKV and first
MLP matrix, row-parallel projection and second MLP matrix (two all-reduces forward, two backward per layer), layers in
pipeline stages sending activations and their gradients point to point in the schedule's order, and the gradient
summed over each data-parallel group. With tp = pp = dp = 1 it is the plain model on one process."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

from workloads.parallel_layout import Layout, parse_layout
from workloads.pipeline_schedule import check_schedule, stage_ops
from workloads.transformer import Transformer, parse_transformer

LAYER_TENSORS = ("ln1_w", "ln1_b", "w_qkv", "b_qkv", "w_o", "b_o", "ln2_w", "ln2_b", "w_1", "b_1", "w_2", "b_2")


def checked_job(model: str, layout: str, ranks: Optional[int], schedule: str, micro_batches: int):
    """The model and layout parsed and checked against the ranks (None: the layout's own count), the layers, the
    heads and the schedule (LayoutError, TransformerError or ScheduleError, all ValueErrors, naming what is wrong)."""
    parsed, split = parse_transformer(model), parse_layout(layout)
    split.check(split.ranks if ranks is None else ranks, parsed.layers, parsed.heads)
    check_schedule(schedule, micro_batches)
    return parsed, split


def full_weights(model: Transformer, seed: int, dtype=torch.float32) -> Dict[str, torch.Tensor]:
    """Every weight of the unsplit model, drawn from `seed` (GPT-2's initialisation: N(0, 0.02), zero biases,
    unit layer norms)."""
    g = torch.Generator().manual_seed(seed)
    h, v, s = model.hidden, model.vocab, model.seq

    def normal(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).mul_(0.02).to(dtype)

    out = {"tok": normal(v, h), "pos": normal(s, h), "lnf_w": torch.ones(h, dtype=dtype),
           "lnf_b": torch.zeros(h, dtype=dtype), "head": normal(h, v)}
    for i in range(model.layers):
        out.update({f"{i}.ln1_w": torch.ones(h, dtype=dtype), f"{i}.ln1_b": torch.zeros(h, dtype=dtype),
                    f"{i}.w_qkv": normal(h, 3 * h), f"{i}.b_qkv": torch.zeros(3 * h, dtype=dtype),
                    f"{i}.w_o": normal(h, h), f"{i}.b_o": torch.zeros(h, dtype=dtype),
                    f"{i}.ln2_w": torch.ones(h, dtype=dtype), f"{i}.ln2_b": torch.zeros(h, dtype=dtype),
                    f"{i}.w_1": normal(h, 4 * h), f"{i}.b_1": torch.zeros(4 * h, dtype=dtype),
                    f"{i}.w_2": normal(4 * h, h), f"{i}.b_2": torch.zeros(h, dtype=dtype)})
    return out


def shard_index(name: str, hidden: int, tp: int, rank: int):
    """(dim, index) of the slice tensor-parallel rank `rank` of tp holds of a layer tensor, or None (whole)."""
    kind = name.split(".")[-1]
    h, part = hidden, hidden // tp
    if kind in ("w_qkv", "b_qkv"):  # this rank's heads of Q, of K and of V
        idx = torch.cat([torch.arange(k * h + rank * part, k * h + (rank + 1) * part) for k in range(3)])
        return (1 if kind == "w_qkv" else 0), idx
    if kind in ("w_1", "b_1"):
        return (1 if kind == "w_1" else 0), torch.arange(rank * 4 * part, (rank + 1) * 4 * part)
    if kind == "w_o":
        return 0, torch.arange(rank * part, (rank + 1) * part)
    if kind == "w_2":
        return 0, torch.arange(rank * 4 * part, (rank + 1) * 4 * part)
    return None


def stage_layers(model: Transformer, layout: Layout, stage: int) -> range:
    """The transformer layers pipeline stage `stage` holds."""
    per = model.layers // layout.pp
    return range(stage * per, (stage + 1) * per)


def stage_names(model: Transformer, layout: Layout, stage: int) -> List[str]:
    """Names of the weights one rank of a stage holds."""
    names = [f"{i}.{t}" for i in stage_layers(model, layout, stage) for t in LAYER_TENSORS]
    return (["tok", "pos"] if stage == 0 else []) + names + \
        (["lnf_w", "lnf_b", "head"] if stage == layout.pp - 1 else [])


def rank_weights(full: Dict[str, torch.Tensor], model: Transformer, layout: Layout, rank: int) -> Dict[str, torch.Tensor]:
    """The slices of the full weights a rank holds, as leaf tensors that take gradients."""
    c = layout.coords(rank)
    out = {}
    for name in stage_names(model, layout, c["pp"]):
        where = shard_index(name, model.hidden, layout.tp, c["tp"])
        w = full[name] if where is None else full[name].index_select(where[0], where[1])
        out[name] = w.clone().requires_grad_(True)
    return out


class _CopyToGroup(torch.autograd.Function):
    """Megatron's f: identity forward, gradient summed over the tensor-parallel group backward."""

    @staticmethod
    def forward(ctx, x, reduce):
        ctx.reduce = reduce
        return x

    @staticmethod
    def backward(ctx, grad):
        return ctx.reduce(grad.clone()), None


class _ReduceFromGroup(torch.autograd.Function):
    """Megatron's g: partial sums added over the tensor-parallel group forward, identity backward."""

    @staticmethod
    def forward(ctx, x, reduce):
        return reduce(x.clone())

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def attention(x: torch.Tensor, w: Dict[str, torch.Tensor], i: int, heads: int) -> torch.Tensor:
    """Causal self-attention over this rank's heads (x: batch, seq, hidden); the rows of the projection it holds."""
    b, s, _ = x.shape
    qkv = x @ w[f"{i}.w_qkv"] + w[f"{i}.b_qkv"]
    q, k, v = (t.reshape(b, s, heads, -1).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    out = (scores.masked_fill(mask, float("-inf")).softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
    return out @ w[f"{i}.w_o"]


def layer(x: torch.Tensor, w: Dict[str, torch.Tensor], i: int, heads: int, reduce: Callable) -> torch.Tensor:
    """One pre-norm transformer layer on this rank's shards."""
    h = x.shape[-1]
    a = _CopyToGroup.apply(F.layer_norm(x, (h,), w[f"{i}.ln1_w"], w[f"{i}.ln1_b"]), reduce)
    x = x + _ReduceFromGroup.apply(attention(a, w, i, heads), reduce) + w[f"{i}.b_o"]
    m = _CopyToGroup.apply(F.layer_norm(x, (h,), w[f"{i}.ln2_w"], w[f"{i}.ln2_b"]), reduce)
    return x + _ReduceFromGroup.apply(F.gelu(m @ w[f"{i}.w_1"] + w[f"{i}.b_1"]) @ w[f"{i}.w_2"], reduce) + \
        w[f"{i}.b_2"]


def stage_forward(x: torch.Tensor, w: Dict[str, torch.Tensor], model: Transformer, layout: Layout, stage: int,
                  reduce: Callable, targets: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A stage's forward pass: tokens in on the first stage, the loss out of the last, activations between."""
    if stage == 0:
        x = w["tok"][x] + w["pos"][: x.shape[1]]
    for i in stage_layers(model, layout, stage):
        x = layer(x, w, i, model.heads // layout.tp, reduce)
    if stage < layout.pp - 1:
        return x
    logits = F.layer_norm(x, (model.hidden,), w["lnf_w"], w["lnf_b"]) @ w["head"]
    return F.cross_entropy(logits.reshape(-1, model.vocab), targets.reshape(-1))


def batch(model: Transformer, seed: int, iteration: int, sequences: int) -> torch.Tensor:
    """An iteration's token sequences (sequences, seq + 1): inputs and their next tokens."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + iteration)
    return torch.randint(0, model.vocab, (sequences, model.seq + 1), generator=g)


@dataclass
class Groups:
    """This rank's process groups and its pipeline neighbours (global ranks)."""
    tp: object
    dp: object
    prev: Optional[int]
    next: Optional[int]


def make_groups(layout: Layout, rank: int) -> Groups:
    """Every group of every kind created on every rank (torch.distributed asks that), this rank's kept."""
    mine = {}
    for kind in ("tp", "dp"):
        for g in layout.groups(kind):
            group = dist.new_group(g) if len(g) > 1 else None
            if rank in g:
                mine[kind] = group
    c = layout.coords(rank)
    prev = layout.rank_of({**c, "pp": c["pp"] - 1}) if c["pp"] > 0 else None
    nxt = layout.rank_of({**c, "pp": c["pp"] + 1}) if c["pp"] < layout.pp - 1 else None
    return Groups(mine["tp"], mine["dp"], prev, nxt)


class Reducer:
    """A tensor summed over a group in place (identity without one), with the seconds spent summing so far."""

    def __init__(self, group):
        self.group, self.spent = group, 0.0

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        if self.group is not None:
            began = time.perf_counter()
            dist.all_reduce(t, group=self.group)
            self.spent += time.perf_counter() - began
        return t


def no_record(kind: str, micro_batch: int, start: float, end: float, computed: float) -> None:
    """A pass's span, not kept."""


def train_step(w: Dict[str, torch.Tensor], model: Transformer, layout: Layout, rank: int, groups: Groups,
               tokens: torch.Tensor, micro_batches: int, schedule: str, lr: float,
               record: Callable[[str, int, float, float, float], None] = no_record,
               pass_s=(0.0, 0.0)) -> Optional[float]:
    """One iteration on this rank: its micro-batches' passes in the schedule's order, activations and gradients to
    and from its pipeline neighbours, the gradient summed over its data-parallel group, an SGD step. Returns the
    summed loss of its data-parallel replica on the last stage (None elsewhere). record(kind, micro-batch, start,
    end, computed) gets each pass's span with its real compute (this CPU's seconds, sums left out) and the
    data-parallel sum's ('dp', -1); pass_s: a device's forward and backward
    seconds, each pass held to at least that long plus its tensor-parallel sums."""
    c = layout.coords(rank)
    per = tokens.shape[0] // (layout.dp * micro_batches)
    mine = tokens[c["dp"] * micro_batches * per:(c["dp"] + 1) * micro_batches * per]
    stage = StagePasses(w, model, layout, c["pp"], groups, (per, model.seq, model.hidden),
                        1.0 / (layout.dp * micro_batches), micro_batches)
    for kind, i in stage_ops(schedule, c["pp"], layout.pp, micro_batches):
        summing = stage.reduce.spent
        started = stage.run(kind, i, mine[i * per:(i + 1) * per])
        summed = stage.reduce.spent - summing
        computed = time.perf_counter() - started - summed
        # the device's time, then the pass's tensor-parallel sums on top (a device computes, then the network sums)
        hold(started, pass_s[kind == "B"] + summed)
        record(kind, i, started, time.perf_counter(), computed)
        stage.send(kind, i)
    for p in stage.pending:
        p.wait()
    started = time.perf_counter()
    with torch.no_grad():
        flat = Reducer(groups.dp)(torch.cat([t.grad.reshape(-1) for t in w.values()]))
        record("dp", -1, started, time.perf_counter(), 0.0)
        for t, g in zip(w.values(), flat.split([t.numel() for t in w.values()])):
            t -= lr * g.reshape(t.shape)
            t.grad = None
    return stage.loss_sum if groups.next is None else None


class StagePasses:
    """One rank's passes of a pipeline stage: each waits for its input from a neighbour, runs, and sends on."""

    def __init__(self, w, model: Transformer, layout: Layout, stage: int, groups: Groups, act_shape, scale: float,
                 micro_batches: int):
        self.w, self.model, self.layout, self.stage, self.groups = w, model, layout, stage, groups
        self.act_shape, self.scale, self.m = act_shape, scale, micro_batches
        self.dtype = next(iter(w.values())).dtype
        self.inputs, self.outputs, self.pending, self.loss_sum = {}, {}, [], 0.0
        self.reduce = Reducer(groups.tp)

    def run(self, kind: str, i: int, rows: torch.Tensor) -> float:
        """A pass of micro-batch i once its input is here; when it started (after the input arrived)."""
        if kind == "F":
            x = rows[:, :-1]
            if self.stage > 0:
                x = torch.empty(self.act_shape, dtype=self.dtype)
                dist.recv(x, self.groups.prev, tag=i)
                x.requires_grad_(True)
            started = time.perf_counter()
            self.inputs[i] = x
            out = stage_forward(x, self.w, self.model, self.layout, self.stage, self.reduce, rows[:, 1:])
            if self.groups.next is None:
                self.loss_sum += out.item()
                out = out * self.scale
            self.outputs[i] = out
            return started
        if self.groups.next is None:
            started = time.perf_counter()
            self.outputs[i].backward()
            return started
        grad = torch.empty_like(self.outputs[i])
        dist.recv(grad, self.groups.next, tag=self.m + i)
        started = time.perf_counter()
        self.outputs[i].backward(grad)
        return started

    def send(self, kind: str, i: int) -> None:
        """A finished pass's output on to its neighbour (without waiting for it to land)."""
        if kind == "F" and self.groups.next is not None:
            self.pending.append(dist.isend(self.outputs[i].detach().contiguous(), self.groups.next, tag=i))
        if kind == "B":
            if self.groups.prev is not None:
                self.pending.append(dist.isend(self.inputs[i].grad.contiguous(), self.groups.prev, tag=self.m + i))
            del self.inputs[i], self.outputs[i]


def hold(started: float, seconds: float) -> None:
    """Wait until `seconds` have passed since started (a device slower than this CPU)."""
    left = started + seconds - time.perf_counter()
    if left > 0:
        time.sleep(left)
