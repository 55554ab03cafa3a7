"""The `dmlbed` subcommands, one module each (plug-in, work, table), and the harness that runs them."""
