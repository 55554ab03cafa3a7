"""Ryu app (OpenFlow 1.3; also an os-ken app): installs dmlbed's proactive rules at switch connection (with
fast-failover backup paths where the topology has them), reroutes around a link whose port goes down, counts
PacketIns."""

import json
import os
import time

try:  # Ryu 4.34, the product's controller library (Python <= 3.11)
    from ryu.base.app_manager import RyuApp as App
    from ryu.controller import ofp_event
    from ryu.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from ryu.lib import hub
    from ryu.ofproto import ofproto_v1_3
except ImportError:  # os-ken, Ryu's maintained fork, where Ryu cannot run (Python 3.12+): the same API renamed
    from os_ken.base.app_manager import OSKenApp as App
    from os_ken.controller import ofp_event
    from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
    from os_ken.lib import hub
    from os_ken.ofproto import ofproto_v1_3

from controllers.flow_rules import FAILOVER_MODES, RuleSet, compute_rules
from emulation.core.topology import Topology, from_json, parse

TOPOLOGY_ENV = "DMLBED_TOPOLOGY"
STATUS_ENV = "DMLBED_STATUS"
FAILOVER_ENV = "DMLBED_FAILOVER"  # fast (backup paths in the data plane, then a reroute) | controller (reroute only)
STATUS_PERIOD_S = 0.2


def load_topology() -> Topology:
    """The topology named by $DMLBED_TOPOLOGY: a JSON file from `dmlbed topo --json` or a spec string."""
    value = os.environ.get(TOPOLOGY_ENV)
    if not value:
        raise SystemExit(f"{TOPOLOGY_ENV} is not set: give a spec like bcube:3,2 or a topology JSON file")
    if os.path.exists(value):
        with open(value) as f:
            return from_json(f.read())
    return parse(value)


def flow_mod(datapath, rule):
    """An OFPFlowMod for a FlowRule."""
    ofp, parser = datapath.ofproto, datapath.ofproto_parser
    if rule.group is not None:
        actions = [parser.OFPActionGroup(rule.group)]
    else:
        max_len = ofp.OFPCML_NO_BUFFER if rule.out_port == ofp.OFPP_CONTROLLER else 0
        actions = [parser.OFPActionOutput(rule.out_port, max_len)]
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(datapath=datapath, priority=rule.priority,
                             match=parser.OFPMatch(**rule.fields()), instructions=inst)


def group_mod(datapath, group, command=None):
    """An OFPGroupMod adding (or with command, modifying) a select (ECMP) or fast-failover group for a
    GroupRule."""
    ofp, parser = datapath.ofproto, datapath.ofproto_parser
    ff = group.kind == "ff"
    buckets = [parser.OFPBucket(weight=0 if ff else 1, watch_port=port, watch_group=ofp.OFPG_ANY,
                                actions=[parser.OFPActionOutput(out)])
               for port, out in zip(group.ports, group.outputs())]
    return parser.OFPGroupMod(datapath, ofp.OFPGC_ADD if command is None else command,
                              ofp.OFPGT_FF if ff else ofp.OFPGT_SELECT, group.group_id, buckets)


def changes(datapath, old: RuleSet, new: RuleSet):
    """What a switch needs to go from one rule set to another, make before break: (the groups and flows added or
    changed, then those that went away), as OpenFlow messages."""
    ofp, parser = datapath.ofproto, datapath.ofproto_parser
    old_flows, old_groups = old.for_dpid(datapath.id)
    new_flows, new_groups = new.for_dpid(datapath.id)
    was = {g.group_id: g for g in old_groups}
    now = {g.group_id: g for g in new_groups}
    before = {(f.priority, f.match): f for f in old_flows}
    after = {(f.priority, f.match): f for f in new_flows}
    msgs = [group_mod(datapath, g, ofp.OFPGC_ADD if i not in was else ofp.OFPGC_MODIFY)
            for i, g in now.items() if was.get(i) != g]
    msgs += [flow_mod(datapath, f) for k, f in after.items() if before.get(k) != f]
    gone = [parser.OFPFlowMod(datapath=datapath, command=ofp.OFPFC_DELETE_STRICT, priority=f.priority,
                              table_id=0, out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                              match=parser.OFPMatch(**f.fields())) for k, f in before.items() if k not in after]
    gone += [parser.OFPGroupMod(datapath, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, i, []) for i in was if i not in now]
    return msgs, gone


def send_all(datapath, msgs) -> None:
    """Send messages and a barrier."""
    for msg in msgs:
        datapath.send_msg(msg)
    datapath.send_msg(datapath.ofproto_parser.OFPBarrierRequest(datapath))


def install(datapath, rules: RuleSet) -> int:
    """Clear the switch, install its groups and flows, and ask for a barrier; returns flow count."""
    ofp, parser = datapath.ofproto, datapath.ofproto_parser
    datapath.send_msg(parser.OFPFlowMod(datapath=datapath, command=ofp.OFPFC_DELETE,
                                        table_id=ofp.OFPTT_ALL, out_port=ofp.OFPP_ANY,
                                        out_group=ofp.OFPG_ANY, match=parser.OFPMatch()))
    datapath.send_msg(parser.OFPGroupMod(datapath, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, ofp.OFPG_ALL, []))
    flows, groups = rules.for_dpid(datapath.id)
    for group in groups:
        datapath.send_msg(group_mod(datapath, group))
    for rule in flows:
        datapath.send_msg(flow_mod(datapath, rule))
    datapath.send_msg(parser.OFPBarrierRequest(datapath))
    return len(flows)


