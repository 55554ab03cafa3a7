"""The VM test: a Debian 12 guest built from Debian's packages and provisioned by scripts/setup.sh, booted under
QEMU, runs dmlbed on the kernel datapath (`net star:4 --check`, a short run, the demo's memory check, the DCTCP
experiment: `net star:3 --incast 2` with --aqm red-ecn:20 --tcp-cc dctcp and with cubic in a drop-tail buffer).

Usage (root): .venv/bin/python scripts/vm_test.py [--out DIR] [--demo] [--rebuild]
The guest's base (debootstrap, kernel, Open vSwitch, Mininet, the venv) is kept in ~/.cache/dmlbed/vm and
rebuilt when setup.sh, requirements.txt or setup.py change; the project's files are copied in afresh each time.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "dmlbed", "vm")
SUITE = "bookworm"
GUEST_PACKAGES = ["linux-image-amd64", "systemd-sysv", "ca-certificates", "kmod", "iproute2", "udev"]
HOST_PACKAGES = {"qemu-system-x86_64": "qemu-system-x86", "debootstrap": "debootstrap", "mkfs.ext4": "e2fsprogs"}
VAGRANT_MEMORY_MIB = 4096  # the Vagrantfile's size: the guest gets what a `vagrant up` VM gets
GUEST_CPUS = 2
GUEST_PROJECT = "/root/dmlbed"
VM_LABS = ("lab1-topologies", "lab5-latency")  # issue 42: lab 1 and a training lab run in the VM
MARK = "DMLBED-VM"
UNIT = """[Unit]
Description=dmlbed VM test
After=openvswitch-switch.service
Wants=openvswitch-switch.service

[Service]
Type=oneshot
ExecStart=/root/dmlbed/.venv/bin/python /root/dmlbed/scripts/vm_guest.py
ExecStopPost=/bin/systemctl --no-block poweroff
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0

[Install]
WantedBy=multi-user.target
"""
DCTCP_QUEUE = (15, 30)    # packets: DCTCP holds the queue near K = 20
DCTCP_THROUGHPUT = 0.9    # of the bottleneck's rate
CUBIC_FILL = 0.8          # cubic's queue p90, of the buffer


def say(msg: str) -> None:
    """Progress, one line each."""
    print(f"[vm-test] {msg}", flush=True)


def debian_mirror(sources_dir: str = "/etc/apt") -> str:
    """The Debian archive this machine's apt uses (deb822 or one-line sources), so the guest comes from it too."""
    files = sorted(glob.glob(os.path.join(sources_dir, "sources.list.d", "*.sources"))) + \
        [os.path.join(sources_dir, "sources.list")] + sorted(glob.glob(os.path.join(sources_dir, "sources.list.d", "*.list")))
    for path in files:
        if not os.path.isfile(path):
            continue
        text = open(path).read()
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.+)$", stanza, re.M))
            if "URIs" in fields and "security" not in fields.get("Suites", ""):
                return fields["URIs"].split()[0]
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["deb"] and len(words) >= 3 and not words[1].startswith("["):
                if "security" not in words[2]:
                    return words[1]
    raise SystemExit("vm-test: no Debian archive found in this machine's apt sources")


