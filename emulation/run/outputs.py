"""Where results go: the one --out folder policy (another command's results are replaced only with --force; without
--out, a new folder of its own) and writers that never leave half a file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from typing import Iterable, Optional, Sequence

from emulation.run.options import OptionError


RESULTS_ROOT = "results"
LATEST = "latest"  # results/<command>/latest: a link to the newest folder


def default_parent(*parts: str) -> str:
    """Where the folders of a command run without --out go: results/<command>[/<name>]."""
    return os.path.join(RESULTS_ROOT, *parts)


def output_folder(out: Optional[str], files: Sequence[str], what: str, force: bool, *parts: str) -> str:
    """The folder a command writes, as the last step of its validation: --out, refused while it holds another
    `what` unless force (check_output); or, without --out, a new folder made now under results/<parts...> named by
    the date and time, which latest then points at (so that a second command never finds the first's results)."""
    if out:
        check_output(out, files, what, force)
        return out
    return new_folder(default_parent(*parts))


def planned_folder(parent: str) -> str:
    """parent/<YYYYmmdd-HHMMSS>, or with -2, -3, ... when another command took that second (nothing is made)."""
    stamp, n = time.strftime("%Y%m%d-%H%M%S"), 1
    while os.path.lexists(os.path.join(parent, stamp if n == 1 else f"{stamp}-{n}")):
        n += 1
    return os.path.join(parent, stamp if n == 1 else f"{stamp}-{n}")


class FolderTaken(OptionError):
    """A planned results folder was made by another command in the meantime."""


def claim_folder(path: str) -> str:
    """Make the planned folder path (FolderTaken if it exists by now) and point latest beside it at it."""
    parent, name = os.path.split(path)
    try:
        os.makedirs(parent, exist_ok=True)
        try:
            os.mkdir(path)
        except FileExistsError:
            raise FolderTaken(f"{path} was just made by another command: run again or give --out") from None
        link, tmp = os.path.join(parent, LATEST), os.path.join(parent, f".{LATEST}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        os.symlink(name, tmp)
        os.replace(tmp, link)  # readers see the old link or the new one, never none
    except OSError as exc:
        raise OptionError(f"cannot make a results folder in {parent}: {exc.strerror or exc} (give --out)") from None
    return path


def new_folder(parent: str) -> str:
    """A new parent/<date-time> folder of one command's own, made now, with parent/latest pointing at it."""
    while True:
        try:
            return claim_folder(planned_folder(parent))
        except FolderTaken:
            continue


def check_output(out: str, files: Sequence[str], what: str, force: bool) -> None:
    """Refuse an --out folder that holds any of `files` (another command's `what`) unless force; nothing is
    written here."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise OptionError(f"--out {out} is a file, not a folder")
    check_writable(out)
    found = [f for f in files if os.path.exists(os.path.join(out, f))]
    if found and not force:
        raise OptionError(f"--out {out} already holds {what} ({', '.join(found)}): choose another folder or pass "
                          f"--force to replace {'it' if len(found) == 1 else 'them'}")


def check_writable(out: str) -> None:
    """Refuse an --out folder that cannot be made or written (/proc/x, a read-only mount, a file on its way): a
    folder made and removed at once in it, or in the nearest folder above it that exists, is the proof."""
    probe = nearest_existing(out)
    if not os.path.isdir(probe):
        raise OptionError(f"--out {out} cannot be made: {probe} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".dmlbed-probe-", dir=probe))
    except OSError as exc:
        raise OptionError(f"--out {out} cannot be written: {exc.strerror or exc} in {probe}") from None


def clear(out: str, files: Iterable[str]) -> None:
    """Remove an earlier command's result files (--force): they must not sit beside this one's partial ones."""
    for name in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, name))


def nearest_existing(folder: str) -> str:
    """folder itself, or the closest of its parents that exists (where it would be created)."""
    path = os.path.abspath(folder)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def free_bytes(folder: str) -> Optional[int]:
    """Bytes an unprivileged writer may still use on the file system that holds folder (or would hold it)."""
    try:
        st = os.statvfs(nearest_existing(folder))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def check_space(out: str, need: int) -> None:
    """Refuse an --out folder that cannot be written or has less room than the results need, before anything
    starts (OptionError naming the folder and both figures)."""
    existing = nearest_existing(out)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OptionError(f"--out {out}: {existing} is not writable")
    free = free_bytes(out)
    if free is not None and free < need:
        raise OptionError(f"--out {out} has {free / 1024:.0f} KiB free but this run writes about "
                          f"{need / 1024:.0f} KiB: free some space or choose another folder")
