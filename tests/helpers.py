"""Helpers shared by tests: run the CLI as a user would."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


REPORTING = ("run", "simulate", "compare")  # the commands that draw report.html unless told --no-report


def run_dmlbed(*args, timeout=600, report=False, **kwargs):
    """Run the dmlbed CLI as a user would, returning the CompletedProcess; every summary it wrote or printed is
    checked against its generated JSON Schema (check_summaries). Without report=True a run, simulation or
    comparison draws no report.html (about 2 s each: tests/test_report.py tests the report)."""
    if not report and args and args[0] in REPORTING and "--help" not in args and "-h" not in args:
        args = (*args, "--no-report")
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=timeout, **kwargs)
    check_summaries(list(args), r)
    return r


SUMMARY_SCHEMAS = {"run": "summary", "simulate": "summary", "launch": "launch"}


def cli_json(*args, timeout=300):
    """The summary a dmlbed command prints with --json (the command must succeed)."""
    r = run_dmlbed(*args, "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def python_json(code, timeout=300):
    """What a Python program run from the checkout printed last, as JSON (the program must succeed)."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_summaries(args, result):
    """Validate what a command wrote: summary.json of run, simulate and launch in --out (when it wrote one), and
    what theory printed with --json."""
    import json
    import jsonschema
    from emulation.commands.schema import schema
    if not args:
        return
    own = args[:args.index("--")] if "--" in args else args  # a launched command's own flags are not dmlbed's
    kind = "parallel" if args[0] in ("theory", "simulate", "run") and "--parallel" in own else \
        SUMMARY_SCHEMAS.get(args[0])
    if args[0] in SUMMARY_SCHEMAS and "--out" in args:
        path = os.path.join(args[args.index("--out") + 1], "summary.json")
        if os.path.isfile(path):
            jsonschema.Draft202012Validator(schema(kind)).validate(json.load(open(path)))
    if args[0] in ("compare", "reproduce") and "--out" in args:  # every row's own folder
        import glob
        for path in glob.glob(os.path.join(args[args.index("--out") + 1], "**", "summary.json"), recursive=True):
            data = json.load(open(path))
            row_kind = "parallel" if "bubble_per_stage" in data else \
                "launch" if os.path.basename(os.path.dirname(path)) == "launch" else "summary"
            jsonschema.Draft202012Validator(schema(row_kind)).validate(data)
    if args[0] in ("theory", "simulate") and "--json" in args and result.returncode == 0 and \
            (args[0] == "theory" or kind == "parallel"):
        jsonschema.Draft202012Validator(schema(kind or "summary")).validate(json.loads(result.stdout))


def kill_worker(out_dir, rank, sig=9):
    """Kill the worker process of `rank` of the run writing to out_dir (found by its config path)."""
    marker = os.path.join(os.path.abspath(out_dir), "workers", f"rank-{rank}.config.json")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "workloads.worker" in cmdline:
            os.kill(int(pid), sig)
            return int(pid)
    raise AssertionError(f"no worker process for rank {rank} under {out_dir}")


def wait_for_iterations(out_dir, rank, count, proc, timeout=120):
    """Wait until rank has written `count` iteration records (or fail if the run ends first)."""
    import time
    path = os.path.join(out_dir, "workers", f"rank-{rank}.jsonl")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= count:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"rank {rank} never reached {count} iterations")


def kill_worker_midway(out_dir, rank, args, start_timeout=120):
    """Start `dmlbed run ARGS --json --out OUT_DIR`, kill rank's worker after 3 iterations, and return
    (summary, seconds from the kill to the end); asserts the run failed with exit code 1."""
    import json
    import time
    proc = subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "run", *args, "--json", "--out", str(out_dir)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_iterations(str(out_dir), rank, 3, proc, timeout=start_timeout)
    kill_worker(str(out_dir), rank)
    start = time.monotonic()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr[-2000:]
    return json.loads(stdout), time.monotonic() - start


def free_port() -> int:
    """A TCP port nobody listens on at 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, timeout=30):
    """Wait until something accepts TCP connections on 127.0.0.1:port (a controller starting)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """main() installs its handlers; give the test runner its own back (autouse where a test module imports it)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)
