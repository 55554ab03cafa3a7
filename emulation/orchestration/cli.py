"""The `dmlbed` command: topo, net, clean."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Dict, List, Optional

from emulation.spec.topology import Topology, TopologyError, parse, parse_bandwidth

EXIT_USAGE = 2
RUN, COMPARE, THEORY, NET, SIMULATE, BENCH, CALIBRATE = "run", "compare", "theory", "net", "simulate", "bench", "calibrate"


class UsageError(Exception):
    """Bad input: reported on one line with exit code 2 before anything starts."""


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit with code 2."""

    def error(self, message):
        raise UsageError(message)


def log(msg: str) -> None:
    """Progress to stderr, so stdout stays clean for --json."""
    print(f"[dmlbed] {msg}", file=sys.stderr, flush=True)


def topo_summary(topo: Topology) -> dict:
    """The topology as printed by `dmlbed topo --json`."""
    data = topo.to_dict()
    data["counts"] = {"hosts": len(topo.hosts), "switches": len(topo.switches), "links": len(topo.links),
                      "switch_ports": topo.switch_ports(),
                      "fat_tree_switches_same_hosts": topo.fat_tree_switches_for_same_hosts()}
    return data


def print_topo(topo: Topology) -> None:
    """Human-readable topology listing."""
    n = topo.switch_ports()
    print(f"{topo.spec}: {len(topo.hosts)} hosts, {len(topo.switches)} switches, {len(topo.links)} links, "
          f"{topo.levels} link level(s)")
    print(f"switches: {len(topo.switches)} here vs {topo.fat_tree_switches_for_same_hosts():g} in a "
          f"3-layer Fat-Tree of {n}-port switches for {len(topo.hosts)} servers (5N/n)")
    print("\nhosts:")
    for h in topo.hosts:
        addrs = "  ".join(f"L{i.level} {i.name} {i.ip} {i.mac}" for i in h.interfaces)
        print(f"  {h.name:<6} coords={','.join(map(str, h.coords)):<10} {addrs}")
    print("\nswitches:")
    for s in topo.switches:
        print(f"  {s.name:<8} level={s.level} role={s.role:<11} dpid={s.dpid_hex}")
    print("\nlinks:")
    for l in topo.links:
        print(f"  L{l.level} {l.lower}:{l.lower_port} <-> {l.upper}:{l.upper_port}")


def cmd_topo(args) -> int:
    """dmlbed topo SPEC [--json]."""
    topo = parse(args.spec)
    if args.json:
        print(json.dumps(topo_summary(topo), indent=1))
    else:
        print_topo(topo)
    return 0


def cmd_rules(args) -> int:
    """dmlbed rules SPEC [--json]: the proactive OpenFlow rules of every switch, grouped by level."""
    from controllers.rules import OFPP_CONTROLLER, compute_rules
    topo = parse(args.spec)
    rules = compute_rules(topo)
    out = []
    for sw in sorted(topo.switches, key=lambda s: (s.level, s.name)):
        flows, groups = rules.for_dpid(sw.dpid)
        out.append({"switch": sw.name, "dpid": sw.dpid_hex, "level": sw.level, "role": sw.role,
                    "groups": [{"group_id": g.group_id, "type": "select", "ports": list(g.ports)} for g in groups],
                    "flows": [{"priority": f.priority, "match": f.fields(),
                               "action": ("CONTROLLER" if f.out_port == OFPP_CONTROLLER else
                                          f"group:{f.group}" if f.group is not None else f"output:{f.out_port}")}
                              for f in sorted(flows, key=lambda f: -f.priority)]})
    if args.json:
        print(json.dumps({"topology": topo.spec, "switches": out}, indent=1))
        return 0
    level = None
    for sw in out:
        if sw["level"] != level:
            level = sw["level"]
            print(f"\n== level {level} ==")
        print(f"{sw['switch']} (dpid {sw['dpid']}, {sw['role']}): {len(sw['flows'])} flows"
              + (f", select group ports {sw['groups'][0]['ports']}" if sw["groups"] else ""))
        for f in sw["flows"]:
            match = ",".join(f"{k}={v:#06x}" if k == "eth_type" else f"{k}={v}" for k, v in f["match"].items())
            print(f"  priority={f['priority']:<4} {match or '(any)':<52} -> {f['action']}")
    return 0


def require_root(what: str) -> None:
    """Emulation needs root for namespaces, veths and OVS."""
    if os.geteuid() != 0:
        raise UsageError(f"{what} needs root (network namespaces and Open vSwitch): run it with sudo")


