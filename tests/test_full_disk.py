"""Faults of the machine the user owns: an --out folder that is too small, unwritable, or fills up during the run
ends in one line naming the folder and the cause, with no temporary file left and nothing left running."""

import contextlib
import os
import subprocess
import sys
import threading
import time

import pytest

from emulation.results.files import OutputError, write_atomic, write_atomic_csv
from helpers import ROOT

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@contextlib.contextmanager
def tiny_tmpfs(path, size="200k"):
    """A tmpfs of `size` mounted at path for the block."""
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder):
    """Write to folder until the file system is full."""
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def tmp_files(folder):
    """Every temporary file left under folder."""
    return [os.path.join(d, n) for d, _, names in os.walk(folder) for n in names if n.endswith(".tmp")]


def test_a_writer_on_a_full_disk_names_the_folder_and_leaves_no_tmp(tmp_path):
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        fill(mnt)
        with pytest.raises(OutputError, match=f"cannot write results to {mnt}: No space left on device"):
            write_atomic(str(mnt / "summary.json"), "x" * 100_000)
        with pytest.raises(OutputError, match="No space left on device"):
            write_atomic_csv(str(mnt / "iterations.csv"), ["a"], ([i] for i in range(100_000)))
        assert tmp_files(mnt) == [] and not os.path.exists(mnt / "summary.json")


def dmlbed(*args):
    return subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_run_into_a_200k_tmpfs_is_refused_before_it_starts(tmp_path):
    with tiny_tmpfs(tmp_path / "mnt") as mnt:
        proc = dmlbed("run", "--topo", "star:4", "--algo", "ring", "--local", "--iters", "10", "--out", str(mnt / "r"))
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
        assert str(mnt / "r") in err and "KiB free" in err
        assert os.listdir(mnt) == []


def test_a_disk_that_fills_during_a_run_ends_in_one_line(tmp_path):
    with tiny_tmpfs(tmp_path / "mnt", size="2m") as mnt:
        out = mnt / "r"
        proc = dmlbed("run", "--topo", "star:3", "--algo", "ring", "--model", "mlp:10000", "--local", "--iters", "60",
                      "--out", str(out))
        records = out / "workers" / "rank-0.jsonl"
        deadline = time.monotonic() + 120
        while not (records.exists() and records.stat().st_size > 0) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        fill(mnt)
        _, err = proc.communicate(timeout=300)
        last = err.strip().splitlines()[-1]
        assert proc.returncode == 1, err[-2000:]
        assert "Traceback" not in err, err[-3000:]
        assert last.startswith("dmlbed: error:") and "No space left on device" in last, last
        assert str(mnt) in last, last
        assert tmp_files(mnt) == []
    assert not any("workloads.worker" in open(f"/proc/{p}/cmdline").read() and str(out) in
                   open(f"/proc/{p}/cmdline").read() for p in os.listdir("/proc") if p.isdigit()
                   and os.path.exists(f"/proc/{p}/cmdline"))
