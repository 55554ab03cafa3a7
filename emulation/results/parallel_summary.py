"""summary.json of a transformer job under tensor, pipeline and data parallelism (`--parallel` in theory, simulate
and run): the job, per kind of traffic its bytes and its time on the critical path, each stage's bubble, the
iteration beside the closed form's, and the pipeline's timeline."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Union


def doc(text: str, **kwargs):
    """A field with its description for the schema."""
    return field(metadata={"doc": text}, **kwargs)


@dataclass
class ParallelSummary:
    """One parallel job answered in closed form (mode theory), on the flow model (simulate), or by real processes on
    the emulated network (emulate: measured, with the flow model's and the closed form's iteration beside it)."""

    mode: str = doc("theory | simulate | emulate")
    topology: str = doc("the network's spec")
    model: str = doc("the transformer (a preset name or gpt:LAYERS,HIDDEN,HEADS,SEQ,VOCAB)")
    parallel: str = doc("the layout: tp=T,pp=P,dp=D[,ep=E][,order=...]")
    placement: Optional[str] = doc("the --placement rule the ranks were numbered by (none: the layout's order)")
    schedule: str = doc("gpipe | 1f1b")
    micro_batches: int = doc("m, micro-batches per iteration")
    micro_batch_size: int = doc("sequences per micro-batch (--batch / m)")
    ranks: int = doc("tp x pp x dp, one per host")
    parameters: int = doc("the model's parameters")
    compute_per_micro_batch_s: float = doc("a micro-batch's forward and backward compute on one stage, split 1:2")
    bytes_per_kind: Dict[str, int] = doc("bytes every rank sends in one iteration, summed over ranks, per kind "
                                         "(emulate: what the ranks' TCP connections delivered, 'other' between ranks "
                                         "of no one group)")
    bytes_per_level: Dict[str, Dict[str, int]] = doc("per kind, the bytes its traffic puts on each link level in "
                                                     "an iteration (a byte counted on every link it crosses; level "
                                                     "0: the hosts' links; emulate: the model's, on the job's routes)")
    critical_path_s: Dict[str, float] = doc("per kind, seconds of its traffic on the iteration's critical path "
                                            "(emulate: the flow model's)")
    phase_s: Dict[str, Union[float, List[float]]] = doc(
        "one tensor-parallel all-reduce, one stage-to-stage send, each stage's data-parallel sum (every group of "
        "the kind at once; emulate: the flow model's)")
    bubble_per_stage: List[float] = doc("each stage's idle share of the pipeline's span")
    bubble_formula: float = doc("(p-1)/(m+p-1), Megatron-LM's bubble")
    pipeline_s: Optional[float] = doc("from the first pass to the last stage's last pass (emulate: the first "
                                      "replica's, median over iterations; none when the ranks failed)")
    iteration_s: Optional[float] = doc("the iteration: the pipeline, then each stage's data-parallel sum (emulate: "
                                       "the slowest rank's median, in emulated seconds)")
    iteration_theory_s: float = doc("the closed form's iteration")
    over_theory: Optional[float] = doc("iteration_s / iteration_theory_s")
    timeline: List[List[Any]] = doc("the pipeline's spans: [stage, kind (F, B, send-F, send-B, dp), micro-batch, "
                                    "start_s, end_s]")
    kinds: List[str] = doc("the kinds of traffic the job sends")
    provenance: Dict[str, Any] = doc("command, date, dmlbed version and commit")
    out: Optional[str] = doc("the results folder (simulate, emulate; none for theory)")
    dilation: float = doc("emulate: links shaped at bw / dilation, the ranks' device time stretched by it, every "
                          "time reported divided by it", default=1.0)
    flow_model_iteration_s: Optional[float] = doc("emulate: the flow model's iteration of the same job and network",
                                                  default=None)
    over_flow_model: Optional[float] = doc("emulate: iteration_s / flow_model_iteration_s", default=None)
    max_weight_difference: Optional[float] = doc("emulate: the largest difference of any rank's weights from the "
                                                 "unsplit model's trained on one process", default=None)
    correct: Optional[bool] = doc("emulate: every rank's weights equal the unsplit model's (within 1e-5)",
                                  default=None)
    fidelity: Optional[Dict[str, Any]] = doc("emulate: the verdict (launch's from outside the ranks, with the "
                                             "iteration over the flow model as the scenario model's ratio)",
                                             default=None)
    error: Optional[str] = doc("emulate: why the ranks did not finish (none when they did)", default=None)

    def to_dict(self) -> dict:
        """Its fields as JSON values."""
        return asdict(self)