def validate_net_args(args):
    """Parse and check everything `net` needs before starting anything."""
    from emulation.orchestration.options import check_impairment, check_mtu, check_topology, check_values, from_args
    try:
        cfg = from_args(args, NET)
        check_values(cfg, only=NET)
        topo = check_topology(args.spec, emulated=True)
        bw = parse_bandwidth(cfg.bw, topo)
        if not 0 < args.duration <= 600:
            raise UsageError(f"--duration {args.duration:g} is out of range: give seconds in (0, 600]")
        require_root("dmlbed net")
        impairment = check_impairment(cfg, topo, emulated=True)
        check_mtu(cfg)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return topo, bw, cfg, impairment


def print_net_report(report: dict) -> None:
    """Human-readable `net --check` report."""
    print(f"{report['topology']}: {report['hosts']} hosts, {report['switches']} switches, "
          f"datapath {report['datapath']}, shaped {report['shaped_mbps']} Mbit/s")
    print(f"shaping: {report['shaping']}")
    imp = report.get("impairment") or {}
    if imp.get("applied", "none") != "none":
        print(f"delay {imp['delay_ms']} ms, loss {imp['loss_pct']} % per level: {imp['applied']}")
    print(f"bring-up {report['bring_up_s']:.1f}s, teardown {report['teardown_s']:.1f}s")
    print(f"reachability: {report['pairs_reachable']}/{report['pairs_tested']} pairs")
    for bad in report.get("unreachable", [])[:10]:
        print(f"  unreachable: {bad}")
    if report["flows"]:
        print(f"\n{'src':<6} {'dst':<6} {'level':>5} {'shaped':>8} {'measured':>9} {'fidelity':>9}")
        for f in report["flows"]:
            print(f"{f['src']:<6} {f['dst']:<6} {f['level']:>5} {f['shaped_mbps']:>8.1f} "
                  f"{f['measured_mbps']:>9.1f} {f['fidelity']:>9.3f}" + ("  tunnel" if f.get("tunnel") else "") +
                  (f"  {f['error']}" if "error" in f else ""))
        print(f"\nfidelity (measured/shaped): min {report['fidelity_min']}, median {report['fidelity_median']}; "
              f"{report['verdict']}" + (f" ({report['cause']})" if report.get("cause") else ""))
    if report.get("cluster"):
        c = report["cluster"]
        per = ", ".join(f"{s}: {n} hosts" for s, n in c["hosts_per_server"].items())
        print(f"cluster ({c['tunnel']} tunnels): {per}; {c['tunnel_flows']} flows through tunnels, fidelity min "
              f"{c['tunnel_fidelity_min']}, median {c['tunnel_fidelity_median']}")
    print(f"data-plane PacketIns: {report['packet_in']}")


def cmd_net(args) -> int:
    """dmlbed net SPEC --bw MBPS (--check | --cli)."""
    topo, bw, cfg, impairment = validate_net_args(args)
    from emulation.net import checks
    from emulation.net.network import EmulatedNetwork
    from emulation.orchestration.fidelity import CpuSampler, switch_pid
    from emulation.orchestration.options import cluster_servers, tcp_settings
    report = {"topology": topo.spec, "hosts": len(topo.hosts), "switches": len(topo.switches),
              "links": len(topo.links), "shaped_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
              "bw_by_level": list(bw)}
    from emulation.net.lock import NetworkLock
    with NetworkLock(wait=cfg.wait), EmulatedNetwork(topo, bw, datapath=cfg.datapath,
                                                     ingress_shaping=cfg.shape_ingress, log=log,
                                                     tcp=tcp_settings(cfg), cluster=cluster_servers(cfg),
                                                     tunnel=cfg.tunnel, impairment=impairment) as enet:
        report.update(datapath=enet.datapath, shaping=enet.shaping, bring_up_s=round(enet.bring_up_s, 3),
                      tcp=enet.tcp_summary(), impairment=enet.impairment_summary())
        if args.cli:
            log("Mininet CLI: the controller is running; type exit to tear down")
            enet.interactive()
            return 0
        log("testing reachability")
        report.update(checks.run_reachability(enet, checks.reachability_pairs(topo, args.all_pairs)))
        flows = checks.fidelity_flows(topo, bw)
        log(f"running {len(flows)} concurrent iperf3 flows for {args.duration:g}s")
        with CpuSampler(switch=switch_pid()) as cpu:
            report["flows"] = checks.run_fidelity(enet, flows, args.duration)
        report["cpu"] = cpu.report()
        report.update(checks.summarize_fidelity(report["flows"], report["cpu"]))
        if enet.placement:
            report["cluster"] = dict(checks.mark_tunnels(report["flows"], enet.placement), tunnel=enet.tunnel,
                                     hosts_per_server=enet.hosts_per_server(), placement=enet.placement)
        report["packet_in"] = enet.packet_ins()
        if report["packet_in"]:
            report["packet_in_samples"] = enet.controller.status().get("packet_in_samples", [])
    report["teardown_s"] = round(enet.teardown_s, 3)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_net_report(report)
    ok = report["pairs_reachable"] == report["pairs_tested"] and report["packet_in"] == 0
    return 0 if ok else 1


