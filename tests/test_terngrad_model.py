"""TernGrad's performance model (App. B, eq. 15-18) on an example worked by hand, and in `dmlbed theory`."""

import json

import pytest

from emulation.core.terngrad_model import Cluster, report, ternary_bytes
from helpers import run_dmlbed

# 2 machines of 4 GPUs, K = 128, T(1,1,K) = 0.5 s, |g| = 100 MB, C_gwd 10 GB/s, C_cwd 5 GB/s, C_nwd 1 Gbit/s,
# C_ncost 0.1 ms
CLUSTER = Cluster(gpus=4, machines=2, batch=128, step_s=0.5, gpu_bps=10e9, cpu_bps=5e9, net_bps=0.125e9,
                  latency_s=1e-4)
G = 100e6


def test_eq_15_to_18_by_hand():
    # T_comm = 0.1/10 * log2 4 + 0.1/5 + (0.0001 + 0.1/0.125) * log2 2 = 0.02 + 0.02 + 0.8001
    assert CLUSTER.t_comm(G) == pytest.approx(0.8401)
    # eq. 15: (0.5 - 0.02) / 8 + 0.8401 = 0.9001; eq. 16: 128 / 0.9001
    assert CLUSTER.t_strong(G, G) == pytest.approx(0.9001)
    assert CLUSTER.throughput("strong", G, G) == pytest.approx(128 / 0.9001)
    # eq. 17: 0.5 - 0.02 + 0.8401 = 1.3201 = T(1,1,K) + |g|/C_gwd log2 i + (C_ncost + |g|/C_nwd) log2 j;
    # eq. 18: 8 * 128 / 1.3201
    assert CLUSTER.t_weak(G, G) == pytest.approx(1.3201)
    assert CLUSTER.throughput("weak", G, G) == pytest.approx(1024 / 1.3201)


def test_ternary_bytes_keep_the_last_layer_fp32():
    sizes = [3000, 30, 500, 10]  # the last layer: a 500-element weight and its 10-element bias
    assert ternary_bytes(sizes) == pytest.approx((3030 * 2 / 8 + 2 * 4) + 510 * 4)
    assert ternary_bytes(sizes, last_layer_fp32=False) == pytest.approx(3540 * 2 / 8 + 4 * 4)


def test_report_compares_fp32_with_terngrad():
    out = report(CLUSTER, "weak", [25_000_000, 10])
    tern = ternary_bytes([25_000_000, 10])
    assert out["fp32"]["gradient_bytes"] == 4 * 25_000_010 and out["terngrad"]["gradient_bytes"] == tern
    # the profile removes the fp32 copy to the CPU in both; TernGrad then moves only its own bytes
    assert out["terngrad"]["t_s"] == pytest.approx(0.5 - 4 * 25_000_010 / 5e9 + CLUSTER.t_comm(tern))
    assert out["speedup"] == pytest.approx(out["fp32"]["t_s"] / out["terngrad"]["t_s"])


def test_theory_with_codec_terngrad_gives_app_b():
    r = run_dmlbed("theory", "--topo", "star:2", "--bw", "1000", "--algo", "ps", "--codec", "terngrad", "--model",
                   "alexnet", "--batch", "128", "--tg-step", "0.3", "--tg-gpus", "4", "--tg-gpu-gbps", "80",
                   "--tg-cpu-gbps", "80", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)["terngrad_model"]
    i = m["inputs"]
    assert (i["gpus"], i["machines"], i["workers"], i["batch"], i["scaling"]) == (4, 2, 8, 128, "weak")
    cluster = Cluster(4, 2, 128, 0.3, 10e9, 10e9, 125e6)
    g = m["fp32"]["gradient_bytes"]
    assert g == 61_100_840 * 4
    assert m["fp32"]["t_s"] == pytest.approx(cluster.t_weak(g, g))
    assert m["speedup"] > 1
