"""The papers' values beside ours as a table on stdout, printed by both commands that evaluate claims (compare and
reproduce)."""

from __future__ import annotations

from emulation.run.claims import EVIDENCE, OUT_OF_REACH

TITLES = {"measurement": "the papers' measurements vs ours", "model": "models (the papers' formulas, dmlbed's own) vs ours",
          "construction": "properties by construction"}


def print_paper(result: dict) -> None:
    """The paper's values beside ours (ours/paper within the claim's tolerance, 10% by default, agrees; a range must
    contain ours), by kind of evidence, each with how ours was obtained and why it differs where the config says;
    then what is out of reach here and why."""
    keys = result["sweep_keys"]
    rows = result["paper"]
    print(f"\nclaims of {result.get('source') or 'the paper'}:")
    for evidence in EVIDENCE:
        scored = [c for c in rows if c.get("evidence") == evidence and c["verdict"] != OUT_OF_REACH]
        if not scored:
            continue
        print(f"\n{TITLES[evidence]}:")
        print(f"  {'claim':<46} " + " ".join(f"{k:>8}" for k in keys) + f" {'paper':>11} {'ours':>8} "
              f"{'ours/paper':>10}  verdict")
        for c in scored:
            ours = "-" if c["ours"] is None else f"{c['ours']:.3f}"
            over = "-" if c["ours_over_paper"] is None else f"{c['ours_over_paper']:.2f}"
            what = c["what"] + (" (dmlbed's model)" if c["kind"] == "model" else "")
            print(f"  {what:<46} " + " ".join(f"{str(c.get(k)):>8}" for k in keys) +
                  f" {c['paper']:>11} {ours:>8} {over:>10}  {c['verdict']}")
            print(f"  {'':<46}   from {c['from']}; ours {c['how']}" + (f"; why: {c['why']}" if c["why"] else "")
                  + (f"; derived: {c['derived']}" if c.get("derived") else ""))
    unreachable = [c for c in rows if c["verdict"] == OUT_OF_REACH]
    if unreachable:
        print("\nout of reach here (not scored):")
        for c in unreachable:
            print(f"  {c['what']} ({c['from']}): {c['why']}")
