"""`dmlbed patterns SPEC --pattern P`: Hedera's traffic patterns in the flow model alone, ECMP's aggregate against
a non-blocking switch's, at any size (`net --pattern` measures the same flows on an emulated network)."""

from __future__ import annotations

from emulation.commands.base import SPEC, Command
from emulation.core.patterns import PATTERN_HELP, parse_patterns
from emulation.run.options import LINKS, OptionError, command_option
from emulation.run.pattern_traffic import model_patterns, summarize_patterns
from emulation.run.validation import check_network, check_values


class Patterns(Command):
    name, help = "patterns", "traffic patterns in the flow model: ECMP against a non-blocking switch"
    description = ("One long flow per pair of each pattern, each from the client port `net --pattern` draws for "
                   "it (the same seed gives the same ports, so the same ECMP paths), at max-min fair rates on the "
                   "paths the controller's rules give those ports; the aggregate against a non-blocking switch's "
                   "(only the hosts' own links limit a flow), per seed and per pattern. No network is brought up.")
    examples = (
        ("Hedera's stride patterns on Fat-Tree(4): ECMP's throughput against a non-blocking switch",
         "fattree:4 --pattern stride:4 --pattern stride:8 --seeds 5"),
        ("random bijections on a leaf-spine, routed by destination instead of by hash",
         "leafspine:4,4,2 --pattern randbij --seeds 3 --routing dmodk"),
    )
    groups = (LINKS,)
    own = (SPEC,
           command_option("pattern", f"{PATTERN_HELP} (repeatable)", kind=list, metavar="stride:K|randbij|alltoall",
                          required=True),
           command_option("seeds", "each pattern with seeds 1..N (randbij's pairs and every flow's client port)", 1,
                          kind=int, low=1, high=100))

    def prepare(self, args):
        values = self.values(args)
        cfg = self.config(args, topology=values["spec"])
        check_values(cfg, groups=self.groups)
        network = check_network(cfg, emulated=False)
        try:
            patterns = parse_patterns(values["pattern"] or (), len(network.topo.hosts))
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return network, patterns, values["seeds"]

    def execute(self, job, args):
        network, patterns, seeds = job
        rows = model_patterns(network.topo, patterns, seeds, network.bw, network.link_rates)
        return {"topology": network.topo.spec, "routing": network.topo.routing, "bw_by_level": list(network.bw),
                "patterns": rows,
                "pattern_summary": summarize_patterns(rows)}

    def show(self, report):
        for name, p in report["pattern_summary"].items():
            routing = "D-mod-k" if report.get("routing") == "dmodk" else "ECMP"
            print(f"{report['topology']} {name} ({p['seeds']} seeds): the flow model's {routing} gives "
                  f"{p['flow_model_of_non_blocking_median']:.2f} of a non-blocking switch (median)")


COMMAND = Patterns()
