"""Write the documentation's generated reference pages (docs/reference/: the command line, compare configs,
summary.json, the algorithms, the layers, the Python API) from the code; with --check, only say which differ (exit 1)."""

from __future__ import annotations

import argparse
import os
import sys

from dmlbed.api_reference import page as api_page
from emulation.commands.reference import pages

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(ROOT, "docs", "reference")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is out of date")
    args = ap.parse_args()
    stale = []
    for name, text in dict(pages(), **{"python-api.md": api_page()}).items():
        path = os.path.join(REFERENCE, name)
        current = open(path).read() if os.path.exists(path) else None
        if current != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w") as f:
                    f.write(text)
    if args.check and stale:
        print(f"out of date (run `make docs`): {', '.join(stale)}", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