def print_summary(s: dict) -> None:
    """Human-readable run summary."""
    def fmt(v, spec=".3f"):
        return "-" if v is None else format(v, spec)
    print(f"{s['algo']} on {s['topology']} ({s.get('datapath', '?')}), {s['model']} "
          f"({s['gradient_bytes'] / 2**20:.1f} MiB gradient), {s['workers']} workers, batch {s['batch']}, "
          f"{s['bw_mbps']} Mbit/s")
    print(f"  iterations    {s['iterations']}/{s['iterations_requested']}")
    print(f"  GST median    {fmt(s['gst_median_s'])} s   theory {s['gst_theory_s']:.3f} s ({s['gst_formula']})"
          f"   ratio {fmt(s['gst_ratio'])}")
    print(f"  compute       {fmt(s['compute_median_s'])} s   iteration {fmt(s['iteration_median_s'])} s   "
          f"JCT {fmt(s['jct_s'], '.1f')} s")
    print("  bytes sent    " + ", ".join(f"{k}: {v / 2**20:.1f} MiB" for k, v in s["bytes_by_level"].items()))
    if s.get("wire_ratio") is not None and s.get("codec", "none") != "none":
        print(f"  wire bytes    {s['wire_ratio']:.4f} of fp32 overall, first step (worker->server for ps) "
              f"{s['first_step_wire_ratio']:.4f}")
    if s.get("split_median_s", {}).get("forward_phase_s") is not None:
        sp = s["split_median_s"]
        print(f"  pull+forward  {fmt(sp.get('forward_phase_s'))} s: overlapped {fmt(sp.get('overlapped_s'))}, "
              f"comm not overlapped {fmt(sp.get('comm_exposed_s'))}, compute not overlapped "
              f"{fmt(sp.get('compute_exposed_s'))}  (batches {s['ibatch']['batches'] if s.get('ibatch') else '-'})")
    if s.get("wire_by_phase"):
        print("  wire bytes    " + ", ".join(f"{k}: {v['ratio']:.3f} of fp32" for k, v in s["wire_by_phase"].items()
                                             if v["ratio"] is not None))
    if s.get("split_median_s", {}).get("broadcast_s") is not None:
        print(f"  broadcast     {s['split_median_s']['broadcast_s']:.3f} s (median), dropped "
              f"{s['split_median_s'].get('dropped', 0):.1%} of update values"
              + (f", overlay {s['pflow']['overlay_method']} {s['pflow']['overlay']}" if s.get("pflow") else ""))
    if s.get("accuracy") is not None:
        print(f"  accuracy      {s['accuracy']:.3f} (held-out), loss {fmt(s['loss_first'])} -> {fmt(s['loss_last'])}")
    if s.get("fidelity"):
        from emulation.orchestration.fidelity import one_line
        print(f"  {one_line(s['fidelity'])}")
    print(f"  correct       {s['correct']} (replicas identical: {s['replicas_identical']}, "
          f"first sum verified: {s['sum_verified']})")
    if s.get("error"):
        print(f"  error         {s['error']}")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, iterations.csv, workers.csv")


def cmd_run(args) -> int:
    """dmlbed run --topo SPEC --algo NAME ...: one training run on the emulated network."""
    from emulation.orchestration import experiment
    from emulation.orchestration.options import from_args, validate
    try:
        cfg = from_args(args, RUN)
        validate(cfg)
        experiment.check_output(cfg)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not cfg.local:
        require_root("dmlbed run")
    summary = experiment.run(cfg, log=log, progress=not args.json)
    emit(args, summary, print_summary)
    return 0 if summary["correct"] else 1


