"""The codec registry: every gradient compressor by its --codec name (a module per compressor; workloads/codecs/base.py
says what one is). A summing codec wraps any plan all-reduce; a gathering codec runs an all-gather of its payloads; a low-rank one (PowerSGD) runs two all-reduces."""

from __future__ import annotations

from typing import Dict

from workloads.codecs.base import GatherCompressor, NoCompression
from workloads.codecs.half import Bf16Compressor, HalfCompressor
from workloads.codecs.powersgd import PowerSGD
from workloads.codecs.qsgd import Qsgd
from workloads.codecs.sign import EFSignSGD, SignSGD
from workloads.codecs.sparse import RandomK, TopK
from workloads.codecs.terngrad import TernGradCompressor

COMPRESSORS: Dict[str, type] = {"none": NoCompression, "terngrad": TernGradCompressor, "fp16": HalfCompressor,
                                 "bf16": Bf16Compressor, "topk": TopK, "randomk": RandomK, "qsgd": Qsgd,
                                 "signsgd": SignSGD, "efsignsgd": EFSignSGD, "powersgd": PowerSGD}
SUMMING = tuple(name for name, c in COMPRESSORS.items() if not c.gathers)  # compose with any summing plan
GATHERING = tuple(name for name, c in COMPRESSORS.items() if c.gathers)  # need an all-gather of their payloads

__all__ = ["COMPRESSORS", "GATHERING", "SUMMING", "GatherCompressor", "NoCompression"]
