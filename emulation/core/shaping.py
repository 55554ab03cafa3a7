"""tc commands for shaping that Mininet's TCLink cannot do on the userspace datapath (pure strings)."""

from typing import List, Optional

from emulation.core.impairment import netem_leaf_command
from emulation.core.tcp import TSQ_TIME_S

# AF_XDP ports transmit around the qdisc of the switch-side veth. So on the userspace
# datapath switch<->switch links run through a small bridging namespace whose own egress
# qdiscs shape both directions, and host links do too on request (--shape-ingress), which
# shapes switch->host. Where AF_XDP ports on every link would crowd out the ranks' memory (each pins a 64 MiB
# umem: fattree:6's 216 switch-link ports alone 13.5 GiB), the switches' ends of switch<->switch links are plain
# (AF_PACKET) ports, left unshaped: the box shapes. They carry Hedera's stride patterns as AF_XDP ports do, but
# OVS polls them in its main thread, which saturates sooner (fattree:6's ring at 2.5 Mbit/s with every
# switch-to-switch link plain), so only the highest links go plain, as many as the memory needs. Not an IFB device
# at the host's ingress: under incast into one server it held packets for seconds with every queue empty
# (docs/explanation/timing-causes.md).
# TX checksum offload must be off: TCP through the userspace datapath stalls otherwise.
OFFLOADS_OFF = "tx off rx off tso off gso off gro off"


GSO_HOLD_S = 2 * TSQ_TIME_S  # the longest one TCP skb may hold a host's NIC: two --tsq auto budgets
GSO_MAX_BYTES = 65536       # the kernel's own largest GSO packet (gso_max_size's default)


def gso_bytes(mbps: float, mtu: int) -> int:
    """The largest TCP skb (GSO packet) a host NIC of mbps takes: GSO_HOLD_S of its rate, at least one frame."""
    return max(mtu, min(GSO_MAX_BYTES, int(mbps * 1e6 / 8 * GSO_HOLD_S)))


def offloads_off_command(dev: str, gso_max: Optional[int] = None) -> str:
    """Checksum and segmentation offloads off on dev; with gso_max, TCP's skbs on it no larger than that."""
    # TCP builds GSO super-packets whatever the device offers (segmented in software at the device), so with gso
    # off a host's egress queue still held skbs of up to 64 KB, 105 ms each at 5 Mbit/s: one per socket (TCP
    # Small Queues counts skbs) and BML's 28 sockets per NIC on bcube:8,2 kept ~0.5 MB queued (ping 1.1-1.9 s;
    # 0.08-0.21 s with one frame per skb, and BML's GST/theory 1.53 -> 1.21 at dilation 2). Smaller skbs cost the
    # hosts CPU: at one TSQ budget (5 ms) net --check on bcube:8,2 at 10 Mbit/s (128 flows) saturated the CPU and
    # was degraded (0.76); at two it was faithful (0.92); at 1 ms (TSO autosizing's aim) BML at 50 Mbit/s on
    # bcube:3,2 kept its GST but used 16 points more CPU. So the cap bites at low rates, where queues were longest.
    cap = f"; ip link set dev {dev} gso_max_size {gso_max}" if gso_max else ""
    return f"ethtool -K {dev} {OFFLOADS_OFF}{cap}"


def htb_commands(dev: str, mbps: float) -> List[str]:
    """Root HTB with one class at mbps, as Mininet's TCIntf builds it."""
    return [f"tc qdisc replace dev {dev} root handle 5:0 htb default 1",
            f"tc class replace dev {dev} parent 5:0 classid 5:1 htb rate {mbps:g}Mbit burst 15k"]


def leaf_queue_command(tc: str, dev: str, packets: int, netem: Optional[str] = None, red: Optional[str] = None) -> str:
    """A pfifo of `packets` under HTB class 5:1: a switch-sized buffer. The default leaf holds
    txqueuelen (1000) packets, 240 ms at 50 Mbit/s, which delays the ACKs of the reverse direction
    behind bulk data and slows every bidirectional exchange. With netem arguments the leaf is netem
    holding as many packets; with red's (core/aqm.red_ecn_args) a RED queue that marks ECN."""
    if netem:
        return netem_leaf_command(tc, dev, packets, netem)
    if red:
        return f"{tc} qdisc add dev {dev} parent 5:1 handle 10: {red}"
    return f"{tc} qdisc add dev {dev} parent 5:1 handle 10: pfifo limit {packets}"


