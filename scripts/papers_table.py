"""Rebuild papers.md and papers.csv of a `dmlbed reproduce --all` folder from its runs' saved rows and the shipped
configs' current claims (after a claim's text or source was corrected): nothing runs again, every value is the
one measured or simulated then."""

from __future__ import annotations

import argparse
import json
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from emulation.backends import matrix as compare
from emulation.results import claims as paper
from emulation.results.files import write_atomic, write_table
from emulation.commands.reproduce import DOCS_PAGE, TABLE_COLUMNS, claim_rows, docs_page, markdown
from emulation.results.provenance import provenance


def results_of(folder: str, configs: str) -> list:
    """(name, result) per paper config in `configs`, its claims evaluated anew on the rows the folder saved."""
    out = []
    for name, path in compare.reproducible(configs).items():
        saved = os.path.join(folder, name, "comparison.json")
        if not os.path.exists(saved):
            raise SystemExit(f"{saved} is missing: {folder} is not a complete reproduce --all folder")
        with open(path) as f:
            data = yaml.safe_load(f)
        with open(saved) as f:
            rows = json.load(f)
        keys = list((data.get("sweep") or {}).keys())
        claims = paper.claims(data, list(dict.fromkeys(r["label"] for r in rows)))
        out.append((name, {"paper": paper.table(claims, rows, keys), "sweep_keys": keys}))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("folder", help="a reproduce --all output folder")
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"), help="the paper configs it ran")
    ap.add_argument("--docs", action="store_true", help=f"also rewrite {os.path.relpath(DOCS_PAGE, ROOT)}, headed by "
                    f"the folder's own provenance and this rebuild's")
    args = ap.parse_args()
    folder = args.folder
    claims = claim_rows(results_of(folder, args.configs))
    write_table(os.path.join(folder, "papers.csv"), claims, TABLE_COLUMNS)
    write_atomic(os.path.join(folder, "papers.md"), markdown(claims))
    print(os.path.join(folder, "papers.md"))
    if args.docs:
        origin_path = os.path.join(folder, "provenance.json")
        if not os.path.exists(origin_path):
            raise SystemExit(f"{origin_path} is missing: the docs page must say where its table came from")
        with open(origin_path) as f:
            origin = json.load(f)
        write_atomic(DOCS_PAGE, docs_page(claims, origin, rebuilt=provenance()))
        print(DOCS_PAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
