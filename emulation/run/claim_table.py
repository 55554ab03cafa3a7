"""The papers' values beside ours as a table on stdout, printed by both commands that evaluate claims (compare and
reproduce)."""

from __future__ import annotations

from emulation.run.claims import OUT_OF_REACH


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
