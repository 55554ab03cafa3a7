"""`dmlbed bench --format nccl-tests`: the table in nccl-tests' columns and units, read back by a parser written to
nccl-tests' documented output (doc/PERFORMANCE.md and its printed header), checked against bench.json."""

import json
import statistics

import pytest

from helpers import run_dmlbed

FIELDS = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "wrong",
          "time_ip", "algbw_ip", "busbw_ip", "wrong_ip")


def cell(text):
    """A numeric cell, or None where nccl-tests prints N/A."""
    return None if text == "N/A" else float(text)


def parse_nccl_tests(text):
    """nccl-tests' stdout as its parsers read it: '#' lines are header and footer, every other line is one size with
    13 columns (size, count, type, redop, root, then time in us, algbw and busbw in GB/s and #wrong out of place,
    then the same in place); 'Avg bus bandwidth' in the footer. One dict per block (a header starts a block)."""
    blocks = []
    for line in text.splitlines():
        if line.startswith("#"):
            if "size" in line and "count" in line and "redop" in line:
                blocks.append({"rows": [], "avg_busbw": None})
            elif "Avg bus bandwidth" in line:
                blocks[-1]["avg_busbw"] = float(line.split(":")[1])
            continue
        if not line.strip():
            continue
        parts = line.split()
        assert len(parts) == len(FIELDS), line
        row = dict(zip(FIELDS, parts))
        for key in ("size", "count", "root"):
            row[key] = int(row[key])
        for key in FIELDS[5:]:
            row[key] = cell(row[key])
        blocks[-1]["rows"].append(row)
    return blocks


def test_a_local_bench_prints_nccl_tests_table_that_its_parsers_read(tmp_path):
    r = run_dmlbed("bench", "--topo", "star:4", "--algo", "ring,hd", "--sizes", "4K,256K", "--reps", "2",
                   "--warmup", "1", "--local", "--format", "nccl-tests", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    blocks = parse_nccl_tests(r.stdout)
    report = json.loads((tmp_path / "bench.json").read_text())
    assert len(blocks) == 2
    for block, algo in zip(blocks, ("ring", "hd")):
        mine = [x for x in report["rows"] if x["algo"] == algo]
        assert [b["size"] for b in block["rows"]] == [x["size_bytes"] for x in mine] == [4096, 256 << 10]
        for b, x in zip(block["rows"], mine):
            assert b["count"] == x["size_bytes"] // 4 and (b["type"], b["redop"], b["root"]) == ("float", "sum", -1)
            assert b["time"] == pytest.approx(x["time_s"] * 1e6, abs=0.05)
            assert b["algbw"] == pytest.approx(x["size_bytes"] / x["time_s"] / 1e9, abs=1e-6)
            assert b["busbw"] == pytest.approx(b["algbw"] * 2 * 3 / 4, abs=2e-6)  # all-reduce: 2(n-1)/n
            assert b["wrong"] == 0 and b["time_ip"] is None and b["wrong_ip"] is None  # one timing, out of place
        assert block["avg_busbw"] == pytest.approx(statistics.mean(b["busbw"] for b in block["rows"]), abs=2e-6)
        assert parse_nccl_tests((tmp_path / "nccl-tests" / f"{algo}.txt").read_text()) == [block]


def test_simulated_collectives_use_nccl_tests_counts_redops_and_roots(tmp_path):
    r = run_dmlbed("bench", "--topo", "star:8", "--op", "allgather,broadcast,reducescatter", "--sizes", "1M",
                   "--mode", "simulate", "--format", "nccl-tests", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    blocks = parse_nccl_tests(r.stdout)
    assert len(blocks) == len(report["rows"]) and all(len(b["rows"]) == 1 for b in blocks)
    for block, x in zip(blocks, report["rows"]):
        b = block["rows"][0]
        per_rank = x["op"] in ("allgather", "reducescatter")  # the call's count: the whole array over 8 ranks
        assert b["count"] == (1 << 20) // 4 // (8 if per_rank else 1), (x["op"], b)
        assert b["redop"] == ("sum" if x["op"] == "reducescatter" else "none")
        assert b["root"] == (0 if x["op"] == "broadcast" else -1)
        assert b["busbw"] == pytest.approx(x["busbw_mbps"] / 8000, abs=1e-6)
        assert b["wrong"] is None  # the flow model checks nothing
    assert "flow model" in r.stdout.splitlines()[1]


def test_an_unknown_format_is_refused_in_one_line(tmp_path):
    r = run_dmlbed("bench", "--topo", "star:4", "--algo", "ring", "--local", "--format", "nccl", "--out",
                   str(tmp_path))
    assert r.returncode == 2 and "nccl-tests" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "bench.json").exists()
