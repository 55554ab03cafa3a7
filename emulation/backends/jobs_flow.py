"""The jobs of `dmlbed jobs` on the flow model: the network's router, payload rates, latency and background flows,
and each job timed on its own hosts; simulate mode's rows and the emulated jobs' verdict both run it."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Optional, Sequence

from emulation.backends.heads import head
from emulation.core.background import horizon_s
from emulation.core.link_rates import factors as link_factors
from emulation.run.jobs_check import CheckedJobs
from emulation.run.resolution import link_goodput
from emulation.simulation.background_model import persistent_flows
from emulation.simulation.jobs_model import TimedJob, simulate_jobs
from emulation.simulation.routes import Router
from workloads.models import tensor_sizes


class JobsFlowModel:
    """The jobs on the flow model: the network's router, payload rates, latency and background flows, and each job
    timed (its plan on its hosts, its compute: its --compute-time's mean)."""

    def __init__(self, jobs: CheckedJobs):
        cfg, network = jobs.cfg, jobs.network
        self.iterations = cfg.iters
        self.rates = {level: b * 1e6 / 8 * link_goodput(cfg) for level, b in enumerate(network.bw)}
        self.router = Router(network.topo, cfg.ecmp, None, link_factors(network.topo, network.bw, network.link_rates))
        index = {h.name: h.index for h in network.topo.hosts}
        self.timed = []
        for spec, checked in zip(jobs.specs, jobs.checked):
            sizes = tensor_sizes(checked.cfg.model)
            plan = checked.algorithm.build_plan(checked.topo, checked.servers, checked.options, checked.bw,
                                                4 * sum(sizes), sizes)
            self.timed.append(TimedJob(spec.name, plan, tuple(index[h.name] for h in checked.topo.hosts),
                                       tuple(4 * n for n in plan.piece_sizes(sizes)),
                                       checked.compute.mean))
        horizon = horizon_s(cfg.iters, max(t.compute_s for t in self.timed),
                            max(head(c).gst_theory_s for c in jobs.checked))
        self.background = persistent_flows(network.background, self.router, cfg.seed, horizon)
        self.latency = cfg.latency_us * 1e-6

    def run(self, timed, waits=None, iterations: Optional[int] = None):
        """These timed jobs at once (waits: each job's held offsets) for the run's iterations, or as many as given."""
        return simulate_jobs(timed, iterations or self.iterations, self.router, self.rates, self.latency,
                             self.background, waits)

    def starting(self, starts: Dict[str, float]) -> list:
        """Every job, each from its start."""
        return [replace(t, start_s=starts[t.name]) for t in self.timed]

    def replaying(self, sync_starts: Dict[str, Sequence[float]]) -> list:
        """Every job, each iteration's synchronization beginning when the measured run's did (seconds from the
        timeline's origin), so the jobs overlap in the model as much as they did on the wire."""
        return [replace(t, sync_starts=tuple(sync_starts[t.name])) for t in self.timed]
