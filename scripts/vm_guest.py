"""Inside the VM test's guest: check the kernel datapath with dmlbed and print each result as one marked JSON line."""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARK = "DMLBED-VM"
DMLBED = os.path.join(ROOT, ".venv", "bin", "dmlbed")
PROBE_DEV = "dmlbedvm0"
RUN_TIMEOUT_S = 1200  # a software-emulated guest takes minutes to start torch ranks (227 s passed without progress)
# The DCTCP experiment of Mininet-HiFi (CoNEXT'12): 2 senders into 1 receiver, RED marking at K = 20 packets with
# DCTCP, against cubic in the drop-tail buffer; at a rate a software-emulated (TCG) guest sustains, in 1500-byte frames.
INCAST_MBIT, INCAST_S = 2, 30  # at 5 and 10 Mbit/s the guest's CPU held cubic's senders below their windows
LAB_DILATION = 10  # a software-emulated guest runs the labs' emulated runs 10x slower (their rates / 10)
DCTCP_EXPERIMENT = (("dctcp", "dctcp", "red-ecn:20"), ("cubic", "cubic", "none"))


def emit(step: str, **fields) -> None:
    """One result line on the console, where the host reads it."""
    print(f"{MARK} {json.dumps({'step': step, **fields})}", flush=True)


def sh(*cmd: str, timeout: float = 1800, progress: bool = False) -> subprocess.CompletedProcess:
    """Run a command, keeping its output (with progress: its stderr goes to the console as it comes)."""
    return subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=None if progress else subprocess.PIPE,
                          text=True, timeout=timeout)


def qdisc_works(*spec: str) -> bool:
    """Whether tc takes this root qdisc on a dummy interface."""
    return sh("tc", "qdisc", "replace", "dev", PROBE_DEV, "root", *spec).returncode == 0


def kernel_facts() -> dict:
    """What the guest kernel offers dmlbed: the OVS module, netem, ECN-marking qdiscs."""
    sh("modprobe", "dummy")
    sh("ip", "link", "add", PROBE_DEV, "type", "dummy")
    try:
        facts = {"kernel": os.uname().release,
                 "openvswitch_module": sh("modprobe", "openvswitch").returncode == 0,
                 "netem": qdisc_works("netem", "delay", "5ms", "loss", "1%"),
                 "red_ecn": qdisc_works("red", "limit", "400000", "min", "30000", "max", "90000", "avpkt", "1000",
                                        "burst", "55", "ecn", "bandwidth", "10mbit"),
                 "codel_ecn": qdisc_works("codel", "ecn"),
                 "fq_codel_ecn": qdisc_works("fq_codel", "ecn"),
                 "htb": qdisc_works("htb", "default", "1")}
    finally:
        sh("ip", "link", "del", PROBE_DEV)
    facts["ovs"] = sh("ovs-vsctl", "--version").stdout.splitlines()[0]
    facts["mem_available_mib"] = mem_available() // 2 ** 20
    return facts


def mem_available() -> int:
    """MemAvailable in bytes."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))


def demo_fits() -> dict:
    """The demo's own validation (memory check included), as `make demo` runs it, without running it."""
    from emulation.backends import matrix as compare
    try:
        job = compare.prepare(os.path.join(ROOT, "configs", "demo.yaml"), out_root="/tmp/vm-demo-check", force=True)
    except Exception as exc:  # the check's refusal is the result
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "runs": len(job.entries)}


def dmlbed(step: str, *args: str, timeout: float = 1800) -> dict:
    """Run one dmlbed command with --json; report its exit, time and JSON."""
    start = time.monotonic()
    r = sh(DMLBED, *args, "--json", timeout=timeout, progress=True)
    result = {"rc": r.returncode, "seconds": round(time.monotonic() - start, 1)}
    try:
        result["json"] = json.loads(r.stdout)
    except ValueError:
        result["stdout_tail"] = r.stdout[-1500:]
    emit(step, **result)
    return result


def main() -> int:
    """Facts, the demo's memory check, `net --check`, a short run, the labs asked for, the DCTCP experiment, and
    (when asked) the demo itself."""
    with open("/etc/dmlbed-vm.json") as f:
        plan = json.load(f)
    emit("facts", **kernel_facts())
    if plan.get("labs_only"):
        labs(plan["labs"])
        emit("done")
        return 0
    if not plan.get("incast_only"):
        checks(plan)
        if plan.get("labs"):
            labs(plan["labs"])
    for step, cc, aqm in DCTCP_EXPERIMENT:
        dmlbed(step, "net", "star:3", "--bw", str(INCAST_MBIT), "--mtu", "1500", "--incast", "2", "--duration",
               str(INCAST_S), "--tcp-cc", cc, "--aqm", aqm, "--check", "--out", f"/tmp/vm-{step}", "--force")
    if plan.get("demo"):
        dmlbed("demo", "compare", os.path.join(ROOT, "configs", "demo.yaml"), "--out", "/tmp/vm-demo", "--force",
               timeout=5400)
    emit("done")
    return 0


def labs(names: str) -> None:
    """The labs' handouts as a student runs them in a `vagrant up` VM (iterations cut to 2), each checked, its
    hand-in graded and a tampered file rejected (labs/handouts.py)."""
    start = time.monotonic()
    r = sh(sys.executable, os.path.join(ROOT, "labs", "handouts.py"), "--only", names, "--iters", "2", "--json",
           "--line-timeout", str(RUN_TIMEOUT_S * 2), "--dilation", str(LAB_DILATION), timeout=3 * 3600)
    result = {"rc": r.returncode, "seconds": round(time.monotonic() - start, 1)}
    try:
        result["json"] = json.loads(r.stdout)
    except ValueError:
        result["stdout_tail"] = r.stdout[-1500:]
        result["stderr_tail"] = r.stderr[-1500:]
    emit("labs", **result)


def checks(plan: dict) -> None:
    """The demo's memory check, `net --check` and a short run on the kernel datapath."""
    emit("demo_memory", **demo_fits())
    dmlbed("net", "net", "star:4", "--bw", "10", "--check")
    dmlbed("run", "run", "--topo", "star:4", "--algo", "ps", "--iters", str(plan.get("iters", 3)), "--bw", "10",
           "--timeout", str(RUN_TIMEOUT_S), "--out", "/tmp/vm-run", "--force")


if __name__ == "__main__":
    sys.exit(main())
