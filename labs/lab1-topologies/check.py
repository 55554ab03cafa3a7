"""Lab 1 checker: topology counts and formulas, per-level rules, reachability and fidelity."""

import os
import re
import sys


from controllers.flow_rules import compute_rules
from controllers.paths import follow_packet
from dmlbed.labcheck import Checker, Expected, arguments, check_net, check_topology, grade
from emulation.core.addressing import all_host_configs, bcube_route
from emulation.core.topology import parse


def check_rules(c: Checker, path: str, bcube: bool) -> None:
    """Rules listing: per-level sections; BCube level-l switches only reach level-l MACs."""
    text = open(path).read()
    sections = re.split(r"== level (\d+) ==", text)[1:]
    levels = [int(sections[i]) for i in range(0, len(sections), 2)]
    c.expect(levels == sorted(levels) and len(levels) >= 1, f"{path}: per-level sections")
    c.expect(text.count("-> CONTROLLER") == text.count(" flows"), f"{path}: one table-miss entry per switch")
    if bcube:
        for i in range(0, len(sections), 2):
            level, body = int(sections[i]), sections[i + 1]
            macs = re.findall(r"eth_dst=02:00:([0-9a-f]{2}):", body)
            c.expect(bool(macs) and all(int(m, 16) == level for m in macs),
                     f"{path}: level-{level} switches forward only to level-{level} interfaces")


def expected_answers(net: dict) -> dict:
    """What each graded answer must be: the formulas, the routes dmlbed computes, your own measurements."""
    bcube, fattree = parse("bcube:3,2"), parse("fattree:4")
    relay = bcube.hosts[bcube_route(bcube, 0, 8, 0)[0][1]].name
    h15 = fattree.node("h15").interfaces[0].ip
    path = follow_packet(fattree, compute_rules(fattree), all_host_configs(fattree), "h0", h15, (40002, 7000)).paths[0]
    core = next(n for n in path if n.startswith("c"))
    flows = net["flows"]
    return {"q1.bcube_4_2_switches": Expected(8, 0), "q1.bcube_8_3_switches": Expected(192, 0),
            "q1.fattree_switches_16_servers": Expected(20, 0), "q1.fattree_switches_512_servers": Expected(320, 0),
            "q3.relay": Expected(relay), "q3.pairs_all_pairs": Expected(net["pairs_tested"], 0),
            "q4.core": Expected(core),
            "q5.fidelity_min": Expected(net["fidelity_min"], 0.02),
            "q5.aggregate_mbps": Expected(sum(f["wire_mbps"] for f in flows), 0.05)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab1")
    bcube = check_topology(c, os.path.join(folder, "bcube-topo.json"))
    fattree = check_topology(c, os.path.join(folder, "fattree-topo.json"))
    c.expect(bcube["spec"] == "bcube:3,2" and fattree["spec"] == "fattree:4", "the lab's two topologies")
    check_rules(c, os.path.join(folder, "bcube-rules.txt"), bcube=True)
    check_rules(c, os.path.join(folder, "fattree-rules.txt"), bcube=False)
    net = check_net(c, os.path.join(folder, "bcube-net.json"))
    c.expect(net["pairs_tested"] == 144, "bcube-net.json: --all-pairs tests every address of every other host")
    c.expect(len(net["flows"]) == 18, "bcube-net.json: one flow per host and level")
    ft = check_net(c, os.path.join(folder, "fattree-net.json"))
    c.expect(ft["pairs_tested"] == 240 and len(ft["flows"]) == 16, "fattree-net.json: every ordered pair, 16 flows")
    grade(c, folder, expected_answers(net), hand_in, teacher, "lab1-topologies")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab1")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
