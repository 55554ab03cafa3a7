"""Models, data sources and the papers' formulas (pure, no network)."""

import gzip
import struct

import numpy as np
import pytest
import torch

from emulation.core.formulas import full_gradient_time
from workloads.algorithms import get, theory
from workloads.algorithms.pflow import overlay_for
from emulation.core.topology import parse
from workloads.data import DataError, SyntheticBatches, batches, check_data, digits_28x28, mnist, read_idx
from workloads.models import ModelError, build_model, input_shape, parameter_count, parameter_count_of, parse_size


def test_lenet5_is_the_bml_papers():
    model, shape = build_model("lenet5")
    assert parameter_count(model) == 3_274_634 == parameter_count_of("lenet5")  # 3.27M
    assert parameter_count(model) * 4 / 2 ** 20 == pytest.approx(12.49, abs=0.01)  # 12.5 MB
    assert model(torch.zeros(2, *shape)).shape == (2, 10)


@pytest.mark.parametrize("name,params", [("vgg19", 143_667_240), ("alexnet", 61_100_840)])
def test_big_models(name, params):
    model, shape = build_model(name)
    assert parameter_count(model) == params == parameter_count_of(name)
    assert shape == (3, 224, 224)


@pytest.mark.parametrize("size,params", [("12.5MB", 3_125_000), ("3.27M", 3_270_000), ("100K", 100_000)])
def test_mlp_size_is_what_the_user_asked(size, params):
    model, shape = build_model(f"mlp:{size}")
    assert parameter_count(model) == pytest.approx(params, rel=0.01)
    assert model(torch.zeros(3, *shape)).shape == (3, 10)


@pytest.mark.parametrize("name,fragment", [("resnet", "unknown model"), ("mlp:abc", "invalid"),
                                           ("mlp:10", "1K..500M")])
def test_bad_models(name, fragment):
    with pytest.raises(ModelError, match=fragment):
        input_shape(name)
    assert parse_size("1K") == 1000


def test_same_seed_same_initial_replica():
    a, _ = build_model("lenet5", seed=3)
    b, _ = build_model("lenet5", seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_digits_offline_28x28():
    x, y = digits_28x28()
    assert x.shape == (1797, 1, 28, 28) and y.shape == (1797,)
    assert 0 <= float(x.min()) and float(x.max()) <= 1
    xb, yb = next(iter(batches("digits", (1, 28, 28), 16, rank=1, ranks=3, seed=0)))
    assert xb.shape == (16, 1, 28, 28) and yb.max() < 10


def test_synthetic_is_seeded_per_rank():
    a = next(iter(SyntheticBatches((4,), 10, 2, rank=0, seed=1)))[0]
    b = next(iter(SyntheticBatches((4,), 10, 2, rank=0, seed=1)))[0]
    c = next(iter(SyntheticBatches((4,), 10, 2, rank=1, seed=1)))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def write_idx(path, array):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(np.uint8).tobytes())


def test_mnist_idx_loader(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (20, 28, 28))
    labels = np.arange(20) % 10
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    assert np.array_equal(read_idx(str(tmp_path / "train-images-idx3-ubyte.gz")), images)
    x, y = mnist(str(tmp_path))
    assert x.shape == (20, 1, 28, 28) and y.tolist() == labels.tolist()
    check_data(f"mnist:{tmp_path}", (1, 28, 28))


@pytest.mark.parametrize("source,shape,fragment", [("imagenet", (1, 28, 28), "unknown data"),
                                                   ("digits", (3, 224, 224), "use it with lenet5"),
                                                   ("mnist:/nonexistent", (1, 28, 28), "has no")])
def test_bad_data(source, shape, fragment):
    with pytest.raises(DataError, match=fragment):
        check_data(source, shape)


def test_bml_paper_formulas():
    s = 3_274_634 * 4
    tf = full_gradient_time(s, 100)
    assert tf == pytest.approx(s * 8 / 100e6)
    bml = theory("bml", parse("bcube:3,2"), s, (100.0, 100.0)).gst_s
    ps = theory("ps", parse("star:9"), s, (100.0,)).gst_s
    assert bml == pytest.approx(8 / 9 * tf)  # 16 TC with TC = TF/18
    assert ps == pytest.approx(16 / 9 * tf)  # 2(N-1)/N TF
    assert bml / ps == pytest.approx(1 / 2)  # 1/k
    assert theory("bml", parse("bcube:2,3"), s, (100.0,) * 3).gst_s == pytest.approx(2 * 7 / 24 * tf)
    assert theory("ring", parse("star:9"), s, (100.0,)).gst_s == pytest.approx(ps)
    assert theory("ps", parse("star:9"), s, (100.0,), servers=3).gst_s == pytest.approx(2 * 6 / 3 * tf)
    # more servers than workers: each worker's own link still carries the whole gradient each way
    assert theory("ps", parse("star:9"), s, (100.0,), servers=5).gst_s == pytest.approx(2 * tf)
    # one server under tree:3,2 at 100/50: the far subtree's 50 Mbit/s uplink carries 3 workers' gradients,
    # not the server's link (5 at 100) nor 5 at the slowest level (the old formula, 1.7x pessimistic)
    tf50 = full_gradient_time(s, 50)
    assert theory("ps", parse("tree:3,2"), s, (100.0, 50.0), servers=1).gst_s == pytest.approx(2 * 3 * tf50)
    pflow = get("pflow")
    direct = pflow.gst_theory(parse("tree:3,2"), s, (100.0, 50.0), 1, options={"pf_tree": "none"})
    assert direct.gst_s == pytest.approx(2 * 3 * tf50)  # the broadcast as long as the push
    star = parse("star:9")
    tree = pflow.gst_theory(star, s, (100.0,), 1, options={"pf_tree": "5,3"})
    overlay = overlay_for("5,3", star, 1)
    fanout = max(len(overlay.children(j)) for j in range(len(overlay.parent)))
    assert 1 < fanout <= 5 and tree.gst_s == pytest.approx(8 * tf + fanout * tf)  # push, then the busiest sender
    assert theory("ibatch", parse("tree:3,2"), s, (100.0, 50.0), servers=1).gst_s == pytest.approx(3 * tf50)
