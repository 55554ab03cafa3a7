"""Helpers shared by tests: run the CLI as a user would."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_dmlbed(*args, timeout=600, **kwargs):
    """Run the dmlbed CLI as a user would, returning the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "emulation.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, **kwargs)
