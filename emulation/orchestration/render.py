"""Every human-readable table of the `dmlbed` command (with --json a command prints its data instead), and the
progress lines on stderr."""

from __future__ import annotations

import os
import sys
from typing import Dict, List

from emulation.orchestration.fidelity import one_line
from emulation.orchestration.paper import OUT_OF_REACH
from emulation.spec.topology import Topology


def log(msg: str) -> None:
    """Progress to stderr, so stdout stays clean for --json."""
    print(f"[dmlbed] {msg}", file=sys.stderr, flush=True)


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


def print_rules(view: dict) -> None:
    """Every switch's flows, grouped by level."""
    level = None
    for sw in view["switches"]:
        if sw["level"] != level:
            level = sw["level"]
            print(f"\n== level {level} ==")
        print(f"{sw['switch']} (dpid {sw['dpid']}, {sw['role']}): {len(sw['flows'])} flows"
              + (f", select group ports {sw['groups'][0]['ports']}" if sw["groups"] else ""))
        for f in sw["flows"]:
            match = ",".join(f"{k}={v:#06x}" if k == "eth_type" else f"{k}={v}" for k, v in f["match"].items())
            print(f"  priority={f['priority']:<4} {match or '(any)':<52} -> {f['action']}")


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
              + (f", overlay {s['pflow']['overlay_method']} {s['pflow']['overlay']}" if s.get("pflow") else "")
              + (f", {s['pflow']['extra_updates']} updates folded into an earlier round (SSP)"
                 if (s.get("pflow") or {}).get("extra_updates") else ""))
    if s.get("accuracy") is not None:
        print(f"  accuracy      {s['accuracy']:.3f} (held-out), loss {fmt(s['loss_first'])} -> {fmt(s['loss_last'])}")
    if s.get("fidelity"):
        print(f"  {one_line(s['fidelity'])}")
    print(f"  correct       {s['correct']} (replicas identical: {s['replicas_identical']}, "
          f"first sum verified: {s['sum_verified']})")
    if s.get("error"):
        print(f"  error         {s['error']}")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, iterations.csv, workers.csv")


def print_launch(s: dict) -> None:
    """A launch: the command, each rank's exit code, wall time, bytes per level, fidelity."""
    print(f"`{s['command']}` on {s['topology']} ({s.get('datapath', '?')}), {s['ranks']} ranks, {s['bw_mbps']} Mbit/s; "
          f"synchronization: {s['synchronization']}")
    print("  exit codes    " + " ".join(f"{r}:{'-' if c is None else c}" for r, c in s["exit_codes"].items()))
    print(f"  wall time     {s['wall_s']:.1f} s")
    print("  bytes sent    " + (", ".join(f"{k}: {v / 2**20:.1f} MiB" for k, v in s["bytes_by_level"].items()) or
                                "- (loopback)"))
    if s.get("buckets"):
        b = s["buckets"]
        print(f"  DDP buckets   {b['per_iteration']} per iteration, {b['records']} synchronized, median "
              f"{b['sync_s_median']:.3f} s each")
    if s.get("checks"):
        print(f"  exact sums    {s['checks']}")
    print(f"  {one_line(s['fidelity'])}")
    if s.get("error"):
        print(f"  error         {s['error']}")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, workers/rank-N.stdout, .stderr, trace.json")


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


def print_theory(o: dict) -> None:
    """The paper's formula, and the calibrated model's GST when a calibration was given."""
    print(f"{o['algo']} on {o['topology']}, {o['model']} ({o['gradient_bytes'] / 2**20:.2f} MiB): GST = {o['formula']} "
          f"= {o['gst_theory_s']:.4f} s (TF = {o['tf_s']:.4f} s at {min(o['bw_mbps']):g} Mbit/s)")
    if "terngrad_model" in o:
        m = o["terngrad_model"]
        i = m["inputs"]
        print(f"TernGrad App. B ({i['scaling']} scaling, {i['machines']} machines x {i['gpus']} GPUs, "
              f"T(1,1,K) {i['step_s']:g} s): fp32 {m['fp32']['t_s']:.4f} s/step, "
              f"{m['fp32']['throughput_sps']:.1f} samples/s; terngrad {m['terngrad']['t_s']:.4f} s/step, "
              f"{m['terngrad']['throughput_sps']:.1f} samples/s; speed-up {m['speedup']:.2f}x")
    for what, seconds in (o.get("baselines_s") or {}).items():
        print(f"  beside it, {what}: {seconds:.4f} s ({seconds / o['gst_theory_s']:.3f} x)")
    if "gst_theory_calibrated_s" in o:
        cal = o["gst_theory_calibrated_s"]
        print(f"calibrated ({o['calibration']}): " + (f"GST = {cal:.4f} s, {o['gst_formula_calibrated']}"
                                                       if cal is not None else o["gst_formula_calibrated"]))
    if "gst_theory_delay_s" in o:
        d = o["gst_theory_delay_s"]
        print(f"with link delay {','.join(f'{v:g}' for v in o['delay_ms'])} ms: " +
              (f"GST = {d:.4f} s, {o['gst_formula_delay']}" if d is not None else o["gst_formula_delay"]))


