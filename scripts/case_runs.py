"""What the benchmark scripts made of cases share: one dmlbed command as a user runs it, and their JSON report."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def config_targets(config: str, rows: list) -> list:
    """A config's targets (its `targets:` block) judged by the package on these rows (rows run again in place)."""
    from emulation.backends import matrix
    from emulation.results import targets
    data = matrix.load(config if os.path.isabs(config) else os.path.join(ROOT, config))
    return targets.table(targets.targets(data, [r["label"] for r in data["runs"]]), rows, [])


def provenance() -> dict:
    """This checkout's provenance, read as its dmlbed commands run (from ROOT), whichever checkout an installed
    package points at."""
    r = subprocess.run([sys.executable, "-c", "import json; from emulation.results.provenance import provenance; "
                        "print(json.dumps(provenance()))"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return dict(json.loads(r.stdout), command=" ".join(sys.argv))


def chosen(text: str, valid, what: str) -> list:
    """The comma-separated names asked for (all of valid when none), or SystemExit 2 naming the first unknown."""
    names = text.split(",") if text else list(valid)
    unknown = [n for n in names if n not in valid]
    if unknown:
        print(f"{os.path.splitext(os.path.basename(sys.argv[0]))[0]}: unknown {what} {unknown[0]}: valid are {', '.join(valid)}",
              file=sys.stderr)
        raise SystemExit(2)
    return names


def dmlbed(*args, timeout=1800) -> dict:
    """One `dmlbed ... --json` as a user runs it: its summary, or {'error': ...}."""
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", *args, "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 or not r.stdout.strip().startswith("{"):
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1], "returncode": r.returncode}
    return json.loads(r.stdout)


def with_earlier(path: str, rows: list, name, some: bool) -> list:
    """Rows measured now, each stamped with this checkout's provenance; when only some were asked for (some), the
    report at path keeps the others as an earlier run measured them (each saying when). name: a row's identity."""
    here = provenance()
    stamp = lambda p: {k: p.get(k) for k in ("commit", "date", "command")}  # noqa: E731
    rows = [dict(r, measured=stamp(here)) for r in rows]
    if not some or not os.path.exists(path):
        return rows
    with open(path) as f:
        earlier = json.load(f)
    named = {name(r) for r in rows}
    return [dict(r, measured=r.get("measured") or stamp(earlier["provenance"]))
            for r in earlier.get("cases", []) if name(r) not in named] + rows


def write_report(path: str, targets: dict, rows: list) -> int:
    """The report (provenance, targets, every case, whether all were met) written to path and printed; the exit
    code: 1 when a case missed."""
    report = {"provenance": provenance(), "targets": targets, "cases": rows, "ok": all(r["ok"] for r in rows)}
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1
