"""dmlbed's algorithms as DDP communication hooks for your own script: `dmlbed.ddp.register(ddp_model)` installs
the hook of the algorithm `dmlbed launch --algo` chose (and does nothing outside dmlbed)."""

from workloads.comm_hook import BucketHook, register

__all__ = ["register", "BucketHook"]
