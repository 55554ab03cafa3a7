"""Pure description layer: topologies, host addressing, shaping commands, TCP settings, theory (no Mininet, Ryu or torch)."""
