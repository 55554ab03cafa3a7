"""`make test`: the whole suite but its long runs (marked benchmark: `make benchmark` runs them), in two groups at
once. The emulation tests (root, Open vSwitch: one network at a time) run one after another at normal priority,
their output on the terminal; the rest (pure and loopback tests) run beside them in the idle scheduling class,
spread over the cores by pytest-xdist, so they only take what the emulated networks leave idle (the fidelity
sampler counts niced work as free CPU). The pure group's log is kept in build/tests/.

Usage: .venv/bin/python tests/run.py [PYTEST ARGS...]   (the arguments go to both groups)
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "build", "tests")
sys.path.insert(0, os.path.join(ROOT, "tests"))


def xdist_workers() -> list:
    """-n WORKERS for the pure group when pytest-xdist is installed (else nothing: one process)."""
    import importlib.util
    if importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(max(2, os.cpu_count() or 1)), "--dist", "worksteal"]


def pytest(args, marker, log=None, niced=False, state_dir=None):
    """A pytest process over the tests with this marker expression, in its own process group; state_dir: its own
    folder for run records and the network lock (the pure group's lock tests must not meet the emulated networks)."""
    command = [sys.executable, "-m", "pytest", "tests", "-m", marker, "-rs", "--durations=15", *args]
    if niced:  # the idle scheduling class (below nice 19): it runs only on a core nothing else wants
        command = ["chrt", "--idle", "0", "nice", "-n", "19", *command]
    env = dict(os.environ, **({"DMLBED_STATE_DIR": state_dir} if state_dir else {}))
    out = open(log, "w") if log else None
    return subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT if out else None,
                            start_new_session=True, env=env)


def stop(procs) -> None:
    """End both groups (and whatever their tests started in their sessions)."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def interrupted(signum, frame) -> None:
    """SIGTERM ends the suite as Ctrl-C does: both groups stopped."""
    raise KeyboardInterrupt


def main(args) -> int:
    from conftest import emulation_unavailable
    os.makedirs(LOGS, exist_ok=True)
    t0 = time.monotonic()
    if emulation_unavailable() is not None:  # nothing to run beside: the pure group alone, on the terminal
        return subprocess.call([sys.executable, "-m", "pytest", "tests", "-rs", "-m", "not benchmark", *xdist_workers(),
                                *args], cwd=ROOT)
    pure_log = os.path.join(LOGS, "pure-and-loopback.log")
    print(f"[tests] pure and loopback tests at low priority beside the emulation tests: log in "
          f"{os.path.relpath(pure_log, ROOT)}", flush=True)
    state = tempfile.mkdtemp(prefix="dmlbed-tests-")
    pure = pytest(["-q", *xdist_workers(), *args], "not emulation and not benchmark", pure_log, niced=True,
                  state_dir=os.path.join(state, "runs"))
    emulated = pytest(["-v", *args], "emulation and not benchmark")
    procs = [emulated, pure]
    signal.signal(signal.SIGTERM, interrupted)
    try:
        emulated_rc = emulated.wait()
        if pure.poll() is None:
            print("[tests] emulation tests done; waiting for the pure and loopback tests", flush=True)
        pure_rc = pure.wait()
    except KeyboardInterrupt:
        stop(procs)
        return 130
    finally:
        shutil.rmtree(state, ignore_errors=True)
    with open(pure_log) as f:
        lines = f.read().splitlines()
    start = next((n for n, l in enumerate(lines) if l.startswith("=") and "FAILURES" in l), None)
    print("\n".join(lines[start:] if start is not None else lines[-15:]))
    print(f"[tests] emulation tests: exit {emulated_rc}; pure and loopback tests: exit {pure_rc}; "
          f"{time.monotonic() - t0:.0f} s in all", flush=True)
    # pytest exits 5 when a marker selects nothing (a -k that matches only one group): not a failure
    return max((rc for rc in (emulated_rc, pure_rc) if rc not in (0, 5)), default=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