class DmlbedController(App):
    """Proactive controller: every rule is installed when a switch connects; PacketIns are counted."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.topology = load_topology()
        self.failover = os.environ.get(FAILOVER_ENV) or FAILOVER_MODES[0]
        if self.failover not in FAILOVER_MODES:
            raise SystemExit(f"{FAILOVER_ENV}={self.failover} is unknown: valid are {', '.join(FAILOVER_MODES)}")
        self.backups = self.failover == "fast"  # fast-failover groups in every rule set it installs
        self.rules = compute_rules(self.topology, failover=self.backups)
        self.datapaths = {}
        self.ends = {}  # (dpid, port) -> (lower, upper) of the link behind that switch port
        for link in self.topology.links:
            for name, port in ((link.lower, link.lower_port), (link.upper, link.upper_port)):
                if not self.topology.is_host(name):
                    self.ends[(self.topology.node(name).dpid, port)] = (link.lower, link.upper)
        self.down_ends = set()  # (dpid, port) whose link is down
        self.awaiting = set()  # dpids whose barrier after a reroute's additions has not come back
        self.removals = []  # (datapath, messages) a reroute sends once every switch has its additions
        self.status_path = os.environ.get(STATUS_ENV)
        self.status = {"topology": self.topology.spec, "pid": os.getpid(), "switches": {}, "failover": self.failover,
                       "packet_in": 0, "packet_in_by_switch": {}, "packet_in_samples": [], "reroutes": []}
        self.dirty = True
        if self.status_path:
            hub.spawn(self._write_status_loop)

    def _write_status_loop(self):
        while True:
            if self.dirty:
                self.dirty = False
                tmp = self.status_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(self.status, f)
                os.replace(tmp, self.status_path)
            hub.sleep(STATUS_PERIOD_S)

    def _switch_status(self, dpid):
        return self.status["switches"].setdefault(format(dpid, "016x"), {})

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features_handler(self, ev):
        """Install the switch's whole rule set as soon as it connects."""
        datapath = ev.msg.datapath
        try:
            name = self.topology.switch_by_dpid(datapath.id).name
        except KeyError:
            self.logger.error("unknown switch dpid %016x: not part of %s", datapath.id, self.topology.spec)
            return
        self.datapaths[datapath.id] = datapath
        count = install(datapath, self.rules)
        self._switch_status(datapath.id).update(name=name, flows=count, installed=False,
                                                connected_at=time.time())
        self.dirty = True

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def barrier_reply_handler(self, ev):
        """A barrier reply after installation means every rule is in the switch; after a reroute's additions, once
        every switch replied, what they replace goes."""
        self._switch_status(ev.msg.datapath.id)["installed"] = True
        self.dirty = True
        self.awaiting.discard(ev.msg.datapath.id)
        if not self.awaiting and self.removals:
            removals, self.removals = self.removals, []
            for dp, gone in removals:
                send_all(dp, gone)
            if self.status["reroutes"]:
                self.status["reroutes"][-1].setdefault("removed_at", time.time())

    def failed_links(self):
        """Links with either switch port down."""
        return sorted({self.ends[e] for e in self.down_ends})

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def port_status_handler(self, ev):
        """A port went down or came up: reroute every switch around the links that are down now."""
        seen = time.time()
        msg = ev.msg
        end = (msg.datapath.id, msg.desc.port_no)
        if end not in self.ends:
            return
        ofp = msg.datapath.ofproto
        down = bool(msg.desc.state & ofp.OFPPS_LINK_DOWN) or msg.reason == ofp.OFPPR_DELETE
        before = self.failed_links()
        (self.down_ends.add if down else self.down_ends.discard)(end)
        failed = self.failed_links()
        if failed == before:
            return
        rules = compute_rules(self.topology, failed, failover=self.backups)
        changed = 0
        for dp in self.datapaths.values():  # every switch's new paths first; what they replace once all are in
            add, gone = changes(dp, self.rules, rules)
            send_all(dp, add)
            self.awaiting.add(dp.id)
            self.removals.append((dp, gone))
            changed += len(add) + len(gone)
        self.rules = rules
        self.status["reroutes"].append({"port_status_at": seen, "sent_at": time.time(),
                                        "switch": format(end[0], "016x"), "port": end[1],
                                        "link": "-".join(self.ends[end]), "state": "down" if down else "up",
                                        "failed": ["-".join(l) for l in failed], "messages": changed})
        self.dirty = True

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in_handler(self, ev):
        """Count a table miss: with proactive rules every data-plane PacketIn is a missing rule."""
        msg = ev.msg
        key = format(msg.datapath.id, "016x")
        self.status["packet_in"] += 1
        by_switch = self.status["packet_in_by_switch"]
        by_switch[key] = by_switch.get(key, 0) + 1
        if len(self.status["packet_in_samples"]) < 20:
            self.status["packet_in_samples"].append(
                {"dpid": key, "in_port": msg.match.get("in_port"), "frame": bytes(msg.data[:64]).hex()})
        self.dirty = True
