"""What this machine's kernel and Open vSwitch offer (datapaths, qdiscs, congestion controls, tunnels), probed
without Mininet; the errors a network bring-up reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Dict, List, Optional

from emulation.core.queue_samples import BLOCK as QDISC_BLOCK

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"


class NetworkError(RuntimeError):
    """The emulated network could not be brought up."""


def ovs_running() -> bool:
    """True when ovsdb-server and ovs-vswitchd answer."""
    return (shutil.which("ovs-vsctl") is not None and
            subprocess.run(["ovs-vsctl", "-t", "3", "show"], capture_output=True).returncode == 0 and  # ovsdb-server
            subprocess.run(["ovs-appctl", "-T", "3", "-t", "ovs-vswitchd", "version"],
                           capture_output=True).returncode == 0)  # the switch itself (the OOM killer may take it alone)


def ensure_ovs() -> None:
    """Start Open vSwitch (without needing its kernel module) when it is not running."""
    if ovs_running():
        return
    if not os.path.exists(OVS_CTL):
        raise NetworkError("Open vSwitch is not installed: run `make setup`")
    subprocess.run([OVS_CTL, "start"], capture_output=True)
    if not ovs_running():
        raise NetworkError(f"Open vSwitch did not start: run `{OVS_CTL} start` and check `ovs-vsctl show`")


def ovs_setting(key: str) -> Optional[str]:
    """A key of Open vSwitch's other_config, or None when unset."""
    r = subprocess.run(["ovs-vsctl", "--if-exists", "get", "open_vswitch", ".", f"other_config:{key}"],
                       capture_output=True, text=True)
    value = r.stdout.strip().strip('"')
    return value if r.returncode == 0 and value else None


def kernel_datapath_available() -> bool:
    """True when the openvswitch kernel module is (or can be) loaded."""
    if os.path.isdir("/sys/module/openvswitch"):
        return True
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return os.path.isdir("/sys/module/openvswitch")


def choose_datapath(requested: str = "auto") -> str:
    """'kernel' where the kernel has the OVS module, else 'user' (userspace with AF_XDP ports)."""
    if requested not in ("auto", "kernel", "user"):
        raise NetworkError(f"datapath '{requested}' is invalid: use auto, kernel or user")
    if requested == "auto":
        return "kernel" if kernel_datapath_available() else "user"
    if requested == "kernel" and not kernel_datapath_available():
        raise NetworkError("datapath 'kernel' asked for but the openvswitch kernel module is missing: "
                           "use --datapath user")
    return requested


def works_in_scratch_namespace(*command: str) -> bool:
    """True when command succeeds inside a namespace made for it and removed after (False where none can be made)."""
    ns = f"dmlbed-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
        return False
    try:
        return subprocess.run(["ip", "netns", "exec", ns, *command], capture_output=True).returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def qdisc_available(*qdisc: str) -> bool:
    """True when tc can create this qdisc (e.g. 'netem', 'delay', '1ms'), tried in a scratch namespace."""
    return works_in_scratch_namespace("tc", "qdisc", "add", "dev", "lo", "root", *qdisc)


def netem_available() -> bool:
    """True when the kernel has netem (needed for delay and loss)."""
    return qdisc_available("netem", "delay", "1ms")


RED_PROBE = ("red", "limit", "400000", "min", "30000", "max", "90000", "avpkt", "1000", "burst", "55", "ecn",
             "bandwidth", "10mbit")


def red_available() -> bool:
    """True when the kernel has RED (sch_red), which --aqm red-ecn needs."""
    return qdisc_available(*RED_PROBE)


def ecn_marking_qdisc() -> Optional[str]:
    """The first ECN-marking qdisc this kernel has (fq_codel, codel, red), or None."""
    for qdisc in (("fq_codel", "ecn"), ("codel", "ecn"), RED_PROBE):
        if qdisc_available(*qdisc):
            return qdisc[0]
    return None


def available_congestion_controls(load: Optional[str] = None) -> List[str]:
    """TCP congestion controls the kernel offers (the same list in every namespace); with load, its module
    tcp_LOAD is loaded first where it exists and is not (a kernel lists a control only once its module is loaded)."""
    have = _listed_congestion_controls()
    if load and load not in have and os.geteuid() == 0 and shutil.which("modprobe") and \
            subprocess.run(["modprobe", "-q", f"tcp_{load}"], capture_output=True).returncode == 0:
        have = _listed_congestion_controls()
    return have


def _listed_congestion_controls() -> List[str]:
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def gretap_available() -> bool:
    """True when this kernel can create GRE Ethernet tunnels (tried in a scratch namespace)."""
    return works_in_scratch_namespace("ip", "link", "add", "name", "probe0", "type", "gretap", "local", "127.0.0.2",
                                      "remote", "127.0.0.3")


def leaf_drops(tc_output: str) -> int:
    """Drops of the FIFO and RED leaves in `tc -s qdisc show` output (HTB above them counts the same drops again,
    and RED counts its own child FIFO's)."""
    total = 0
    for block in QDISC_BLOCK.split(tc_output):
        if re.match(r"\s*qdisc (?:[pb]fifo|red) ", block) and not re.match(r"\s*qdisc \S+ \S+ parent 10:", block):
            m = re.search(r"dropped (\d+)", block)
            total += int(m.group(1)) if m else 0
    return total


def leaf_marks(tc_output: str) -> int:
    """ECN marks of the RED leaves in `tc -s qdisc show` output."""
    return sum(int(m) for m in re.findall(r"^\s*marked (\d+)", tc_output, re.M))


def _ovs_table(table: str, columns: str) -> List[Dict[str, object]]:
    """Rows of an OVSDB table as dicts (ovs-vsctl's JSON: a UUID or a set stays as OVSDB writes it)."""
    r = subprocess.run(["ovs-vsctl", "--format=json", f"--columns={columns}", "list", table],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return []
    data = json.loads(r.stdout)
    return [dict(zip(data["headings"], row)) for row in data["data"]]


def connected_bridges(bridges: List[str]) -> List[str]:
    """The bridges among these whose OpenFlow controller connection is up."""
    up = {row["_uuid"][1] for row in _ovs_table("controller", "_uuid,is_connected") if row["is_connected"] is True}
    out = []
    for row in _ovs_table("bridge", "name,controller"):
        ref = row["controller"]  # ["uuid", id] for one controller, ["set", [...]] for several
        ids = [ref[1]] if ref[0] == "uuid" else [r[1] for r in ref[1]]
        if row["name"] in bridges and any(i in up for i in ids):
            out.append(row["name"])
    return out


def packets_to_controller(bridges: List[str]) -> int:
    """Packets the bridges' flows sent to their controller (PacketIns, whoever the controller is): the n_packets
    of every flow whose actions include CONTROLLER."""
    total = 0
    for bridge in bridges:
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.search(r"n_packets=(\d+)", line)
            if m and "CONTROLLER" in line.partition("actions=")[2]:
                total += int(m.group(1))
    return total
