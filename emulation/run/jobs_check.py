"""Several jobs on one network, checked once before anything starts: each job's options over the shared run's, its
hosts (listed or placed by rule), and every job validated as a run on its own hosts of the one network."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Dict, Sequence, Tuple

from emulation.core.job_specs import JobSpec, parse_jobs, place
from emulation.core.topology import TopologyError
from emulation.run.options import (BATCH, PLAN_INPUTS, SYNCHRONIZATION, TRAINING, OptionError, RunConfig, coerce,
                                   described, in_groups, yaml_key)
from emulation.run.resolution import Checked
from emulation.run.validation import check_topology, check_workers, validate
from workloads.models import parameter_count_of

JOB_GROUPS = (SYNCHRONIZATION, BATCH, TRAINING, PLAN_INPUTS)  # what a job sets for itself; the rest is shared


@dataclass(frozen=True)
class CheckedJobs:
    """The shared configuration, each job as given, its hosts and its checked run."""

    cfg: RunConfig
    specs: Tuple[JobSpec, ...]
    hosts: Dict[str, Tuple[str, ...]]
    checked: Tuple[Checked, ...]

    @property
    def network(self):
        """The one network every job runs on."""
        return self.checked[0].network


def job_fields() -> Dict[str, str]:
    """Compare-config key -> field name of every option a job may set (hosts is the placement's)."""
    out = {yaml_key(n, o): n for n, o, _ in in_groups(JOB_GROUPS) if n != "hosts"}
    out.update({yaml_key(n, o): n for n, o, _ in described() if o.algorithm_option})
    return out


def check_jobs(cfg: RunConfig, texts: Sequence[str], emulated: bool = True) -> CheckedJobs:
    """Every job checked as a run on its hosts (OptionError / TopologyError naming the job and what is wrong)."""
    try:
        specs = parse_jobs(texts)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if len(specs) < 1:
        raise OptionError("dmlbed jobs needs at least one --job")
    if cfg.hosts:
        raise OptionError("--hosts places one job: give each --job its hosts=")
    if cfg.event:
        raise OptionError("--event: jobs sharing a network run on links that do not change (yet): run one job with "
                          "dmlbed run --event")
    topo = check_topology(cfg.topology, emulated, cfg.routing)
    placement = place(specs, topo)
    fields = job_fields()
    checked = []
    for spec in specs:
        unknown = [k for k in spec.options if k not in fields]
        if unknown:
            raise OptionError(f"job {spec.name}: {unknown[0]} is not an option a job sets (valid: name, hosts, "
                              f"ranks, start, {', '.join(sorted(fields))}); the network's options are the run's")
        values = coerce({fields[k]: v for k, v in spec.options.items()}, lambda n: f"job {spec.name}: {n}")
        own = replace(cfg, hosts=",".join(placement[spec.name]),
                      out=os.path.join(cfg.out, spec.name) if cfg.out else None, **values)
        try:
            checked.append(validate(own, lambda n, j=spec.name: f"job {j}: {n}", emulated, workers=False))
        except (OptionError, TopologyError) as exc:
            raise type(exc)(str(exc) if str(exc).startswith("job ") else f"job {spec.name}: {exc}") from None
    if emulated and not cfg.local:
        biggest = max(parameter_count_of(c.cfg.model) for c in checked) * 4
        check_workers(checked[0].network, biggest, sum(len(c.topo.hosts) for c in checked))
    return CheckedJobs(cfg, specs, placement, tuple(checked))