def base_key() -> str:
    """What the cached guest base depends on."""
    h = hashlib.sha1(" ".join(GUEST_PACKAGES).encode())
    for name in ("scripts/setup.sh", "requirements.txt", "setup.py"):
        with open(os.path.join(ROOT, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def parse_console(text: str) -> Dict[str, dict]:
    """The guest's marked result lines, by step."""
    steps = {}
    for line in text.splitlines():
        at = line.find(MARK + " {")
        if at >= 0:
            try:
                record = json.loads(line[at + len(MARK) + 1:])
            except ValueError:
                continue
            steps[record.pop("step")] = record
    return steps


def judge_labs(steps: Dict[str, dict], labs: List[str]) -> List[str]:
    """Every lab asked for ran its handout, its checker passed, graded a right hand-in and rejected tampering."""
    if not labs:
        return []
    result = steps.get("labs") or {}
    ran = {r["lab"]: r for r in ((result.get("json") or {}).get("labs") or [])}
    problems = []
    for lab in labs:
        r = ran.get(lab)
        if r is None:
            problems.append(f"{lab} did not run in the guest ({result.get('stderr_tail') or 'no result'})")
        elif r.get("failed_command"):
            why = r.get("output") or (r.get("error") or "").strip()[-300:]
            problems.append(f"{lab}: `{r['failed_command']}` failed: {why}")
        elif not (r.get("checker_passes") and r.get("checker_rejects_tampering") and r.get("answers_pass")
                  and r.get("wrong_answer_rejected")):
            problems.append(f"{lab}: its checker did not accept the handout's results and a right hand-in, or did "
                            f"not reject a tampered file and a wrong answer: {(r.get('checker_output') or '')[-300:]}")
    return problems


def judge(steps: Dict[str, dict], demo: bool = False, incast_only: bool = False, labs: List[str] = ()) -> List[str]:
    """What failed, one line each (empty when the guest met every check; incast_only: the DCTCP experiment's)."""
    problems = []
    if "done" not in steps:
        problems.append("the guest did not finish its checks (see console.log)")
    if incast_only:  # the guest ran nothing else: the other steps are not failures
        return problems + judge_dctcp(steps)
    net = steps.get("net", {})
    report = net.get("json") or {}
    if net.get("rc") != 0:
        problems.append(f"net --check exited {net.get('rc')}")
    if report.get("datapath") != "kernel":
        problems.append(f"net --check ran on the {report.get('datapath')} datapath, not the kernel's")
    if report.get("verdict") != "faithful":
        problems.append(f"net --check was {report.get('verdict')} (fidelity_min {report.get('fidelity_min')}): "
                        f"{report.get('cause')}")
    run = steps.get("run", {})
    summary = run.get("json") or {}
    if run.get("rc") != 0:
        problems.append(f"dmlbed run exited {run.get('rc')}")
    if summary.get("datapath") != "kernel":
        problems.append(f"dmlbed run used the {summary.get('datapath')} datapath, not the kernel's")
    if not steps.get("demo_memory", {}).get("ok"):
        problems.append(f"the demo's memory check refused: {steps.get('demo_memory', {}).get('error')}")
    problems += judge_labs(steps, list(labs))
    problems += judge_dctcp(steps)
    if demo and steps.get("demo", {}).get("rc") != 0:
        problems.append(f"the demo exited {steps.get('demo', {}).get('rc')}")
    return problems


def judge_dctcp(steps: Dict[str, dict]) -> List[str]:
    """The DCTCP experiment's checks: DCTCP holds the bottleneck queue near K at full rate; cubic without ECN
    fills the drop-tail buffer."""
    problems = []
    for step in ("dctcp", "cubic"):
        result = steps.get(step, {})
        incast = (result.get("json") or {}).get("incast") or {}
        queue = incast.get("queue") or {}
        if result.get("rc") != 0 or "median_packets" not in queue:
            problems.append(f"the {step} incast exited {result.get('rc')} without a queue measured")
            continue
        if step == "dctcp":
            if not DCTCP_QUEUE[0] <= queue["median_packets"] <= DCTCP_QUEUE[1]:
                problems.append(f"dctcp's queue median {queue['median_packets']:g} packets is outside "
                                f"[{DCTCP_QUEUE[0]}, {DCTCP_QUEUE[1]}]")
            if incast["throughput_of_rate"] < DCTCP_THROUGHPUT:
                problems.append(f"dctcp's throughput {incast['throughput_of_rate']:.0%} of the rate is below "
                                f"{DCTCP_THROUGHPUT:.0%}")
            if not queue.get("ecn_marks"):
                problems.append("the RED queue marked no packet under dctcp")
        elif queue["p90_of_buffer"] < CUBIC_FILL:
            problems.append(f"cubic's queue p90 {queue['p90_packets']:g} is below {CUBIC_FILL:g} of the "
                            f"{queue['buffer_packets']}-packet buffer"
                            + ("; nothing was dropped, so cubic never reached the buffer: its senders were held "
                               "below their windows (the guest's CPU), run it again" if not queue.get("drops") else ""))
    return problems


def need_host_tools() -> None:
    """QEMU, debootstrap and mke2fs from Debian's packages."""
    missing = sorted({pkg for tool, pkg in HOST_PACKAGES.items() if not shutil.which(tool)})
    if missing:
        say(f"installing {' '.join(missing)}")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True,
                       stdout=subprocess.DEVNULL, env=env)


def pip_wheel_dirs() -> List[str]:
    """This machine's local wheel folders (pip's find-links), which the guest's pip gets too."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    dirs = re.findall(r"find-links='([^']*)'", out) + os.environ.get("PIP_FIND_LINKS", "").split()
    return [d for d in dict.fromkeys(" ".join(dirs).split()) if os.path.isdir(d)]


class Chroot:
    """The guest's root with /proc, /sys and /dev bound in for provisioning; unbound on leaving."""

    MOUNTS = [("proc", "proc", ["-t", "proc", "proc"]), ("sys", "sys", ["-t", "sysfs", "sysfs"]),
              ("dev", "dev", ["--bind", "/dev"]), ("dev/pts", "dev/pts", ["--bind", "/dev/pts"])]

    def __init__(self, root: str):
        self.root, self.mounted = root, []

    def __enter__(self):
        for _, sub, args in self.MOUNTS:
            target = os.path.join(self.root, sub)
            os.makedirs(target, exist_ok=True)
            subprocess.run(["mount", *args, target], check=True)
            self.mounted.append(target)
        with open(os.path.join(self.root, "usr/sbin/policy-rc.d"), "w") as f:
            f.write("#!/bin/sh\nexit 101\n")  # no service starts inside the chroot
        os.chmod(os.path.join(self.root, "usr/sbin/policy-rc.d"), 0o755)
        shutil.copy("/etc/resolv.conf", os.path.join(self.root, "etc/resolv.conf"))
        return self

    def run(self, script: str, env: Dict[str, str]) -> None:
        """A shell script inside, as root."""
        subprocess.run(["chroot", self.root, "/usr/bin/env", "-i", *[f"{k}={v}" for k, v in env.items()],
                        "/bin/bash", "-euo", "pipefail", "-c", script], check=True)

    def __exit__(self, *exc):
        os.remove(os.path.join(self.root, "usr/sbin/policy-rc.d"))
        for target in reversed(self.mounted):
            subprocess.run(["umount", "-l", target])
        return False


def copy_project(rootfs: str) -> None:
    """The project's tracked files (as committed or edited, not .venv or results) into the guest."""
    dest = os.path.join(rootfs, GUEST_PROJECT.lstrip("/"))
    if os.path.isdir(dest):  # a fresh copy each time, but keep the provisioned venv
        for entry in os.listdir(dest):
            if entry != ".venv":
                path = os.path.join(dest, entry)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        src = os.path.join(ROOT, name)
        if os.path.isfile(src):
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, name))


