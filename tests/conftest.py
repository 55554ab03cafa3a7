"""Shared fixtures: skip emulation tests with a clear reason where they cannot run."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def emulation_unavailable():
    """Why real Mininet/OVS tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, Open vSwitch)"
    for tool in ("mnexec", "ovs-vsctl", "iperf3"):
        if not shutil.which(tool):
            return f"{tool} is not installed (run make setup)"
    if subprocess.run(["ovs-vsctl", "-t", "3", "show"], capture_output=True).returncode:
        return "Open vSwitch is not running (run make setup)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = emulation_unavailable()
    if reason:
        skip = pytest.mark.skip(reason=f"emulation test skipped: {reason}")
        for item in items:
            if "emulation" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def machine_cleaned_of_crashed_runs():
    """Undo what runs that died before this session left (their records say what), so that every test's
    leftover check compares with the machine's own state and not with a crash's."""
    if emulation_unavailable() is None:
        from emulation.net.runstate import clean
        for action in clean():
            print(f"conftest: {action}")
    yield
