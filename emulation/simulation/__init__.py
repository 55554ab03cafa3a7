"""Flow-level simulation of the same plans on the same topologies (pure: no Mininet, no packets)."""
