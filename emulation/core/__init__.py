"""The pure description layer: topologies, addresses, shaping, TCP sizing, closed forms; no Mininet, Ryu or torch."""
