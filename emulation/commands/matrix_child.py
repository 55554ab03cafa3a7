"""`python -m emulation.commands.matrix_child IN OUT`: one matrix row a Dask task sent (backends/matrix_tasks.py),
checked again on this machine and run in this process's main thread; its rows and curves pickled to OUT."""

from __future__ import annotations

import pickle
import sys

import emulation.commands.cli  # noqa: F401 (gives command rows the dmlbed parser)
from emulation.backends.matrix_run import rechecked, run_alone
from emulation.commands.command_rows import COMMAND_ROWS
from emulation.run import signals
from emulation.run.progress import log


def main(argv) -> int:
    """Run the row IN describes; 0 when it ran (its rows may still say it failed), 2 when this machine refused it."""
    signals.install()  # SIGTERM (the task told to stop, or its worker gone) tears the row's network down
    given, taken = argv
    with open(given, "rb") as f:
        data = pickle.load(f)
    try:
        entry = rechecked(data["spec"], COMMAND_ROWS)
    except ValueError as exc:
        print(f"refused here: {exc}", flush=True)
        return 2
    try:
        rows, curves = run_alone(entry, data["earlier"], log)
    except signals.Interrupted as exc:
        print(f"interrupted by {exc.name}; everything started was stopped", flush=True)
        return exc.exit_code
    with open(taken, "wb") as f:
        pickle.dump({"rows": rows, "curves": curves}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