def print_bench(report: dict) -> None:
    """nccl-tests' table: per algorithm and size, time, algbw, busbw, theory and wrong results."""
    print(f"bench on {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}); busbw = algbw x "
          f"{report['busbw_factor']}; {report['busbw_note']}")
    cal = bool(report.get("calibration"))
    print(f"{'algo':<12} {'size':>10} {'time_s':>9} {'algbw':>9} {'busbw':>9} {'theory_s':>9} {'ratio':>6} "
          + (f"{'cal_s':>9} {'ratio':>6} " if cal else "") + f"{'#wrong':>6}")
    for r in report["rows"]:
        extra = (f"{r['theory_cal_s']:>9.4f} {r['ratio_cal']:>6.2f} " if cal else "")
        print(f"{r['algo']:<12} {r['size_bytes']:>10} {r['time_s']:>9.4f} {r['algbw_mbps']:>9.2f} "
              f"{r['busbw_mbps']:>9.2f} {r['theory_s']:>9.4f} {r['ratio']:>6.2f} {extra}{r['wrong']:>6}")
    print(f"results: {os.path.dirname(report['plot'])}/bench.csv, bench.json; plot: {report['plot']}")


def print_calibration(report: dict) -> None:
    """Per level: the idle and loaded fits of alpha and rate."""
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
    """The paper's values beside ours (ours/paper within 10% counts as agreeing; a range must contain ours): the
    papers' measurements, then dmlbed's own model apart, then what is out of reach here and why."""
    keys = result["sweep_keys"]
    rows = result["paper"]
    sections = (("paper", f"paper vs ours ({result.get('source') or 'the paper'})"),
                ("model", "dmlbed's model vs ours (not a paper's measurement)"))
    for kind, title in sections:
        scored = [c for c in rows if c["kind"] == kind and c["verdict"] != OUT_OF_REACH]
        if not scored:
            continue
        print(f"\n{title}:")
        print(f"  {'claim':<46} " + " ".join(f"{k:>8}" for k in keys) + f" {'paper':>11} {'ours':>8} "
              f"{'ours/paper':>10}  verdict")
        for c in scored:
            ours = "-" if c["ours"] is None else f"{c['ours']:.3f}"
            over = "-" if c["ours_over_paper"] is None else f"{c['ours_over_paper']:.2f}"
            print(f"  {c['what']:<46} " + " ".join(f"{str(c.get(k)):>8}" for k in keys) +
                  f" {c['paper']:>11} {ours:>8} {over:>10}  {c['verdict']}")
            print(f"  {'':<46}   from {c['from']}; ours {c['how']}" + (f"; why: {c['why']}" if c["why"] else ""))
    unreachable = [c for c in rows if c["verdict"] == OUT_OF_REACH]
    if unreachable:
        print("\nout of reach here (not scored):")
        for c in unreachable:
            print(f"  {c['what']} ({c['from']}): {c['why']}")


def print_claim_counts(claims: List[dict]) -> None:
    """Per paper config, how many of its claims agree, differ, have no value or are out of reach here."""
    counts: Dict[str, Dict[str, int]] = {}
    for c in claims:
        config = counts.setdefault(c["config"], {})
        config[c["verdict"]] = config.get(c["verdict"], 0) + 1
    for name, by_verdict in counts.items():
        print(f"  {name:<22} " + ", ".join(f"{n} {v}" for v, n in sorted(by_verdict.items())))


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
