"""ryu-manager launcher: under Ryu 4.34 with the eventlet compatibility shim it needs on Python 3.11; under os-ken
(Ryu's maintained fork, Python 3.12+, which ships no manager command) it loads the apps as ryu-manager does."""

import importlib.util
import sys


def main() -> None:
    """Run the apps named on the command line (same flags as ryu-manager) under Ryu, else under os-ken."""
    if importlib.util.find_spec("ryu") is None and importlib.util.find_spec("os_ken") is not None:
        sys.exit(run_os_ken(sys.argv[1:]))
    import eventlet.wsgi
    if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):  # removed in eventlet 0.31; Ryu 4.34 still reads it
        eventlet.wsgi.ALREADY_HANDLED = object()
    from ryu.cmd.manager import main as ryu_main
    sys.exit(ryu_main())


def run_os_ken(argv) -> int:
    """ryu-manager's work under os-ken: parse the --ofp-* flags, load the apps and the OpenFlow handler, serve."""
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager
    from os_ken.lib import hub
    import os_ken.controller.controller  # noqa: F401  (registers the --ofp-* flags)
    cfg.CONF.register_cli_opts([cfg.MultiStrOpt("app", positional=True, default=[], help="application module")])
    cfg.CONF(args=argv, project="os_ken")
    manager = AppManager.get_instance()
    manager.load_apps(list(cfg.CONF.app) + ["os_ken.controller.ofp_handler"])
    services = manager.instantiate_apps(**manager.create_contexts())
    try:
        hub.joinall(services)
    finally:
        manager.close()
    return 0


if __name__ == "__main__":
    main()
