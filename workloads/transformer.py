"""A GPT-style transformer's shape (`gpt:LAYERS,HIDDEN,HEADS,SEQ[,VOCAB]` or a preset name): its parameters, FLOPs and
activation bytes per layer, as Megatron-LM counts them (Narayanan et al., SC'21), without torch."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_VOCAB = 50257  # GPT-2's tokenizer
FORMAT = "gpt:LAYERS,HIDDEN,HEADS,SEQ[,VOCAB]"


class TransformerError(ValueError):
    """A transformer model named wrongly or with sizes that do not fit together."""


@dataclass(frozen=True)
class Transformer:
    """Layers of pre-norm self-attention and a 4x MLP over an embedding of a vocabulary; an untied output head."""
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int = DEFAULT_VOCAB
    name: str = ""

    def __post_init__(self):
        for field in ("layers", "hidden", "heads", "seq", "vocab"):
            if getattr(self, field) < 1:
                raise TransformerError(f"{self.label}: {field} must be >= 1 (give {FORMAT})")
        if self.hidden % self.heads:
            raise TransformerError(f"{self.label}: hidden {self.hidden} is not a multiple of heads {self.heads}")

    @property
    def label(self) -> str:
        """The name it was given, or its gpt: spelling."""
        return self.name or f"gpt:{self.layers},{self.hidden},{self.heads},{self.seq},{self.vocab}"

    @property
    def layer_parameters(self) -> int:
        """One layer's parameters: QKV and projection (4h^2 + 4h), the MLP (8h^2 + 5h), two layer norms (4h)."""
        h = self.hidden
        return 12 * h * h + 13 * h

    @property
    def embedding_parameters(self) -> int:
        """Token and position embeddings."""
        return (self.vocab + self.seq) * self.hidden

    @property
    def head_parameters(self) -> int:
        """The final layer norm and the (untied) output projection to the vocabulary."""
        return 2 * self.hidden + self.hidden * self.vocab

    @property
    def parameters(self) -> int:
        """Every parameter of the model."""
        return self.layers * self.layer_parameters + self.embedding_parameters + self.head_parameters

    def tp_split_parameters(self, tp: int) -> int:
        """One layer's parameters one of tp tensor-parallel ranks holds (Megatron's split: QKV and the first MLP
        matrix by columns, the projection and the second MLP matrix by rows; their output biases and the layer
        norms whole on every rank)."""
        h = self.hidden
        return (12 * h * h + 7 * h) // tp + 6 * h

    def stage_parameters(self, stage: int, pp: int, tp: int) -> int:
        """The parameters one tensor-parallel rank of pipeline stage `stage` of pp holds (the embedding on the first
        stage, the head on the last, both whole on every tensor-parallel rank)."""
        own = self.layers // pp * self.tp_split_parameters(tp)
        return own + (self.embedding_parameters if stage == 0 else 0) + \
            (self.head_parameters if stage == pp - 1 else 0)

    def layer_flops(self, batch: int) -> float:
        """One layer's forward FLOPs for `batch` sequences: 24 b s h^2 + 4 b s^2 h (the backward pass is twice)."""
        b, s, h = batch, self.seq, self.hidden
        return 24.0 * b * s * h * h + 4.0 * b * s * s * h

    def activation_elements(self, batch: int) -> int:
        """The elements of one layer's output (b s h): what a pipeline stage sends on, and each of a tensor-parallel
        layer's all-reduces sums."""
        return batch * self.seq * self.hidden


PRESETS = {  # small ones run on this machine; the others are well-known sizes for simulate and theory
    "gpt-tiny": Transformer(4, 64, 4, 32, 256, "gpt-tiny"),
    "gpt-mini": Transformer(8, 256, 8, 128, 4096, "gpt-mini"),
    "gpt2-small": Transformer(12, 768, 12, 1024, DEFAULT_VOCAB, "gpt2-small"),
    "gpt2-xl": Transformer(48, 1600, 25, 1024, DEFAULT_VOCAB, "gpt2-xl"),
    "gpt3-1.3b": Transformer(24, 2048, 16, 2048, DEFAULT_VOCAB, "gpt3-1.3b"),
    "gpt3-13b": Transformer(40, 5120, 40, 2048, DEFAULT_VOCAB, "gpt3-13b"),
    "gpt3-175b": Transformer(96, 12288, 96, 2048, DEFAULT_VOCAB, "gpt3-175b"),
    "megatron-1t": Transformer(128, 25600, 160, 2048, 51200, "megatron-1t"),
}


def is_transformer(name: str) -> bool:
    """Whether a model name names a transformer (a preset or gpt:...)."""
    return name in PRESETS or name.startswith("gpt:")


def parse_transformer(name: str) -> Transformer:
    """A preset by name or gpt:LAYERS,HIDDEN,HEADS,SEQ[,VOCAB] (TransformerError: what is wrong, what is valid)."""
    if name in PRESETS:
        return PRESETS[name]
    m = re.fullmatch(r"gpt:(\d+),(\d+),(\d+),(\d+)(?:,(\d+))?", name)
    if not m:
        raise TransformerError(f"--model {name} is not a transformer: give {FORMAT} (positive integers) or one of "
                               f"{', '.join(PRESETS)}")
    sizes = [int(v) for v in m.groups() if v is not None]
    return Transformer(*sizes, name=name)
