"""Gathering codecs (top-k, random-k, QSGD, signSGD, EF-signSGD): each by its own properties, error feedback's memory and
bound, every all-gather plan giving every rank the same result, signSGD failing and EF-signSGD converging on
Karimireddy et al.'s counter-example, theory beside the flow model, loopback runs checked, bad input refused."""

import numpy as np
import pytest

from emulation.core.topology import parse
from workloads.codecs import COMPRESSORS, GATHERING
from workloads.codecs.qsgd import Qsgd, QsgdOptions, bucket_sizes, level_bits
from workloads.codecs.sign import EFSignSGD, SignSGD
from workloads.codecs.sparse import RandomK, SparseOptions, TopK, kept
from workloads.collectives import get as get_collective
from workloads.plan import PieceLayout, simulate
from workloads.verify import check_one
from helpers import cli_json, run_dmlbed

SIZES = [3000, 517, 10, 1]


def vector(seed=0, n=sum(SIZES)):
    return (np.random.default_rng(seed).standard_normal(n) * np.linspace(0.01, 3, n)).astype(np.float32)


def test_top_k_keeps_the_k_largest_magnitudes_in_8_bytes_each():
    comp = TopK(SIZES, 0, SparseOptions(k_ratio=0.02))
    v = vector()
    words = comp.encode(v)
    k = kept(len(v), 0.02)
    assert len(words) == 2 * k == TopK.words(SIZES, SparseOptions(k_ratio=0.02)) and words.nbytes == 8 * k
    out = comp.decode(words)
    largest = np.sort(np.abs(v))[-k:]
    assert np.array_equal(np.sort(np.abs(out[out != 0])), largest)
    assert np.array_equal(out[out != 0], v[out != 0])  # values exact, at their own indices


def test_random_k_is_unbiased_without_feedback_and_sends_values_as_they_are_with_it():
    v = vector(1, 200)
    comp = RandomK([200], 3, SparseOptions(k_ratio=0.1))
    mean = np.mean([comp.decode(comp.encode(v)) for _ in range(4000)], axis=0)
    assert np.abs(mean - v).max() < 0.25 * np.abs(v).max()  # 4000 draws of a 1-in-10 choice: within a few sigma
    assert np.abs(mean - v).mean() < 0.05 * np.abs(v).mean() * 10
    fed = RandomK([200], 3, SparseOptions(k_ratio=0.1, error_feedback=True))
    out = fed.decode(fed.encode(v))
    assert np.array_equal(out[out != 0], v[out != 0])


