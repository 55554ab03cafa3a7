"""fp16 and bf16 on the wire: exact codecs of their formats, every summing plan ending with one sum on every rank
within the format's rounding bound, half of fp32 in theory and in the flow model, and a loopback run checked."""

import numpy as np
import pytest

from emulation.core.topology import parse
from workloads.algorithms import ALGORITHMS, build_plan
from workloads.codecs import COMPRESSORS, SUMMING
from workloads.codecs.base import transfer_keys
from workloads.codecs.half import HalfCodec, round_bf16, round_fp16
from workloads.compression import CodecError
from workloads.plan import PieceLayout, simulate
from workloads.verify import check_one
from helpers import cli_json

def numpy_bf16_bits(values):
    """bfloat16 by hand (round to nearest even on float32's upper half), independent of torch."""
    bits = values.view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


FORMATS = {"fp16": (round_fp16, lambda x: x.astype("<f2").tobytes()),
           "bf16": (round_bf16, lambda x: numpy_bf16_bits(x).astype("<u2").tobytes())}


@pytest.mark.parametrize("fmt", FORMATS)
def test_rounding_and_wire_bytes_are_the_formats_and_the_codec_round_trips_exactly(fmt):
    """Against numpy's IEEE half and a hand-made bfloat16: the same rounding and the same two bytes a value."""
    rounding, reference_bytes = FORMATS[fmt]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(50001) * np.exp(rng.uniform(-12, 8, 50001))).astype(np.float32)
    x = x[np.abs(x) < 6e4]
    v = rounding(x)
    assert reference_bytes(x) == reference_bytes(v)  # rounding to the format changes no bit of its encoding
    codec = HalfCodec(fmt)
    wire = codec.encode(v)
    assert wire == reference_bytes(v) and np.array_equal(codec.decode(wire, len(v)), v)
    with pytest.raises(CodecError):
        codec.decode(wire[:-2], len(v))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_value_the_format_does_not_hold_is_refused_not_rounded_silently(fmt):
    codec = HalfCodec(fmt)
    with pytest.raises(CodecError, match=fmt):
        codec.encode(np.array([0.1, 1 + 2.0 ** -20], np.float32))
    if fmt == "fp16":
        with pytest.raises(CodecError, match="65504"):
            codec.encode(np.array([70000.0], np.float32))


SPECS = ["star:2", "star:9", "bcube:3,2", "bcube:2,3", "fattree:4", "tree:3,2,2"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("spec", SPECS)
def test_every_summing_plan_gives_every_rank_the_same_sum_within_the_formats_bound(fmt, spec):
    """Each hop carries exact format values (the codec would refuse others) and every rank ends with one result, as
    the run's sum-fp16/sum-bf16 check wants; the check fails for a result off by more than its bound."""
    topo = parse(spec)
    comp = COMPRESSORS[fmt]([1], 0)
    rng = np.random.default_rng(7)
    for algo in (name for name, a in ALGORITHMS.items() if a.plan and fmt in a.codecs):
        if topo.kind not in ALGORITHMS[algo].topologies:
            continue
        plan = build_plan(algo, topo)
        layout = PieceLayout([777, 33, 5], plan.pieces)
        inputs = {r: comp.compress(rng.standard_normal(layout.total).astype(np.float32), None)
                  for r in range(plan.ranks)}
        out = simulate(plan, inputs, layout, reduce=comp.reduce, codec=comp.codec)
        ins, outs = [inputs[r] for r in plan.contributors], [out[r] for r in plan.contributors]
        assert check_one(f"sum-{fmt}", ins, outs), (algo, spec)
        wrong = [o.copy() for o in outs]
        for o in wrong:
            o[0] += 10  # beyond n - 1 roundings of sums of a few units
        assert not check_one(f"sum-{fmt}", ins, wrong)
        apart = [o.copy() for o in outs]
        apart[-1][0] = np.nextafter(apart[-1][0], np.float32(np.inf))  # within the bound, but one rank differs
        assert not check_one(f"sum-{fmt}", ins, apart)


def test_every_plan_algorithm_takes_every_summing_codec_and_the_flow_model_sees_16_bits():
    assert set(SUMMING) >= {"none", "terngrad", "fp16", "bf16"}
    for name, algorithm in ALGORITHMS.items():
        if algorithm.plan and "terngrad" in algorithm.codecs:
            assert set(algorithm.codecs) == set(SUMMING), name
    plan = build_plan("ring", parse("star:4"))
    bits = COMPRESSORS["bf16"].wire_bits(plan)
    assert set(bits) == set(transfer_keys(plan)) and set(bits.values()) == {16}


@pytest.mark.parametrize("fmt", FORMATS)
def test_theory_halves_and_simulate_sends_half_the_bytes(fmt, tmp_path):
    plain = cli_json("theory", "--topo", "star:8", "--algo", "ring")
    half = cli_json("theory", "--topo", "star:8", "--algo", "ring", "--codec", fmt)
    assert half["gst_theory_s"] == pytest.approx(plain["gst_theory_s"] / 2) and fmt in half["gst_formula"]
    sim = cli_json("simulate", "--topo", "star:8", "--algo", "ring", "--codec", fmt, "--out", str(tmp_path / "s"))
    assert sim["wire_ratio"] == pytest.approx(0.5)


@pytest.mark.parametrize("fmt,overlap", [("fp16", False), ("bf16", True)])
def test_a_loopback_run_is_correct_and_sends_half_of_fp32(fmt, overlap, tmp_path):
    s = cli_json("run", "--topo", "star:4", "--algo", "ring", "--local", "--iters", "3", "--codec", fmt,
                 *(["--overlap"] if overlap else []), "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] and s["replicas_identical"] and s["sum_verified"]
    assert s["wire_ratio"] == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("codec", ["fp16", "bf16", "terngrad"])
def test_error_feedback_of_a_summing_codec_keeps_what_its_payload_left_out(codec):
    """Over iterations, what a rank's payloads decode to plus its memory is every gradient it fed (telescoping), and
    the memory is bounded by one payload's error."""
    from workloads.codecs import COMPRESSORS
    from workloads.codecs.base import typed_options
    cls = COMPRESSORS[codec]
    sizes = [300, 40, 7]
    comp = cls(sizes, seed=3, options=typed_options(cls, {"error_feedback": True}))
    assert comp.feedback
    rng = np.random.default_rng(7)
    fed_total, decoded_total = np.zeros(347), np.zeros(347)
    for _ in range(20):
        g = (rng.standard_normal(347) * 1e-2).astype(np.float32)
        staged = comp.stage(comp.fed(g))
        ctx = comp.prepare(staged, lambda v: v)  # one rank: its own scalers are the shared ones
        payload = np.array(comp.compress(staged, ctx), np.float32)
        comp.remember(payload, ctx)
        fed_total += g
        decoded_total += comp.decompress(payload.copy(), ctx, 1)
    assert np.allclose(decoded_total + comp.memory, fed_total, atol=1e-5)
    assert comp.residual_norm == pytest.approx(float(np.linalg.norm(comp.memory)))
    without = cls(sizes, seed=3, options=typed_options(cls, {}))
    assert not without.feedback and without.memory is None
