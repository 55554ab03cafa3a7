"""dmlbed workloads: synchronization plans, transport and training workers."""
