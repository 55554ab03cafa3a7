"""The launch's idle watch: it speaks once, only when every rank has had no CPU and no bytes for the time asked."""

import os

from emulation.run.idle import IdleWatch, interface_bytes, tree_cpu_s


def watch_of(samples, quiet_s=10, ranks=4):
    it = iter(samples)
    return IdleWatch(ranks, quiet_s, lambda: next(it))


def test_quiet_ranks_are_reported_once_after_the_time_asked():
    w = watch_of([(1.0, 1000)] * 30)
    said = [(t, w.look(float(t))) for t in range(30)]
    spoken = [t for t, m in said if m]
    assert spoken == [10] and "idle for 10 s" in said[10][1]


def test_ranks_that_compute_or_send_are_not_idle():
    cpu = watch_of([(t * 1.0, 0) for t in range(30)])  # a quarter of a core per rank
    assert all(cpu.look(float(t)) is None for t in range(30))
    sending = watch_of([(0.0, t * 1_000_000) for t in range(30)])
    assert all(sending.look(float(t)) is None for t in range(30))
    broken = watch_of([(0.0, 0)] * 8 + [(5.0, 0)] + [(5.0, 0)] * 21)  # quiet 7 s, busy, then quiet again
    assert [t for t in range(30) if broken.look(float(t))] == [18]  # quiet again from the busy look at 8


def test_the_readers_see_this_process():
    assert tree_cpu_s(os.getpid()) > 0 and interface_bytes(os.getpid()) >= 0 and tree_cpu_s(2 ** 30) == 0


def test_ranks_on_the_machines_own_namespace_are_judged_by_their_cpu_alone():
    from emulation.run.idle import sample
    me = os.getpid()
    before = interface_bytes(me)
    cpu, sent = sample([me])
    # the namespace's counters run on while other programs send: the sample lies between two reads, not on either
    assert cpu > 0 and before <= sent <= interface_bytes(me)
    # a local launch's ranks share the machine's interfaces with every other program: their bytes are not the ranks'
    assert sample([me], own_links=False)[1] == 0
