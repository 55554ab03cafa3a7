"""The three back ends of one question (emulate, simulate, theory), each preparing a checked job from a
configuration and executing it into a typed Summary (base.py), and matrices of them (matrix.py). A compare row's
mode picks its back end here; nothing else tells them apart."""

from typing import Dict

from emulation.backends import closed_form, emulator, flow_model
from emulation.backends.base import Backend

BACKENDS: Dict[str, Backend] = {b.mode: b for b in (emulator.BACKEND, flow_model.BACKEND, closed_form.BACKEND)}
