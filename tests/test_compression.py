"""TernGrad's own properties: unbiased ternarization, clipping at 2.5 sigma, lossless packing, 2N+1 levels."""

import numpy as np
import pytest

from workloads.compression import CodecError, PackedIntCodec, TernGrad, clip, pack_words, unpack_words, width_for


def test_ternarize_is_unbiased():
    g = np.random.default_rng(0).standard_normal(200).astype(np.float32) * 0.1
    tern = TernGrad([200], seed=0)
    clipped, scalers = tern.clip_and_scale(g)
    s = float(scalers[0])
    samples = [tern.ternary(tern.stage(g), scalers) for _ in range(4000)]
    assert np.allclose(s * np.mean(samples, axis=0), clipped, atol=4 * s / np.sqrt(4000))
    assert set(np.unique(samples)) == {-1.0, 0.0, 1.0}


def test_staging_draws_before_the_scalers_are_shared():
    """The device stages a gradient once; any shared scaler (the max over workers, so at least its own) ternarizes
    it, with a larger scaler keeping fewer values and a zero scaler none."""
    g = np.random.default_rng(3).standard_normal(5000).astype(np.float32)
    tern = TernGrad([4000, 1000], seed=1)
    staged = tern.stage(g)
    own = tern.ternary(staged, staged.scalers)
    wider = tern.ternary(staged, staged.scalers * 4)
    assert np.count_nonzero(wider) < np.count_nonzero(own)
    assert np.all(np.abs(wider) <= np.abs(own))  # the same draws: a value kept at 4s is kept at s
    assert not np.any(tern.ternary(staged, np.zeros(2, np.float32)))
    assert np.array_equal(np.sign(own[own != 0]), np.sign(g[own != 0]))


def test_clipping_limits_to_2_5_sigma():
    g = np.concatenate([np.random.default_rng(1).standard_normal(1000), [50.0, -60.0]]).astype(np.float32)
    c = clip(g)
    sigma = g.std()
    assert np.abs(c).max() == pytest.approx(2.5 * sigma, rel=1e-6)
    assert np.array_equal(c[:1000][np.abs(g[:1000]) <= 2.5 * sigma], g[:1000][np.abs(g[:1000]) <= 2.5 * sigma])


@pytest.mark.parametrize("values,width", [([-1, 0, 1, 1, 0], 2), ([-7, 7, 0], 4), ([-127, 100], 8),
                                          ([3000, -5], 13), ([], 2), ([0] * 9, 2), ([-2, 2, 1], 3),
                                          ([9, -9, 0, 4, -3], 5), ([-63, 63] * 7, 7), ([-200, 255, 7], 9),
                                          ([32767, -32767], 16)])
def test_packing_round_trips_losslessly(values, width):
    arr = np.array(values, dtype=np.float32)
    codec = PackedIntCodec()
    data = codec.encode(arr)
    assert data[0] == width == width_for(arr.astype(np.int32))
    assert np.array_equal(codec.decode(data, len(arr)), arr)


def test_ternary_packs_four_values_per_byte():
    arr = np.random.default_rng(2).integers(-1, 2, 10_000).astype(np.float32)
    data = PackedIntCodec().encode(arr)
    assert len(data) == 1 + 2500
    assert len(data) / (arr.nbytes) <= 1 / 15


def test_codec_refuses_non_integers():
    with pytest.raises(CodecError):
        PackedIntCodec().encode(np.array([0.5], np.float32))


@pytest.mark.parametrize("workers", [2, 4, 9])
def test_shared_scaler_sum_has_at_most_2n_plus_1_levels(workers):
    rng = np.random.default_rng(workers)
    sizes = [500, 20]
    grads = [rng.standard_normal(sum(sizes)).astype(np.float32) * (i + 1) for i in range(workers)]
    codecs = [TernGrad(sizes, seed=i) for i in range(workers)]
    staged = [c.stage(g) for c, g in zip(codecs, grads)]
    shared = np.max([st.scalers for st in staged], axis=0)
    total = np.sum([c.ternary(st, shared) for c, st in zip(codecs, staged)], axis=0)
    averaged = codecs[0].decompress(total, shared, workers)
    for layer, s in zip(codecs[0].layers(averaged), shared):
        assert len(np.unique(np.round(layer / s * workers))) <= 2 * workers + 1
    assert np.abs(total).max() <= workers


def test_terngrad_wire_fraction_follows_the_packed_widths():
    from emulation.core.topology import parse
    from workloads.algorithms import get
    from workloads.compression import partial_sum_width, terngrad_wire_fraction
    # ceil(log2(2c + 1)): 3, 5, 15, 17, 255 and 257 levels
    assert [partial_sum_width(c) for c in (1, 2, 7, 8, 127, 128)] == [2, 3, 4, 5, 8, 9]
    ps = get("ps").build_plan(parse("star:4"), 0)
    # push: ternaries (2 bits); pull: sums of 4 workers (9 levels: 4 bits); busiest sender sends both equally
    assert terngrad_wire_fraction(ps, [100] * ps.pieces) == pytest.approx((2 + 4) / 2 / 32)
    ring = get("ring").build_plan(parse("star:9"), 0)
    # reduce-scatter carries sums of 1..8 (2, 3, 3, 4, 4, 4, 4, 5 bits), all-gather sums of 9 (19 levels: 5 bits)
    assert terngrad_wire_fraction(ring, [100] * 9) == pytest.approx((2 + 2 * 3 + 4 * 4 + 5 + 8 * 5) / 16 / 32)


def test_random_sums_round_trip_at_every_width():
    codec = PackedIntCodec()
    rng = np.random.default_rng(3)
    for workers in range(1, 200, 7):
        arr = rng.integers(-workers, workers + 1, 1001).astype(np.float32)
        arr[0] = workers  # the extreme sum is present
        data = codec.encode(arr)
        assert data[0] == int(np.ceil(np.log2(2 * workers + 1)))
        assert len(data) == 1 + -(-1001 * data[0] // 8)  # exactly w bits per value, rounded up to bytes
        assert np.array_equal(codec.decode(data, 1001), arr)


@pytest.mark.parametrize("width", range(2, 8))
def test_word_packing_is_the_little_endian_bit_stream(width):
    rng = np.random.default_rng(width)
    for count in (1, 7, 8, 9, 63, 1000):
        offset = rng.integers(0, 2 ** width, count)
        bits = ((offset[:, None] >> np.arange(width)) & 1).astype(np.uint8).reshape(-1)
        stream = np.packbits(bits, bitorder="little").tobytes()
        assert pack_words(offset, width) == stream
        assert np.array_equal(unpack_words(np.frombuffer(stream, np.uint8), count, width), offset)


def test_a_short_message_is_refused():
    data = PackedIntCodec().encode(np.array([3, -3, 1, 0, 2], np.float32))  # 3 bits each: 2 bytes
    with pytest.raises(CodecError, match="expected 9"):
        PackedIntCodec().decode(data, 9)


def test_terngrad_theory_scales_the_formula_by_the_wire_fraction():
    import json
    from helpers import run_dmlbed
    out = {}
    for codec in ("none", "terngrad"):
        r = run_dmlbed("theory", "--topo", "star:4", "--algo", "ps", "--bw", "50", "--codec", codec, "--json")
        assert r.returncode == 0, r.stderr
        out[codec] = json.loads(r.stdout)
    assert out["terngrad"]["gst_theory_s"] == pytest.approx(out["none"]["gst_theory_s"] * 6 / 64, rel=1e-3)
    assert "TernGrad" in out["terngrad"]["formula"]