def provision(rootfs: str) -> None:
    """The project's own setup.sh inside the guest's root, with this machine's pip settings and local wheels."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
           "LANG": "C.UTF-8", "DMLBED_SETUP_START_OVS": "0"}
    links = []
    for i, folder in enumerate(pip_wheel_dirs()):
        inside = f"/opt/host-wheels/{i}"
        shutil.copytree(folder, os.path.join(rootfs, inside.lstrip("/")), dirs_exist_ok=True)
        links.append(inside)
    if links:
        env["PIP_FIND_LINKS"] = " ".join(links)
    cert = os.environ.get("PIP_CERT")
    if cert and os.path.isfile(cert):
        shutil.copy(cert, os.path.join(rootfs, "etc/ssl/certs/dmlbed-host-ca.crt"))
        env["PIP_CERT"] = "/etc/ssl/certs/dmlbed-host-ca.crt"
    with Chroot(rootfs) as chroot:
        chroot.run(f"cd {GUEST_PROJECT} && bash scripts/setup.sh", env)


def build_base(rootfs: str, stamp: str) -> None:
    """debootstrap Debian 12 with its kernel, then provision it with setup.sh (the path `vagrant up` takes)."""
    if os.path.isdir(rootfs):
        shutil.rmtree(rootfs)
    mirror = debian_mirror()
    say(f"debootstrap {SUITE} into {rootfs}")
    subprocess.run(["debootstrap", f"--include={','.join(GUEST_PACKAGES)}", SUITE, rootfs, mirror], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(rootfs, "etc/apt/sources.list"), "w") as f:
        f.write(f"deb {mirror} {SUITE} main\n")
    copy_project(rootfs)
    say("provisioning with scripts/setup.sh")
    provision(rootfs)
    open(stamp, "w").close()


def configure_guest(rootfs: str, plan: dict) -> None:
    """Hostname, the test's systemd unit (it powers the guest off when done), no console login, and its plan."""
    with open(os.path.join(rootfs, "etc/hostname"), "w") as f:
        f.write("dmlbed-vm\n")
    with open(os.path.join(rootfs, "etc/fstab"), "w") as f:
        f.write("/dev/vda / ext4 rw,relatime 0 1\n")
    unit = os.path.join(rootfs, "etc/systemd/system/dmlbed-vm-check.service")
    with open(unit, "w") as f:
        f.write(UNIT)
    wants = os.path.join(rootfs, "etc/systemd/system/multi-user.target.wants")
    os.makedirs(wants, exist_ok=True)
    link = os.path.join(wants, "dmlbed-vm-check.service")
    if not os.path.lexists(link):
        os.symlink("/etc/systemd/system/dmlbed-vm-check.service", link)
    getty = os.path.join(rootfs, "etc/systemd/system/serial-getty@ttyS0.service")
    if not os.path.lexists(getty):  # a login prompt on the console would hang up (SIGHUP) the test writing to it
        os.symlink("/dev/null", getty)
    with open(os.path.join(rootfs, "etc/dmlbed-vm.json"), "w") as f:
        json.dump(plan, f)
    shutil.rmtree(os.path.join(rootfs, GUEST_PROJECT.lstrip("/"), "results"), ignore_errors=True)


