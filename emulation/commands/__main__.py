"""`python -m emulation.commands`: the dmlbed command."""

import sys

from emulation.commands.cli import main

sys.exit(main())