def cmd_simulate(args) -> int:
    """dmlbed simulate --topo SPEC --algo NAME ...: the run's plan in the flow-level model (any size)."""
    from emulation.orchestration.options import OptionError, from_args
    from emulation.orchestration.simulate import check_simulable, simulate
    from emulation.orchestration.experiment import check_output
    try:
        cfg = from_args(args, SIMULATE)
        check_simulable(cfg)
        check_output(cfg)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:  # what needs the inputs' contents (an emulated run's ports) is refused before anything is written
        summary = simulate(cfg, log=log)
    except OptionError as exc:
        raise UsageError(str(exc)) from None
    emit(args, summary, print_simulation)
    return 0


def print_simulation(s: dict) -> None:
    """Human-readable summary of a simulated run."""
    model = s["model_settings"]
    print(f"{s['algo']} on {s['topology']} (simulated), {s['model']} ({s['gradient_bytes'] / 2**20:.1f} MiB "
          f"gradient), {s['ranks']} ranks, {s['bw_mbps']} Mbit/s, goodput {model['goodput']:.4f}, "
          f"latency {model['latency_us']:g} us")
    print(f"  GST           {s['gst_median_s']:.4f} s   theory {s['gst_theory_s']:.4f} s ({s['gst_formula']})   "
          f"ratio {s['gst_ratio']:.3f}")
    print("  links used    " + ", ".join(f"{k}: mean {v['mean']:.2f}, max {v['max']:.2f} of the shaped rate"
                                         for k, v in s["link_utilization"].items()))
    print(f"  {s['messages']} messages, {s['events']} rate changes, {s['duration_s']:.1f} s to simulate")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, iterations.csv, links.csv")


def emit(args, data: dict, show) -> None:
    """The result as JSON with --json, else as `show` prints it."""
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        show(data)


def theory_report(cfg) -> dict:
    """The closed-form GST of a configuration (no plan is built, no torch is imported)."""
    from emulation.orchestration.options import check_algorithm_options, check_topology, check_values, link_goodput, worker_options
    from workloads.algorithms import get
    from workloads.models import input_shape, parameter_count_of
    from emulation.spec.impairment import parse_impairment
    check_values(cfg, only=THEORY)
    topo = check_topology(cfg.topology, emulated=False)
    bw = parse_bandwidth(cfg.bw, topo)
    algorithm = get(cfg.algo)
    check_algorithm_options(cfg, algorithm)
    algorithm.check(topo, cfg.servers, {"codec": cfg.codec, "decomposition": cfg.decomposition})
    input_shape(cfg.model)
    params = parameter_count_of(cfg.model)
    t = algorithm.gst_theory(topo, params * 4, bw, cfg.servers, cfg.codec, worker_options(cfg))
    out = {"topology": topo.spec, "algo": cfg.algo, "model": cfg.model, "parameters": params,
           "gradient_bytes": params * 4, "bw_mbps": list(bw), "servers": algorithm.resolve_servers(cfg.servers),
           "tf_s": t.tf_s, "gst_theory_s": t.gst_s, "formula": t.formula}
    impairment = parse_impairment(cfg.delay, cfg.loss, topo)
    if cfg.calibration or impairment.active:
        from emulation.simulation.calibrated import calibrated_fields, delay_fields
        from workloads.models import tensor_sizes
        out.update(calibrated_fields(cfg.calibration, algorithm, topo, out["servers"], tensor_sizes(cfg.model), bw,
                                     worker_options(cfg)))
        out.update(delay_fields(impairment, algorithm, topo, out["servers"], tensor_sizes(cfg.model), bw,
                                worker_options(cfg), link_goodput(cfg)))
    if any(impairment.delay_ms):
        out["delay_ms"] = list(impairment.delay_ms)
    return out


def cmd_theory(args) -> int:
    """dmlbed theory --topo SPEC --algo NAME --model NAME --bw MBPS."""
    from emulation.orchestration.options import from_args
    try:
        out = theory_report(from_args(args, THEORY))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    emit(args, out, print_theory)
    return 0


def print_theory(o: dict) -> None:
    """The paper's formula, and the calibrated model's GST when a calibration was given."""
    print(f"{o['algo']} on {o['topology']}, {o['model']} ({o['gradient_bytes'] / 2**20:.2f} MiB): GST = {o['formula']} "
          f"= {o['gst_theory_s']:.4f} s (TF = {o['tf_s']:.4f} s at {min(o['bw_mbps']):g} Mbit/s)")
    if "gst_theory_calibrated_s" in o:
        cal = o["gst_theory_calibrated_s"]
        print(f"calibrated ({o['calibration']}): " + (f"GST = {cal:.4f} s, {o['gst_formula_calibrated']}"
                                                       if cal is not None else o["gst_formula_calibrated"]))
    if "gst_theory_delay_s" in o:
        d = o["gst_theory_delay_s"]
        print(f"with link delay {','.join(f'{v:g}' for v in o['delay_ms'])} ms: " +
              (f"GST = {d:.4f} s, {o['gst_formula_delay']}" if d is not None else o["gst_formula_delay"]))


