"""Ryu controller for dmlbed: pure rule computation plus a thin OpenFlow 1.3 app."""
