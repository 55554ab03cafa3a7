"""The thin layer that makes a network happen: Mininet, Open vSwitch, the Ryu process, run records, checks."""