def make_image(rootfs: str, image: str) -> None:
    """An ext4 disk image of the guest's root (mke2fs -d: no loop device needed)."""
    used = int(subprocess.run(["du", "-sxm", rootfs], capture_output=True, text=True, check=True).stdout.split()[0])
    if os.path.exists(image):
        os.remove(image)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "dmlbed", "-d", rootfs, image, f"{used + 2048}M"], check=True,
                   stdout=subprocess.DEVNULL)


def boot(rootfs: str, image: str, console: str, timeout: float) -> float:
    """Boot the image under QEMU (TCG: nested KVM hangs here) until the guest powers off; seconds taken."""
    kernel = sorted(glob.glob(os.path.join(rootfs, "boot/vmlinuz-*")))[-1]
    initrd = sorted(glob.glob(os.path.join(rootfs, "boot/initrd.img-*")))[-1]
    cmd = ["qemu-system-x86_64", "-machine", "q35", "-accel", "tcg,thread=multi", "-cpu", "max",
           "-smp", str(GUEST_CPUS), "-m", str(VAGRANT_MEMORY_MIB), "-kernel", kernel, "-initrd", initrd,
           "-append", "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=0",
           "-drive", f"file={image},if=virtio,format=raw", "-nic", "none", "-display", "none",
           "-serial", f"file:{console}", "-monitor", "none", "-no-reboot"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        say(f"the guest did not power off within {timeout:.0f} s: stopping it")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
    return time.monotonic() - start


def main(argv: Optional[List[str]] = None) -> int:
    """Build (or reuse) the guest, boot it, judge what it printed, write vm.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "vm-test"), help="folder for console.log, vm.json")
    ap.add_argument("--demo", action="store_true", help="also run `make demo`'s compare inside the guest")
    ap.add_argument("--iters", type=int, default=3, help="iterations of the short run")
    ap.add_argument("--incast-only", action="store_true", help="only the DCTCP experiment (a quick look: the other "
                                                                  "checks are then missing)")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the guest's base even if cached")
    ap.add_argument("--labs", default=",".join(VM_LABS), help="labs whose handouts the guest runs (iterations cut "
                                                                 "to 2), comma-separated; '' for none")
    ap.add_argument("--labs-only", action="store_true", help="only the labs (a quick look: the other checks are "
                                                                "then missing)")
    ap.add_argument("--timeout", type=float, default=3 * 3600, help="seconds the guest may take")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the guest and the chroot's mounts are cleaned up
    if os.geteuid() != 0:
        print("vm-test: needs root (debootstrap, chroot): run it with sudo", file=sys.stderr)
        return 2
    need_host_tools()
    os.makedirs(CACHE, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    rootfs, stamp = os.path.join(CACHE, "rootfs"), os.path.join(CACHE, f"base-{base_key()}")
    started = time.monotonic()
    if args.rebuild or not os.path.exists(stamp):
        for old in glob.glob(os.path.join(CACHE, "base-*")):
            os.remove(old)
        build_base(rootfs, stamp)
    copy_project(rootfs)
    configure_guest(rootfs, {"demo": args.demo, "iters": args.iters, "incast_only": args.incast_only,
                             "labs": args.labs, "labs_only": args.labs_only})
    image = os.path.join(CACHE, "disk.img")
    make_image(rootfs, image)
    built = time.monotonic() - started
    console = os.path.join(args.out, "console.log")
    say(f"booting Debian {SUITE} under QEMU (TCG, {GUEST_CPUS} CPUs, {VAGRANT_MEMORY_MIB} MiB); console: {console}")
    booted = boot(rootfs, image, console, args.timeout)
    os.remove(image)
    with open(console, errors="replace") as f:
        steps = parse_console(f.read())
    labs = [n for n in args.labs.split(",") if n]
    problems = judge_labs(steps, labs) + (["the guest did not finish (see console.log)"] if "done" not in steps else
                                          []) if args.labs_only else judge(steps, args.demo, args.incast_only, labs)
    report = {"passed": not problems, "problems": problems, "build_seconds": round(built, 1),
              "guest_seconds": round(booted, 1), "memory_mib": VAGRANT_MEMORY_MIB, "cpus": GUEST_CPUS,
              "steps": steps}
    with open(os.path.join(args.out, "vm.json"), "w") as f:
        json.dump(report, f, indent=1)
    facts = steps.get("facts", {})
    say(f"guest kernel {facts.get('kernel')}: openvswitch module {facts.get('openvswitch_module')}, netem "
        f"{facts.get('netem')}, red ecn {facts.get('red_ecn')}, fq_codel ecn {facts.get('fq_codel_ecn')}")
    net = (steps.get("net") or {}).get("json") or {}
    say(f"net star:4 --bw 10 --check: datapath {net.get('datapath')}, fidelity_min {net.get('fidelity_min')}")
    run = (steps.get("run") or {}).get("json") or {}
    say(f"run ps star:4: datapath {run.get('datapath')}, verdict {(run.get('fidelity') or {}).get('verdict')}")
    for step in ("dctcp", "cubic"):
        inc = ((steps.get(step) or {}).get("json") or {}).get("incast") or {}
        q = inc.get("queue") or {}
        say(f"incast {step}: queue median {q.get('median_packets')}, p90 {q.get('p90_packets')} of "
            f"{q.get('buffer_packets')} packets, {q.get('ecn_marks')} ECN marks, throughput "
            f"{inc.get('throughput_of_rate')} of the rate; closed form {inc.get('queue_closed_form')}")
    say(f"build {built:.0f} s, guest {booted:.0f} s: " + ("PASSED" if not problems else "FAILED: " + "; ".join(problems)))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
