"""Which OpenFlow controller a network runs under: dmlbed's own proactive Ryu app, the user's Ryu app (dmlbed starts
it), or a controller the user started (remote:IP:PORT), as `mn --controller remote,ip=...` users expect."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Optional

OWN, APP, REMOTE = "dmlbed", "app", "remote"


@dataclass(frozen=True)
class ControllerChoice:
    """kind: dmlbed | app | remote; host and port of a remote controller; the app file of the user's app."""

    kind: str = OWN
    host: Optional[str] = None
    port: Optional[int] = None
    app: Optional[str] = None
    failover: str = "fast"  # dmlbed's app: fast (backup paths in the data plane, then a reroute) | controller

    @property
    def own(self) -> bool:
        """dmlbed's own app: it installs every rule before traffic and reports each switch as programmed."""
        return self.kind == OWN

    def summary(self) -> dict:
        """What the run's records say about the controller."""
        if self.kind == REMOTE:
            return {"kind": REMOTE, "address": f"{self.host}:{self.port}"}
        if self.kind == APP:
            return {"kind": APP, "app": self.app}
        return {"kind": OWN, "app": "controllers/app.py (proactive, OpenFlow 1.3)", "failover": self.failover}


def parse_controller(text: Optional[str], app: Optional[str]) -> ControllerChoice:
    """--controller dmlbed|remote:IP:PORT and --controller-app FILE.py (ValueError naming what is valid)."""
    text = text or OWN
    if app:
        if text != OWN:
            raise ValueError("--controller-app runs your Ryu app as the controller: it does not go with "
                             f"--controller {text}")
        if not app.endswith(".py") or not os.path.isfile(app):
            raise ValueError(f"--controller-app {app} is not a Python file: give the path of a Ryu app (FILE.py)")
        return ControllerChoice(APP, app=os.path.abspath(app))
    if text == OWN:
        return ControllerChoice()
    kind, _, address = text.partition(":")
    host, _, port = address.rpartition(":")
    try:
        if kind != REMOTE:
            raise ValueError
        ipaddress.IPv4Address(host)
        number = int(port)
        if not 1 <= number <= 65535:
            raise ValueError
    except ValueError:
        raise ValueError(f"--controller {text} is invalid: give dmlbed (its own app) or remote:IP:PORT (a "
                         f"controller you started, e.g. remote:127.0.0.1:6653)") from None
    return ControllerChoice(REMOTE, host=host, port=number)
