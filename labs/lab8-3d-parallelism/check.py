"""Lab 8 checker: the closed form's bytes per kind recompute from the model and layout, the placements differ by
their tensor-parallel sums, the flow model's bubbles follow (p-1)/(m+p-1), and the emulated runs are exact, sent the
closed form's bytes and were judged against the flow model."""

import os
import sys

from dmlbed.labcheck import Checker, Expected, arguments, close, grade, load_json
from emulation.simulation.parallel_theory import ParallelJob
from workloads.parallel_layout import parse_layout
from workloads.transformer import parse_transformer

KINDS = ("tp", "pp", "dp")
VERDICTS = ("faithful", "degraded", "not faithful")


def closed_form_bytes(s: dict) -> dict:
    """What every rank of the summary's job sends per kind and iteration, from its model and layout."""
    job = ParallelJob(parse_transformer(s["model"]), parse_layout(s["parallel"]), s["micro_batches"],
                      s["micro_batch_size"], s["schedule"])
    return job.bytes_per_kind()


def check_theory(c: Checker, folder: str) -> dict:
    """Both placements' closed forms: bytes recomputed and equal, the spine's tensor-parallel sums slower."""
    got = {}
    for name in ("rack", "spine"):
        s = got[name] = load_json(os.path.join(folder, f"theory-{name}.json"))
        c.expect(s["mode"] == "theory" and close(s["iteration_s"], s["iteration_theory_s"]),
                 f"theory-{name}: the closed form's iteration")
        c.expect(s["bytes_per_kind"] == closed_form_bytes(s), f"theory-{name}: bytes per kind from the model")
    c.expect(got["rack"]["bytes_per_kind"] == got["spine"]["bytes_per_kind"], "theory: placement moves no bytes")
    c.expect(got["spine"]["phase_s"]["tp_allreduce"] > 4 * got["rack"]["phase_s"]["tp_allreduce"],
             "theory: a tensor-parallel sum across the spine is slower than inside a leaf")
    return got


def check_bubble(c: Checker, folder: str, m: int) -> dict:
    """A simulated 4-stage pipeline: Megatron-LM's formula, and the flow model's bubble within 10% of it."""
    name = f"bubble-m{m}"
    s = load_json(os.path.join(folder, name, "summary.json"))
    c.expect(s["mode"] == "simulate" and s["micro_batches"] == m, f"{name}: simulated with m = {m}")
    c.expect(close(s["bubble_formula"], 3 / (m + 3)), f"{name}: (p-1)/(m+p-1)")
    c.expect(abs(max(s["bubble_per_stage"]) / s["bubble_formula"] - 1) <= 0.10, f"{name}: bubble near the formula")
    c.expect(os.path.getsize(os.path.join(folder, name, "pipeline.png")) > 0, f"{name}: pipeline.png")
    return s


def check_emulated(c: Checker, folder: str, schedule: str) -> dict:
    """An emulated run: exact, its schedule, the closed form's bytes, judged against the flow model."""
    s = load_json(os.path.join(folder, schedule, "summary.json"))
    c.expect(s["mode"] == "emulate" and s["schedule"] == schedule, f"{schedule}: an emulated {schedule} run")
    c.expect(s["correct"] is True and s["max_weight_difference"] < 1e-5, f"{schedule}: every rank exact")
    want = closed_form_bytes(s)
    c.expect(all(abs(s["bytes_per_kind"][k] / want[k] - 1) <= 0.03 for k in KINDS),
             f"{schedule}: bytes per kind within 3% of the closed form")
    c.expect(close(s["over_flow_model"], s["iteration_s"] / s["flow_model_iteration_s"]),
             f"{schedule}: over_flow_model = measured / flow model")
    fid = s["fidelity"]
    c.expect(fid["verdict"] in VERDICTS and
             close(fid["scenario_model"]["measured_over_model"], s["over_flow_model"], rel=1e-3),
             f"{schedule}: judged against the flow model")
    c.expect({span[1] for span in s["timeline"]} == {"F", "B", "dp"}, f"{schedule}: the measured timeline")
    c.expect(os.path.getsize(os.path.join(folder, schedule, "pipeline.png")) > 0, f"{schedule}: pipeline.png")
    return s


def expected_answers(theory: dict, bubbles: dict, runs: dict) -> dict:
    """What each graded answer must be: your theory files, your simulations, your runs."""
    gpipe = runs["gpipe"]["bubble_per_stage"]
    sent = runs["1f1b"]["bytes_per_kind"]
    return {"q1.factor": Expected(theory["spine"]["iteration_s"] / theory["rack"]["iteration_s"], 0.02),
            "q2.bubble_m4": Expected(max(bubbles[4]["bubble_per_stage"]), 0.02),
            "q2.bubble_m16": Expected(max(bubbles[16]["bubble_per_stage"]), 0.02),
            "q3.idlest_stage": Expected(str(gpipe.index(max(gpipe)))),
            "q4.largest_kind": Expected(max(KINDS, key=lambda k: sent.get(k, 0))),
            "q5.over_flow_model": Expected(runs["1f1b"]["over_flow_model"], 0.02)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab8")
    theory = check_theory(c, folder)
    bubbles = {m: check_bubble(c, folder, m) for m in (4, 16)}
    c.expect(max(bubbles[16]["bubble_per_stage"]) < max(bubbles[4]["bubble_per_stage"]),
             "more micro-batches, a smaller bubble")
    runs = {schedule: check_emulated(c, folder, schedule) for schedule in ("gpipe", "1f1b")}
    grade(c, folder, expected_answers(theory, bubbles, runs), hand_in, teacher, "lab8-3d-parallelism")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab8")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
