"""Ryu app (OpenFlow 1.3; also an os-ken app): installs dmlbed's proactive rules at switch connection, counts
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

from controllers.flow_rules import RuleSet, compute_rules
from emulation.core.topology import Topology, from_json, parse

TOPOLOGY_ENV = "DMLBED_TOPOLOGY"
STATUS_ENV = "DMLBED_STATUS"
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


def group_mod(datapath, group):
    """An OFPGroupMod adding a select (ECMP) group for a GroupRule."""
    ofp, parser = datapath.ofproto, datapath.ofproto_parser
    buckets = [parser.OFPBucket(weight=1, watch_port=port, watch_group=ofp.OFPG_ANY,
                                actions=[parser.OFPActionOutput(port)]) for port in group.ports]
    return parser.OFPGroupMod(datapath, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, group.group_id, buckets)


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
        self.rules = compute_rules(self.topology)
        self.status_path = os.environ.get(STATUS_ENV)
        self.status = {"topology": self.topology.spec, "pid": os.getpid(), "switches": {},
                       "packet_in": 0, "packet_in_by_switch": {}, "packet_in_samples": []}
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
        count = install(datapath, self.rules)
        self._switch_status(datapath.id).update(name=name, flows=count, installed=False,
                                                connected_at=time.time())
        self.dirty = True

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def barrier_reply_handler(self, ev):
        """A barrier reply after installation means every rule is in the switch."""
        self._switch_status(ev.msg.datapath.id)["installed"] = True
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
