"""ryu-manager launcher with the eventlet compatibility shim Ryu 4.34 needs on Python 3.11."""

import sys


def main() -> None:
    """Patch eventlet.wsgi.ALREADY_HANDLED (removed in eventlet 0.31) and run ryu-manager."""
    import eventlet.wsgi
    if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):
        eventlet.wsgi.ALREADY_HANDLED = object()
    from ryu.cmd.manager import main as ryu_main
    sys.exit(ryu_main())


if __name__ == "__main__":
    main()