def print_comparison(result: dict) -> None:
    """Comparison table, plus each label's JCT and GST against the first label's in every sweep group."""
    rows, keys = result["rows"], result["sweep_keys"]
    def f(v, spec=".3f"):
        return "-" if v is None else format(v, spec)
    print(f"{'label':<22} " + " ".join(f"{k:>6}" for k in keys) +
          f" {'GST':>8} {'theory':>8} {'ratio':>6} {'compute':>8} {'JCT':>8} {'correct':>7}")
    for r in rows:
        print(f"{r['label']:<22} " + " ".join(f"{str(r.get(k)):>6}" for k in keys) +
              f" {f(r['gst_median_s']):>8} {f(r['gst_theory_s']):>8} {f(r['gst_ratio'], '.2f'):>6} "
              f"{f(r['compute_median_s']):>8} {f(r['jct_s'], '.1f'):>8} {str(r['correct']):>7}")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    if len(labels) > 1:
        base = labels[0]
        print("\nrelative (per sweep value):")
        for r in rows:
            if r["label"] == base:
                continue
            ref = next((b for b in rows if b["label"] == base and all(b.get(k) == r.get(k) for k in keys)), None)
            if ref and ref["jct_s"] and r["jct_s"] and ref["gst_median_s"] and r["gst_median_s"]:
                print(f"  {base} vs {r['label']} " + " ".join(f"{k}={r.get(k)}" for k in keys) +
                      f": GST {ref['gst_median_s']:.3f}/{r['gst_median_s']:.3f} = "
                      f"{ref['gst_median_s'] / r['gst_median_s']:.3f}, JCT reduction {1 - ref['jct_s'] / r['jct_s']:.1%}")
    if result.get("sim_vs_emu"):
        print_sim_vs_emu(result["sim_vs_emu"])
    if result.get("paper"):
        print_paper(result)
    print(f"\nresults: {result['out']}/comparison.csv; plots: {', '.join(result['plots'])}")


AGREEMENT = {True: "", False: "  differs", None: "  no value"}  # after a row that agrees, differs, has no value


def print_paper(result: dict) -> None:
    """The paper's values beside ours (ours/paper within 10% counts as agreeing; a range must contain ours)."""
    keys = result["sweep_keys"]
    print(f"\npaper vs ours ({result.get('source') or 'the paper'}):")
    print(f"  {'claim':<46} " + " ".join(f"{k:>8}" for k in keys) + f" {'paper':>11} {'ours':>8} {'ours/paper':>10}")
    for c in result["paper"]:
        ours = "-" if c["ours"] is None else f"{c['ours']:.3f}"
        over = "-" if c["ours_over_paper"] is None else f"{c['ours_over_paper']:.2f}"
        print(f"  {c['what']:<46} " + " ".join(f"{str(c.get(k)):>8}" for k in keys) +
              f" {c['paper']:>11} {ours:>8} {over:>10}{AGREEMENT[c['agrees']]}")


def print_sim_vs_emu(pairs: List[dict]) -> None:
    """Simulated beside emulated GST for every configuration run both ways."""
    print("\nsimulated vs emulated GST (agree within 10%):")
    print(f"  {'configuration':<34} {'emulated':>9} {'simulated':>9} {'sim/emu':>8}  emulation fidelity")
    for p in pairs:
        name = " ".join([p["label"]] + [f"{k}={v}" for k, v in p.items() if k not in SIM_VS_EMU_FIELDS])
        ratio = "-" if p["sim_over_emu"] is None else f"{p['sim_over_emu']:.3f}"
        emu = "-" if p["emulated_gst_s"] is None else f"{p['emulated_gst_s']:.3f}"
        print(f"  {name:<34} {emu:>9} {p['simulated_gst_s']:>9.3f} {ratio:>8}  {p['emulation_fidelity']}"
              f"{AGREEMENT[p['agrees']]}")


SIM_VS_EMU_FIELDS = ("label", "emulated_gst_s", "simulated_gst_s", "sim_over_emu", "agrees", "emulation_fidelity")


