"""dmlbed emulation: topologies, network bring-up, controller process, CLI."""
