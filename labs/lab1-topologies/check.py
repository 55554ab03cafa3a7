"""Lab 1 checker: topology counts and formulas, per-level rules, reachability and fidelity."""

import os
import re
import sys


from dmlbed.labcheck import Checker, check_net, check_topology


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


def main(folder: str) -> int:
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
    return c.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/lab1"))
