"""One plan's connections for one rank: a Transport on its own port plus the PlanExecutor over it."""

from __future__ import annotations

import numpy as np

from emulation.core.topology import Topology
from workloads.addresses import peer_address, peer_level
from workloads.engine import PlanExecutor
from workloads.rankconfig import RankConfig
from workloads.transport import Transport


class Channel:
    """Plan executor on port `port + offset` (emulated hosts) or on the offset-th loopback port set.

    Separate offsets keep concurrent plans (gradient sync, iBatch push/pull, PF push/broadcast) on
    separate connections; transfers to a BCube neighbour use the address of the level they cross.
    """

    def __init__(self, cfg: RankConfig, topo: Topology, plan, layout, port_offset: int = 0):
        rank = cfg.rank
        names = lambda r: f"{topo.hosts[r].name} (rank {r})"  # noqa: E731
        if cfg.loopback_ports:
            ports = cfg.loopback_ports[port_offset]
            listen = ("127.0.0.1", ports[rank])
            resolve = lambda peer, stream, level: ("127.0.0.1", ports[peer])  # noqa: E731
        else:
            port = cfg.port + port_offset
            listen = ("0.0.0.0", port)
            resolve = lambda peer, stream, level: (peer_address(topo, rank, peer, level), port)  # noqa: E731
        transport = Transport(rank, listen, cfg.timeout, names, cfg.socket_buffer, cfg.tcp_cc)
        self.executor = PlanExecutor(plan, rank, layout, transport, resolve,
                                     level_of=lambda peer, level: peer_level(topo, rank, peer, level),
                                     chunk_bytes=cfg.chunk_bytes)

    def run(self, buf: np.ndarray, **kwargs) -> None:
        """Run the plan on buf in place (kwargs: reduce, codec, layout, on_step)."""
        self.executor.run(buf, **kwargs)

    def close(self) -> None:
        """Close connections."""
        self.executor.close()
