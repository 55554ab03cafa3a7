"""Rebuild papers.md and papers.csv of a `dmlbed reproduce --all` folder from its runs' saved rows and the shipped
configs' current claims (after a claim's text or source was corrected): nothing runs again, every value is the
one measured or simulated then. With --docs, rewrite the documentation's papers page from them (the folder becomes
the page's archive, docs/reference/papers/; give that archive itself to rebuild the page from it alone)."""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from emulation.backends import matrix as compare
from emulation.results import papers_archive
from emulation.results.files import write_atomic, write_table
from emulation.commands.reproduce import (ARCHIVE, DOCS_PAGE, TABLE_COLUMNS, claim_rows, docs_page, markdown,
                                          results_of, runs_digests)
from emulation.results.provenance import provenance


def rewrite_page(folder: str, configs: str, claims: list, run_table: str) -> None:
    """The papers page from the folder's rows: unchanged when the claims' text is, the run's own when they are as the
    run's table had them (run_table); else it names this rebuild."""
    origin = papers_archive.origin_of(folder)
    if origin is None:
        raise SystemExit(f"{folder} holds no provenance.json: the docs page must say where its table came from")
    is_archive = os.path.abspath(folder) == os.path.abspath(ARCHIVE)
    if not is_archive:  # a reproduce --all folder: its rows become the page's archive (run by the configs as they are)
        paths = compare.reproducible(configs)
        papers_archive.write(ARCHIVE, [(name, papers_archive.rows_of(folder, name)) for name in paths], origin,
                             runs_digests(paths))
    page = open(DOCS_PAGE).read() if os.path.exists(DOCS_PAGE) else ""
    earlier = papers_archive.rebuilt_of(ARCHIVE) if is_archive else None
    if docs_page(claims, origin, earlier) == page:
        print(f"{DOCS_PAGE} is unchanged")
        return
    rebuilt = None if not is_archive and run_table == markdown(claims) else provenance()
    papers_archive.note_rebuild(ARCHIVE, rebuilt)
    write_atomic(DOCS_PAGE, docs_page(claims, origin, rebuilt))
    print(DOCS_PAGE)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("folder", help="a reproduce --all output folder, or the page's archive (docs/reference/papers)")
    ap.add_argument("--configs", default=os.path.join(ROOT, "configs"), help="the paper configs it ran")
    ap.add_argument("--docs", action="store_true", help=f"also rewrite {os.path.relpath(DOCS_PAGE, ROOT)}, headed by "
                    f"the folder's own provenance (and this rebuild's, when the claims' text changed)")
    args = ap.parse_args()
    folder = args.folder
    try:
        claims = claim_rows(results_of(folder, args.configs))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    table = os.path.join(folder, "papers.md")
    run_table = open(table).read() if os.path.exists(table) else ""
    if os.path.abspath(folder) != os.path.abspath(ARCHIVE):
        write_table(os.path.join(folder, "papers.csv"), claims, TABLE_COLUMNS)
        write_atomic(os.path.join(folder, "papers.md"), markdown(claims))
        print(os.path.join(folder, "papers.md"))
    if args.docs:
        rewrite_page(folder, args.configs, claims, run_table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