def cmd_compare(args) -> int:
    """dmlbed compare CONFIG.yaml: run a matrix of configurations, write CSV and plots."""
    from emulation.orchestration import compare
    try:
        job = compare.prepare(args.config, args.out, args.local, args.force)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if job["emulated"]:
        require_root("dmlbed compare")
    result = compare.compare(args.config, args.out, args.local, log=log, progress=not args.json, force=args.force,
                             wait=args.wait)
    if args.json:
        print(json.dumps(result, indent=1, default=str))
    else:
        print_comparison(result)
    return 0 if all(r["correct"] is not False for r in result["rows"]) else 1  # None: a simulated row


def reproducible() -> Dict[str, str]:
    """Name -> path of every shipped config with a `paper:` block (what `dmlbed reproduce` can run)."""
    import yaml
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs")
    out = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name)) as f:
                if "paper" in (yaml.safe_load(f) or {}):
                    out[name[:-5]] = os.path.join(folder, name)
    return out


def cmd_reproduce(args) -> int:
    """dmlbed reproduce NAME: run a paper's shipped config and print the paper's values beside ours."""
    from emulation.orchestration import compare
    configs = reproducible()
    if args.list or not args.name:
        if not args.list:
            raise UsageError(f"a name is required: {', '.join(configs)} (or --list)")
        for name, path in configs.items():
            print(f"{name:<12} {os.path.relpath(path)}")
        return 0
    if args.name not in configs:
        raise UsageError(f"no paper config named '{args.name}': valid are {', '.join(configs)}")
    try:
        job = compare.prepare(configs[args.name], args.out, args.local, args.force)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if job["emulated"]:
        require_root("dmlbed reproduce")
    result = compare.compare(configs[args.name], args.out, args.local, log=log, progress=not args.json,
                             force=args.force, wait=args.wait)
    if args.json:
        print(json.dumps({"name": args.name, "out": result["out"], "paper": result["paper"],
                          "source": result.get("source")}, indent=1, default=str))
    else:
        print_paper(result)
        print(f"\nevery run: {result['out']}/comparison.csv (paper.csv holds the table above)")
    return 0 if all(r["correct"] is not False for r in result["rows"]) else 1


def cmd_clean(args) -> int:
    """dmlbed clean: undo what crashed runs left behind."""
    require_root("dmlbed clean")
    from emulation.net.runstate import clean
    actions = clean()
    for a in actions:
        print(a)
    print(f"clean: {len(actions)} action(s)" if actions else "clean: nothing left behind")
    return 0


def cmd_bench(args) -> int:
    """dmlbed bench --topo SPEC --algo A[,B...] --sizes MIN:MAX:xF: nccl-tests-style sweep on one network."""
    from emulation.orchestration import bench
    from emulation.orchestration.options import check_values, from_args
    try:
        base = from_args(args, BENCH, algo="ring", out=args.out or "results/bench")
        check_values(base, only=BENCH)
        sizes = bench.parse_sizes(args.sizes)
        algos = [a.strip() for a in args.algo.split(",") if a.strip()]
        if not algos or len(set(algos)) != len(algos):
            raise UsageError(f"--algo '{args.algo}' is invalid: give one or more distinct algorithms, e.g. ring,ps")
        if not 0 <= args.warmup <= 100 or not 1 <= args.reps <= 1000:
            raise UsageError("--warmup must be in [0, 100] and --reps in [1, 1000]")
        runs = bench.prepare(base, algos, sizes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not base.local:
        require_root("dmlbed bench")
    report = bench.bench(base, runs, sizes, args.warmup, args.reps, log=log)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"bench on {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}); busbw = algbw x "
              f"{report['busbw_factor']}; {report['busbw_note']}")
        cal = bool(report.get("calibration"))
        print(f"{'algo':<12} {'size':>10} {'time_s':>9} {'algbw':>9} {'busbw':>9} {'theory_s':>9} {'ratio':>6} "
              + (f"{'cal_s':>9} {'ratio':>6} " if cal else "") + f"{'#wrong':>6}")
        for r in report["rows"]:
            extra = (f"{r['theory_cal_s']:>9.4f} {r['ratio_cal']:>6.2f} " if cal else "")
            print(f"{r['algo']:<12} {r['size_bytes']:>10} {r['time_s']:>9.4f} {r['algbw_mbps']:>9.2f} "
                  f"{r['busbw_mbps']:>9.2f} {r['theory_s']:>9.4f} {r['ratio']:>6.2f} {extra}{r['wrong']:>6}")
        print(f"results: {base.out}/bench.csv, bench.json; plot: {report['plot']}")
    return 0 if all(r["wrong"] == 0 for r in report["rows"]) else 1