@pytest.mark.parametrize("levels,bucket", [(1, 512), (7, 512), (127, 100000), (4, 1)])
def test_qsgd_is_unbiased_within_its_variance_bound_in_fixed_width_levels(levels, bucket):
    """Every value one of -s..s levels of its bucket's norm, in ceil(log2(2s+1)) bits after a norm word per bucket;
    the mean of many draws is within 5 sigma of the vector (a coordinate's variance is at most (norm / 2s)^2), and
    each bucket's variance within min(n/s^2, sqrt(n)/s) |v|^2."""
    options = QsgdOptions(qsgd_levels=levels, qsgd_bucket=bucket)
    comp = Qsgd(SIZES, 2, options)
    v = vector(4)
    buckets = bucket_sizes(SIZES, bucket)
    assert sum(buckets) == sum(SIZES) and max(buckets) <= bucket
    words = comp.encode(v)
    width = level_bits(levels)
    assert len(words) == Qsgd.words(SIZES, options) == len(buckets) + -(-(-(-sum(SIZES) * width // 8)) // 4)
    draws = np.array([comp.decode(comp.encode(v)) for _ in range(2000)])
    bounds = np.cumsum([0] + buckets)
    for a, b in list(zip(bounds[:-1], bounds[1:]))[:40]:
        norm = float(np.linalg.norm(v[a:b]))
        assert np.all(np.abs(np.rint(draws[:, a:b] * levels / norm)) <= levels)
        assert np.all(np.abs(draws[:, a:b].mean(axis=0) - v[a:b]) <= 5 * norm / (2 * levels) / np.sqrt(len(draws)))
        variance = np.mean(np.sum((draws[:, a:b] - v[a:b]) ** 2, axis=1)) / norm ** 2
        assert variance <= min((b - a) / levels ** 2, np.sqrt(b - a) / levels) * 1.05 + 1e-9


def test_qsgd_with_error_feedback_is_scaled_into_a_contraction():
    """Unbiased but of variance omega > 1, QSGD alone would make error feedback's memory grow: with it, each bucket is
    sent scaled by 1/(1 + omega), and the expected error is then at most (1 - 1/(1 + omega)) |v|^2."""
    options = QsgdOptions(qsgd_levels=2, qsgd_bucket=512, error_feedback=True)
    comp = Qsgd([512], 5, options)
    v = vector(6, 512)
    omega = min(512 / 4, np.sqrt(512) / 2)
    plain = Qsgd([512], 5, QsgdOptions(qsgd_levels=2, qsgd_bucket=512))
    errors = [np.sum((comp.decode(comp.encode(v)) - v).astype(np.float64) ** 2) for _ in range(2000)]
    assert np.mean(errors) <= (1 - 1 / (1 + omega)) * np.sum(v.astype(np.float64) ** 2) * 1.02
    scaled = np.mean([comp.decode(comp.encode(v)) for _ in range(2000)], axis=0)
    unscaled = np.mean([plain.decode(plain.encode(v)) for _ in range(2000)], axis=0)
    assert np.dot(scaled, v) == pytest.approx(np.dot(unscaled, v) / (1 + omega), rel=0.1)


@pytest.mark.parametrize("name,options", [("topk", SparseOptions(k_ratio=0.05, error_feedback=True)),
                                          ("randomk", SparseOptions(k_ratio=0.05, error_feedback=True)),
                                          ("qsgd", QsgdOptions(error_feedback=True)), ("efsignsgd", None)])
def test_error_feedback_keeps_what_compression_left_out_within_the_compressors_bound(name, options):
    """memory = (gradient + old memory) - decoded, exactly; top-k leaves at most (1 - k/d) of |p|^2 (a contraction),
    the scaled sign at most 1 - |p|_1^2 / (d |p|_2^2) per layer (Karimireddy et al.'s delta)."""
    comp = COMPRESSORS[name](SIZES, 0, options)
    memory = np.zeros(sum(SIZES), np.float32)
    for step in range(5):
        g = vector(step)
        p = g + memory
        _, decoded = comp.contribution(g)
        assert np.allclose(comp.memory, p - decoded, atol=1e-6) and comp.residual_norm == pytest.approx(
            float(np.linalg.norm(comp.memory)), rel=1e-6)
        left = float(np.sum((p - decoded).astype(np.float64) ** 2))
        if name == "topk":
            assert left <= (1 - 0.05) * float(np.sum(p.astype(np.float64) ** 2)) + 1e-6
        if name == "efsignsgd":
            for a, b in zip(np.cumsum([0] + SIZES)[:-1], np.cumsum(SIZES)):
                q = p[a:b].astype(np.float64)
                delta = np.abs(q).sum() ** 2 / (len(q) * (q ** 2).sum())
                assert np.sum((q - decoded[a:b]) ** 2) <= (1 - delta) * (q ** 2).sum() + 1e-6
        memory = comp.memory.copy()


def test_sign_sgd_takes_the_majority_and_a_tie_gives_zero():
    comp = SignSGD([4], 0)
    votes = [comp.encode(np.array(v, np.float32)) for v in ([1, -1, 2, -3], [1, -2, -1, 5], [-1, -1, 3, 0])]
    assert comp.decode(votes[0]).tolist() == [1, -1, 1, -1] and comp.decode(votes[2]).tolist() == [-1, -1, 1, 1]
    assert comp.gathered(votes).tolist() == [1, -1, 1, 1]
    assert comp.gathered(votes[:2]).tolist() == [1, -1, 0, 0]
    assert comp.finish(comp.gathered(votes), 3).tolist() == [1, -1, 1, 1]  # the vote is the update


def counter_example(cls, steps=5000, lr=0.01, workers=4, seed=0, eps=0.1):
    """Karimireddy et al. (ICML'19), counter-example 1: f(x) = (a1.x)^2 + (a2.x)^2, a1,2 = +-[1, -1] + eps[1, 1], each
    worker's stochastic gradient from one of the two terms; every such gradient's sign is +-[1, -1], so signSGD
    never changes x1 + x2. Returns (x, f(x), the least f seen)."""
    a = np.array([[1 + eps, -1 + eps], [-1 + eps, 1 + eps]])
    rng = np.random.default_rng(seed)
    ranks = [cls([2], w) for w in range(workers)]
    x, least = np.array([1.0, 1.0]), np.inf
    for _ in range(steps):
        payloads = []
        for comp in ranks:
            row = a[rng.integers(2)]
            payloads.append(comp.contribution((4 * (row @ x) * row).astype(np.float32))[0])
        x = x - lr * ranks[0].finish(ranks[0].gathered(payloads), workers)
        least = min(least, float(((a @ x) ** 2).sum()))
    return x, float(((a @ x) ** 2).sum()), least


@pytest.mark.parametrize("seed", [0, 1])
def test_ef_sign_sgd_converges_where_sign_sgd_does_not(seed):
    eps = 0.1
    x, _, least = counter_example(SignSGD, seed=seed, eps=eps)
    assert x.sum() == pytest.approx(2.0) and least >= 8 * eps ** 2 - 1e-9  # stuck on x1 + x2 = 2, where f >= 8 eps^2
    _, final, _ = counter_example(EFSignSGD, seed=seed, eps=eps)
    assert final < 0.01 * 8 * eps ** 2


@pytest.mark.parametrize("name", GATHERING)
@pytest.mark.parametrize("way,ranks", [("ring", 5), ("ring", 2), ("rd", 8), ("direct", 3)])
def test_every_all_gather_gives_every_rank_the_same_result(name, way, ranks):
    """Payload words (bit patterns, not numbers) cross the plan unchanged; each rank combines every payload in rank
    order, so every rank's result is the same and the run's check (sum or vote) holds."""
    options = SparseOptions(k_ratio=0.03) if "k" in name else None
    comps = [COMPRESSORS[name](SIZES, r, options) for r in range(ranks)]
    contributions = [c.contribution(vector(r)) for r, c in enumerate(comps)]
    width = len(contributions[0][0])
    plan = get_collective("allgather").plan(way, ranks)
    layout = PieceLayout.per_layer([width] * ranks)
    inputs = {}
    for r in range(ranks):
        buf = np.zeros(width * ranks, np.uint32)
        buf[r * width:(r + 1) * width] = contributions[r][0]
        inputs[r] = buf.view(np.float32)
    out = simulate(plan, inputs, layout)
    results = [comps[r].gathered([out[r].view(np.uint32)[q * width:(q + 1) * width] for q in range(ranks)])
               for r in range(ranks)]
    assert all(np.array_equal(results[0], x) for x in results[1:])
    assert check_one(comps[0].check, [d for _, d in contributions], results)


def test_theory_and_the_flow_model_agree_and_the_wire_is_the_payload(tmp_path):
    for codec, extra in (("topk", ("--k-ratio", "0.05")), ("signsgd", ())):
        theory = cli_json("theory", "--topo", "star:8", "--algo", "ring", "--codec", codec, *extra)
        sim = cli_json("simulate", "--topo", "star:8", "--algo", "ring", "--codec", codec, *extra,
                       "--out", str(tmp_path / codec))
        assert sim["gst_median_s"] == pytest.approx(theory["gst_theory_s"], rel=0.05), codec
        words = COMPRESSORS[codec].words([theory["parameters"]], SparseOptions(k_ratio=0.05))
        assert sim["wire_ratio"] == pytest.approx(words / theory["parameters"], rel=1e-3)


@pytest.mark.parametrize("codec,algo,extra", [("topk", "ring", ("--k-ratio", "0.01", "--error-feedback")),
                                              ("randomk", "hd", ("--k-ratio", "0.05")),
                                              ("signsgd", "ring", ()),
                                              ("qsgd", "ring", ("--qsgd-levels", "2", "--error-feedback")),
                                              ("efsignsgd", "ring", ("--overlap",))])
def test_a_loopback_run_is_correct(codec, algo, extra, tmp_path):
    s = cli_json("run", "--topo", "star:4", "--algo", algo, "--local", "--iters", "3", "--codec", codec, *extra,
                 "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] and s["replicas_identical"] and s["sum_verified"], s.get("checks")
    ratio = float(extra[1]) if extra[:1] == ("--k-ratio",) else 0.01
    options = QsgdOptions(qsgd_levels=2) if codec == "qsgd" else SparseOptions(k_ratio=ratio)
    assert s["wire_ratio"] == pytest.approx(COMPRESSORS[codec].payload_fraction([s["parameters"]], options), rel=1e-3)
    if "--error-feedback" in extra or codec == "efsignsgd":
        assert s["split_median_s"]["codec_residual_norm"] > 0


@pytest.mark.parametrize("args,says", [
    (("--algo", "ps", "--codec", "topk"), "gather every rank's payload: they run on ring, hd"),
    (("--algo", "ring", "--codec", "qsgd", "--qsgd-levels", "128"), "--qsgd-levels 128 is out of range"),
    (("--algo", "ring", "--codec", "fp16", "--k-ratio", "0.1"), "--k-ratio applies to --codec topk, randomk only"),
    (("--algo", "ring", "--codec", "topk", "--k-ratio", "0"), "--k-ratio 0 is out of range"),
    (("--algo", "hd", "--codec", "signsgd", "--topo", "star:6"), "needs a power of two ranks"),
])
def test_bad_codec_input_is_refused_in_one_line(args, says):
    topo = () if "--topo" in args else ("--topo", "star:8")
    r = run_dmlbed("simulate", *topo, *args)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_error_feedback_without_a_codec_that_offers_it_is_refused():
    r = run_dmlbed("run", "--topo", "star:4", "--local", "--algo", "ring", "--codec", "signsgd", "--error-feedback")
    assert r.returncode == 2 and "--error-feedback applies to --codec terngrad, fp16, bf16, topk, randomk, qsgd only" \
        in r.stderr, r.stderr
    assert parse("star:4")  # nothing else needed


@pytest.mark.parametrize("ranks", [1, 2, 3, 8, 9])
def test_ef_sign_sgd_gathers_by_table_exactly_as_decoding_every_payload(ranks):
    """The per-layer code tables give, bit for bit, the rank-order float32 sum of every rank's decode (9 ranks: the
    decode loop itself)."""
    sizes = [5, 33, 1, 64, 70]
    comp = EFSignSGD(sizes, 0)
    rng = np.random.default_rng(ranks)
    payloads = [comp.encode(rng.standard_normal(sum(sizes)).astype(np.float32) * rng.uniform(0.1, 10))
                for _ in range(ranks)]
    expected = np.zeros(sum(sizes), np.float32)
    for words in payloads:
        expected += comp.decode(words)
    got = comp.gathered(payloads)
    assert got.dtype == np.float32 and np.array_equal(got, expected)
