#!/usr/bin/env bash
# One-command, idempotent setup on Debian 12: system packages, venv, pinned Python deps, Open vSwitch.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="mininet openvswitch-switch iperf3 ethtool iputils-ping iproute2 python3-venv python3-dev openssh-client openssh-server sudo chromium"
VENV=.venv
TORCH_CPU_INDEX="${DMLBED_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
say() { printf '[setup] %s\n' "$*"; }

missing=""
for p in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" = 0 ] || { echo "setup: installing$missing needs root: run sudo make setup" >&2; exit 2; }
    say "installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV from Debian's /usr/bin/python3 (sees Mininet) with system site packages"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi

stamp="$VENV/.requirements-$(cat requirements.txt setup.py | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    say "installing pinned Python dependencies (requirements.txt)"
    # pip's notes about absent local index folders are noise on these machines.
    # PyPI's Linux torch is the CUDA build (several GB of nvidia packages). The CPU build comes from a local wheel
    # (pip's find-links, as on the machines dmlbed is developed on) or else from PyTorch's own CPU index.
    torch_pin=$(grep -E '^torch==' requirements.txt)
    if ! "$VENV/bin/pip" install -q --no-index --no-deps "$torch_pin" >/dev/null 2>&1; then
        say "no local $torch_pin wheel: installing PyTorch's CPU build from $TORCH_CPU_INDEX"
        "$VENV/bin/pip" install -q --no-deps --index-url "$TORCH_CPU_INDEX" "$torch_pin+cpu"
    fi
    # Ryu 4.34 ships only a setup.py that reads setuptools' easy_install.get_script_args, which setuptools 68
    # removed: build it with an older setuptools first, before torch's dependencies bring a newer one. (Machines
    # with a ryu wheel in pip's cache never build it, which hid this.)
    if ! "$VENV/bin/python" -c "import ryu" 2>/dev/null; then
        "$VENV/bin/pip" install -q "setuptools<68" 2>&1 | { grep -v "is ignored: it is neither" || true; }
        "$VENV/bin/pip" install -q $(grep -E '^(ryu|eventlet|dnspython)==' requirements.txt) 2>&1 | \
            { grep -v "is ignored: it is neither" || true; }
    fi
    "$VENV/bin/pip" install -q -r requirements.txt 2>&1 | { grep -v "is ignored: it is neither" || true; }
    "$VENV/bin/pip" install -q --no-deps --no-build-isolation -e . 2>&1 | { grep -v "is ignored: it is neither" || true; }
    "$VENV/bin/python" -c "import torch, ryu, mininet, numpy, yaml, scipy, matplotlib" \
        || { echo "setup: Python dependencies did not install" >&2; exit 1; }
    rm -f "$VENV"/.requirements-*
    touch "$stamp"
fi

# os-ken (Ryu's maintained fork) on Python 3.12, where Ryu 4.34 cannot install: the tests check that dmlbed's
# controller app sends it the same flow-mods as under Ryu. Kept in the user's cache; skipped without a python3.12.
OSKEN_VENV="${DMLBED_OSKEN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dmlbed/os-ken-4.2.2-py3.12}"
PY312=""
for candidate in $(command -v python3.12 2>/dev/null) "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if [ -x "$candidate" ] && "$candidate" -c "import sys; assert sys.version_info[:2] == (3, 12)" 2>/dev/null; then
        PY312="$candidate"; break
    fi
done
if [ ! -x "$OSKEN_VENV/bin/python" ] && [ -n "$PY312" ]; then
    say "installing os-ken 4.2.2 for Python 3.12 in $OSKEN_VENV (the controller app's os-ken check)"
    "$PY312" -m venv "$OSKEN_VENV" && "$OSKEN_VENV/bin/pip" install -q os-ken==4.2.2 2>&1 | \
        { grep -v "is ignored: it is neither" || true; } || rm -rf "$OSKEN_VENV"
    "$OSKEN_VENV/bin/python" -c "import os_ken.ofproto.ofproto_v1_3_parser" 2>/dev/null || rm -rf "$OSKEN_VENV"
fi

# DMLBED_SETUP_START_OVS=0: provisioning an image in a chroot (scripts/vm_test.py), where no service may start.
if [ "$(id -u)" = 0 ] && [ "${DMLBED_SETUP_START_OVS:-1}" != 0 ]; then
    if ! ovs-vsctl -t 3 show >/dev/null 2>&1; then
        say "starting Open vSwitch (works without its kernel module)"
        /usr/share/openvswitch/scripts/ovs-ctl start >/dev/null 2>&1 || true
        ovs-vsctl -t 5 show >/dev/null || { echo "setup: Open vSwitch did not start" >&2; exit 1; }
    fi
fi
say "ready: $("$VENV/bin/python" -c 'import torch, ryu; print("torch", torch.__version__)'), $(ovs-vsctl --version | head -1)"