def cmd_calibrate(args) -> int:
    """dmlbed calibrate --topo SPEC --bw BW: fit per-level latency and bandwidth on the emulated network."""
    from emulation.orchestration import calibrate
    from emulation.orchestration.options import check_values, from_args
    try:
        base = from_args(args, CALIBRATE, out=args.out or "results/calibration")
        check_values(base, only=CALIBRATE)
        if not 0 <= args.warmup <= 100 or not 1 <= args.reps <= 1000:
            raise UsageError("--warmup must be in [0, 100] and --reps in [1, 1000]")
        cfg, checked = calibrate.prepare(base)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not base.local:
        require_root("dmlbed calibrate")
    report = calibrate.calibrate(cfg, checked, warmup=args.warmup, reps=args.reps, log=log)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"calibration of {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}): one message "
              f"takes alpha + bytes / rate")
        print(f"{'level':>5} {'shaped':>8} {'idle alpha':>11} {'idle rate':>10} {'loaded alpha':>13} {'loaded rate':>12}")
        shaped = report["bw_mbps"]
        idle_by_level = {f["level"]: f for f in report["idle"]}
        for loaded in report["loaded"]:
            level, idle = loaded["level"], idle_by_level.get(loaded["level"])
            idle_text = (f"{idle['alpha_s'] * 1e3:>8.3f} ms {idle['rate_mbps']:>10.2f}" if idle else
                         f"{'-':>11} {'unresolved':>10}")
            print(f"{level:>5} {shaped[min(level, len(shaped) - 1)]:>8g} {idle_text} "
                  f"{loaded['alpha_s'] * 1e3:>10.3f} ms {loaded['rate_mbps']:>12.2f}")
        print(f"rates in Mbit/s of payload; idle = ping-pong of two hosts, loaded = every host sending across the "
              f"level at once (the model theory, bench and simulate use with --calibration {report['path']})")
    return 0 if report["meta"]["wrong"] == 0 else 1


def cmd_timeline(args) -> int:
    """dmlbed timeline RUN_DIR: draw a run's trace.json as a PNG."""
    from emulation.orchestration.timeline import plot_timeline
    path = os.path.join(args.run_dir, "trace.json")
    if not os.path.isfile(path):
        raise UsageError(f"{args.run_dir} has no trace.json: give the --out folder of a `dmlbed run` "
                         f"(every run writes one)")
    if args.iterations is not None and args.iterations < 1:
        raise UsageError(f"--iterations {args.iterations} is out of range: give 1 or more")
    with open(path) as f:
        try:
            trace = json.load(f)
        except ValueError:
            raise UsageError(f"{path} is not valid JSON: was the run interrupted while writing it?") from None
    out = plot_timeline(trace, args.out or os.path.join(args.run_dir, "timeline.png"), args.iterations)
    print(out)
    return 0


