"""`dmlbed clean`: remove what a crashed run left behind (its processes, interfaces, bridges and namespaces, by the
records every run keeps), never anything another program started."""

from __future__ import annotations

from typing import List

from emulation.commands.base import Command


class Clean(Command):
    name, help, json_flag = "clean", "remove what a crashed run left behind", False
    description = ("Stops the processes, and removes the interfaces, bridges and namespaces, that dmlbed runs "
                   "recorded under /run/dmlbed and did not remove themselves (a crash, a kill -9). Use it instead "
                   "of `mn -c`, which stops every ryu-manager and bridge on the machine.")
    examples = (
        ("remove the namespaces, interfaces, bridges and processes a crashed run left (nothing else)",
         ""),
    )

    def needs_root(self, job):
        return True

    def execute(self, job, args):
        from emulation.net.runstate import clean
        return clean()

    def show(self, actions: List[str]):
        for a in actions:
            print(a)
        print(f"clean: {len(actions)} action(s)" if actions else "clean: nothing left behind")


COMMAND = Clean()
