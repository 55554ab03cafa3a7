"""Progress: one plain line per update when stderr is not a terminal (a log, CI), a bar when it is."""

import io
import re

from emulation.run.progress import Progress
from helpers import run_dmlbed


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_log_gets_each_update_once():
    log = io.StringIO()
    p = Progress("ring on star:2", 3, log)
    for done, gst in ((0, None), (1, 0.5), (1, 0.5), (2, 0.25), (3, 0.125)):
        p.update(done, gst)
    p.close()
    assert log.getvalue().splitlines() == ["ring on star:2: 0/3 iterations", "ring on star:2: 1/3 iterations, GST 0.500 s",
                                           "ring on star:2: 2/3 iterations, GST 0.250 s",
                                           "ring on star:2: 3/3 iterations, GST 0.125 s"]


def test_a_terminal_gets_a_bar():
    term = Terminal()
    p = Progress("ring on star:2", 2, term)
    p.update(1, 0.5)
    p.update(2, 0.25)
    p.close()
    assert "\r" in term.getvalue() and "2/2" in term.getvalue() and "gst=0.250s" in term.getvalue()


def test_a_redirected_run_logs_each_progress_line_once(tmp_path):
    r = run_dmlbed("run", "--topo", "star:2", "--algo", "ring", "--local", "--iters", "3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "\r" not in r.stderr
    done = [int(m.group(1)) for m in re.finditer(r"^ring on star:2: (\d)/3 iterations", r.stderr, re.M)]
    assert done == sorted(set(done)) and done[-1] == 3, done  # each once, in order (a poll may skip one)