def add_matrix_arguments(parser, what: str) -> None:
    """The flags of a command that runs a config's matrix (compare, reproduce)."""
    parser.add_argument("--out", help="output folder (default results/NAME)")
    parser.add_argument("--local", action="store_true", help="run the workers on 127.0.0.1 without emulation")
    parser.add_argument("--force", action="store_true", help=f"replace an earlier {what} in --out")
    parser.add_argument("--wait", action="store_true",
                        help="wait for another run's emulated network instead of refusing")
    parser.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand (run options come from the option schema)."""
    from emulation.orchestration.options import add_arguments
    p = OneLineParser(prog="dmlbed", description="Network emulation testbed for distributed ML.")
    sub = p.add_subparsers(dest="command", parser_class=OneLineParser)
    t = sub.add_parser("topo", help="print a topology")
    t.add_argument("spec", help="bcube:n,k | fattree:k | star:N | tree:F0,F1,...")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_topo)
    ru = sub.add_parser("rules", help="print the controller's proactive rules per switch and level")
    ru.add_argument("spec")
    ru.add_argument("--json", action="store_true")
    ru.set_defaults(func=cmd_rules)
    n = sub.add_parser("net", help="bring a network up, check it, tear it down")
    n.add_argument("spec")
    add_arguments(n, NET)
    mode = n.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="reachability + iperf3 fidelity test")
    mode.add_argument("--cli", action="store_true", help="open the Mininet CLI")
    n.add_argument("--all-pairs", action="store_true", help="BCube: also test relayed (multi-hop) pairs")
    n.add_argument("--duration", type=float, default=5.0, help="iperf3 seconds per flow (default 5)")
    n.add_argument("--json", action="store_true")
    n.set_defaults(func=cmd_net)
    r = sub.add_parser("run", help="train with real workers on an emulated network")
    add_arguments(r, RUN)
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_run)
    th = sub.add_parser("theory", help="the papers' theoretical GST (closed form, any size)")
    add_arguments(th, THEORY)
    th.add_argument("--json", action="store_true")
    th.set_defaults(func=cmd_theory)
    si = sub.add_parser("simulate", help="the same plan in a flow-level model (no packets; any size)")
    add_arguments(si, SIMULATE)
    si.add_argument("--json", action="store_true")
    si.set_defaults(func=cmd_simulate)
    cp = sub.add_parser("compare", help="run a matrix of configurations from a YAML file")
    cp.add_argument("config", help="YAML file: name, defaults, runs, sweep (see configs/)")
    add_matrix_arguments(cp, "comparison")
    cp.set_defaults(func=cmd_compare)
    rp = sub.add_parser("reproduce", help="run a paper's config and print the paper's values beside ours")
    rp.add_argument("name", nargs="?", help="bml-fig5, bml-fig6, terngrad, blueconnect, pflow, ibatch (see --list)")
    rp.add_argument("--list", action="store_true", help="list the paper configs")
    add_matrix_arguments(rp, "reproduction")
    rp.set_defaults(func=cmd_reproduce)
    c = sub.add_parser("clean", help="remove what a crashed run left behind")
    c.set_defaults(func=cmd_clean)
    be = sub.add_parser("bench", help="collective benchmark: message-size sweep, algbw/busbw (like nccl-tests)")
    add_arguments(be, BENCH, skip=("out",))
    be.add_argument("--algo", required=True, help="comma-separated plan algorithms, e.g. ring,ps")
    be.add_argument("--sizes", default="1M:64M:x4", help="MIN:MAX:xFACTOR or a list (bytes, K/M/G), default 1M:64M:x4")
    be.add_argument("--warmup", type=int, default=2, help="untimed repetitions per size (default 2)")
    be.add_argument("--reps", type=int, default=5, help="timed repetitions per size (default 5)")
    be.add_argument("--out", help="output folder (default results/bench)")
    be.add_argument("--json", action="store_true")
    be.set_defaults(func=cmd_bench)
    ca = sub.add_parser("calibrate", help="fit per-level latency and bandwidth (ping-pong and exchange probes)")
    add_arguments(ca, CALIBRATE, skip=("out",))
    ca.add_argument("--warmup", type=int, default=2, help="untimed repetitions per size (default 2)")
    ca.add_argument("--reps", type=int, default=7, help="timed repetitions per size (default 7)")
    ca.add_argument("--out", help="output folder (default results/calibration)")
    ca.add_argument("--json", action="store_true")
    ca.set_defaults(func=cmd_calibrate)
    tl = sub.add_parser("timeline", help="draw a run's trace.json (compute and sends per rank) as a PNG")
    tl.add_argument("run_dir", help="a run's --out folder")
    tl.add_argument("--out", help="PNG path (default RUN_DIR/timeline.png)")
    tl.add_argument("--iterations", type=int, help="only the first N iterations")
    tl.set_defaults(func=cmd_timeline)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `dmlbed` console script."""
    from emulation.net.lock import NetworkBusy
    from emulation.orchestration import signals
    signals.install()
    try:
        args = build_parser().parse_args(argv)
        if not getattr(args, "func", None):
            raise UsageError("a command is required: topo, rules, net, run, simulate, theory, compare, reproduce, bench, calibrate, "
                             "clean, "
                             "timeline (see dmlbed --help)")
        return args.func(args)
    except (UsageError, TopologyError) as exc:
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NetworkBusy as exc:
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        name = exc.name if isinstance(exc, signals.Interrupted) else "SIGINT"
        with contextlib.suppress(OSError, ValueError):  # after SIGHUP the terminal may be gone
            print(f"dmlbed: interrupted by {name}; everything started was stopped", file=sys.stderr)
        return exc.exit_code if isinstance(exc, signals.Interrupted) else 130
    except BrokenPipeError:  # e.g. `dmlbed rules ... | head`
        sys.stderr.close()
        return 0
    except RuntimeError as exc:  # NetworkError, ControllerError: the run failed after validation
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