def ifb_up_command(ifb: str, queue_len: int, mtu: Optional[int] = None) -> str:
    """Bring an IFB device up with its queue length (and the links' MTU, so it takes their largest frames)."""
    return f"ip link set {ifb} txqueuelen {queue_len}" + (f" mtu {mtu}" if mtu else "") + " up"


def redirect_ingress_commands(dev: str, ifb: str) -> List[str]:
    """Send everything arriving on dev through the IFB device's egress (where qdiscs can act on it)."""
    return [f"tc qdisc add dev {dev} handle ffff: ingress",
            f"tc filter add dev {dev} parent ffff: protocol all u32 match u32 0 0 "
            f"action mirred egress redirect dev {ifb}"]


def ingress_netem_commands(dev: str, ifb: str, packets: int, netem: str, mtu: Optional[int] = None) -> List[str]:
    """Delay/loss on what arrives at dev (an unshaped switch->host direction): its ingress redirected to an
    IFB whose root is netem alone."""
    return [f"ip link add {ifb} type ifb",
            ifb_up_command(ifb, packets, mtu),
            f"tc qdisc add dev {ifb} root handle 10: netem {netem} limit {packets}",
            *redirect_ingress_commands(dev, ifb)]


def bridge_commands(ports: List[str], bridge: str = "br0") -> List[str]:
    """Join ports in a plain Linux bridge (the shaping namespace of a switch-to-switch link)."""
    # No snooping and no multicast on the bridge device: it would send IGMP reports into the switches. No MAC
    # learning (ageing 0): a wire, so a frame a switch sends back out of the port it came in on (a fast-failover
    # detour) crosses instead of being dropped as addressed to the side it came from.
    cmds = [f"ip link add {bridge} type bridge stp_state 0 forward_delay 0 mcast_snooping 0 ageing_time 0",
            f"ip link set {bridge} multicast off up"]
    for port in ports:
        cmds += [f"ip addr flush dev {port}", f"ip link set {port} master {bridge}",
                 offloads_off_command(port), f"ip link set {port} up"]
    return cmds


JOB_CLASS, SHARED_ROOT = 1, 100  # HTB class ids of a shared NIC: the job's traffic (the default), the NIC's rate


def shared_nic_commands(dev: str, mbps: float, packets: int, ports: List[int]) -> List[str]:
    """A host's egress as one HTB class per kind of traffic sharing the NIC's rate: the job's (class 5:1, the
    default), then each background flow's, picked by its destination port (5:2, 5:3, ...). Each class is guaranteed
    an equal share and may borrow up to the whole rate, so the classes that have packets split the NIC evenly: a
    fair-queueing NIC between the job and the flows beside it (this kernel has no fq, fq_codel or sfq, and with a
    single FIFO a flow that once got the larger window keeps the larger share: nothing is dropped to even it out)."""
    cmds = [f"tc qdisc del dev {dev} root", f"tc qdisc add dev {dev} root handle 5:0 htb default {JOB_CLASS}",
            f"tc class add dev {dev} parent 5:0 classid 5:{SHARED_ROOT} htb rate {mbps:g}Mbit burst 15k"]
    share = mbps / (len(ports) + 1)
    for n, port in enumerate([None, *ports]):
        cid = JOB_CLASS + n
        cmds += [f"tc class add dev {dev} parent 5:{SHARED_ROOT} classid 5:{cid} htb rate {share:g}Mbit "
                 f"ceil {mbps:g}Mbit burst 15k",
                 f"tc qdisc add dev {dev} parent 5:{cid} handle {10 * cid}: pfifo limit {packets}"]
        if port is not None:
            cmds.append(f"tc filter add dev {dev} parent 5:0 protocol ip prio 1 u32 match ip protocol 6 0xff "
                        f"match ip dport {port} 0xffff flowid 5:{cid}")
    return cmds


def shared_nic_rate_commands(dev: str, mbps: float, classes: int) -> List[str]:
    """A shared NIC's classes at a new rate (a link event on it)."""
    share = mbps / classes
    return [f"tc class change dev {dev} parent 5:0 classid 5:{SHARED_ROOT} htb rate {mbps:g}Mbit burst 15k"] + \
        [f"tc class change dev {dev} parent 5:{SHARED_ROOT} classid 5:{JOB_CLASS + n} htb rate {share:g}Mbit "
         f"ceil {mbps:g}Mbit burst 15k" for n in range(classes)]
