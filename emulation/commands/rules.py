"""`dmlbed rules SPEC`: the OpenFlow rules dmlbed's controller installs proactively, per switch and level."""

from __future__ import annotations

from emulation.commands.base import SPEC, Command
from emulation.core.topology import parse


class Rules(Command):
    name, help = "rules", "print the controller's proactive rules per switch and level"
    description = ("Every flow (priority, match, action) and group (select for ECMP; fast-failover backup paths, "
                   "as --failover fast installs them) the controller installs on each switch when it connects, grouped "
                   "by switch level; computed without a network (controllers/flow_rules.py).")
    examples = (
        ("the rules that pin each BCube host's traffic to the level whose link it must use",
         "bcube:3,2"),
        ("Fat-Tree(4)'s rules and ECMP select groups as JSON",
         "fattree:4 --json"),
    )
    own = (SPEC,)

    def prepare(self, args):
        return parse(args.spec)

    def execute(self, topo, args):
        from controllers.flow_rules import rules_view
        return rules_view(topo)

    def show(self, view):
        print_rules(view)


def print_rules(view: dict) -> None:
    """Every switch's flows, grouped by level."""
    level = None
    for sw in view["switches"]:
        if sw["level"] != level:
            level = sw["level"]
            print(f"\n== level {level} ==")
        select = [g for g in sw["groups"] if g["type"] == "select"]
        ff = [g for g in sw["groups"] if g["type"] == "ff"]
        print(f"{sw['switch']} (dpid {sw['dpid']}, {sw['role']}): {len(sw['flows'])} flows"
              + (f", select group ports {select[0]['ports']}" if select else "")
              + (f", {len(ff)} fast-failover groups" if ff else ""))
        for f in sw["flows"]:
            match = ",".join(f"{k}={v:#06x}" if k == "eth_type" else f"{k}={v}" for k, v in f["match"].items())
            print(f"  priority={f['priority']:<4} {match or '(any)':<52} -> {f['action']}")


COMMAND = Rules()
