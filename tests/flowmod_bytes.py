"""Print, as JSON, the bytes of every OpenFlow message dmlbed's controller app sends each switch of the topologies
given, built by whichever controller library this Python has (Ryu, or os-ken on 3.12+) with a fake datapath."""

import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if importlib.util.find_spec("ryu") is not None:  # Ryu 4.34 on Python 3.11 needs the shim controllers/ryu_manager.py applies
    import eventlet.wsgi
    if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):
        eventlet.wsgi.ALREADY_HANDLED = object()

from controllers import app  # noqa: E402
from controllers.flow_rules import compute_rules  # noqa: E402
from emulation.core.topology import parse  # noqa: E402


class FakeDatapath:
    """Collects the serialized messages; the library's real OpenFlow 1.3 modules."""

    def __init__(self, dpid):
        self.id = dpid
        self.ofproto = app.ofproto_v1_3
        self.ofproto_parser = sys.modules[app.ofproto_v1_3.__name__ + "_parser"]
        self.sent = []

    def send_msg(self, msg):
        msg.serialize()
        self.sent.append(bytes(msg.buf).hex())


def main(specs):
    out = {"library": app.App.__module__.split(".")[0], "python": sys.version.split()[0], "messages": {}}
    for spec in specs:
        topo = parse(spec)
        rules = compute_rules(topo)
        for sw in topo.switches:
            dp = FakeDatapath(sw.dpid)
            app.install(dp, rules)
            out["messages"][f"{spec} {sw.name}"] = dp.sent
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
