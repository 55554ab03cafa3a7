"""What a step is in the step-at-a-time flow model (its messages' Shape, solved once per distinct step) and the data
chain its messages wait on: when each rank last touched each piece (Touches, the chain kept whole), or, for a plan
whose pieces move as tokens (a ring), each piece's holder and since when (Tokens); and why a plan is declined."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from emulation.simulation.flow_graph import first_of_each


class Declined(Exception):
    """The plan needs the graph or the event model; the message says why."""


class NotTokens(Declined):
    """A step broke the token discipline: the whole data chain is needed."""


@dataclass
class Shape:
    """What a step's messages are whatever pieces they carry (solved once per distinct step): who sends to whom
    on which level, the transfers of each (order, ptr), their paths, rates and latencies, their connections' and
    level keys' slots, and whether each rank sends (receives) at most one of them."""

    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    order: np.ndarray  # the step's transfers message by message
    ptr: np.ndarray
    single: bool  # every message one transfer
    distinct: bool  # no rank sends two messages, none receives two
    level: Optional[np.ndarray] = None
    lengths: Optional[np.ndarray] = None
    flat: Optional[np.ndarray] = None
    rate: Optional[np.ndarray] = None
    latency: Optional[np.ndarray] = None
    unit: Optional[np.ndarray] = None  # per link crossing: its message
    conn_send: Optional[np.ndarray] = None
    conn_recv: Optional[np.ndarray] = None
    key: Optional[np.ndarray] = None  # the level chain's key of each message
    keys: Optional[np.ndarray] = None  # the distinct level keys
    claimed: bool = False  # its links were claimed for its senders (a one-stream plan need not again)
    moved: Optional[np.ndarray] = None  # per message, the bytes it moved in every step of this shape so far
    sharing: Optional[object] = None  # its messages that share a link (shared_step.Sharing), if any
    contested_version: int = -1  # the paths' version its contested crossings were found at
    contested_at: Optional[np.ndarray] = None  # its link crossings (indices into flat) on contested links
    # the same indices as a slice where they step evenly (a ring's: a view reads and writes in place of a gather)
    order_at: object = None
    key_at: object = None
    send_at: object = None
    recv_at: object = None


def as_slice(index: np.ndarray):
    """index as the slice it walks where it steps evenly upwards (indexing by it then makes a view), else index."""
    n = len(index)
    if n < 2:
        return index
    first, stride = int(index[0]), int(index[1] - index[0])
    if stride <= 0 or not np.array_equal(index, first + stride * np.arange(n, dtype=index.dtype)):
        return index
    return slice(first, first + stride * (n - 1) + 1, stride)


def shape_of(src: np.ndarray, dst: np.ndarray, tags: np.ndarray, ranks: int) -> Shape:
    """A step's messages (everything src sends dst): their src, dst, tag level, and transfers (CSR)."""
    msg, first = first_of_each(src * ranks + dst)
    in_order = len(msg) < 2 or bool(np.all(msg[1:] >= msg[:-1]))  # plans list a message's transfers together
    order = np.arange(len(msg), dtype=np.int64) if in_order else np.argsort(msg, kind="stable")
    ptr = np.searchsorted(msg[order], np.arange(len(first) + 1))
    tagged = tags >= 0
    tag = np.full(len(first), -1, dtype=np.int64)
    if tagged.any():
        tag_msg, where = np.unique(msg[tagged], return_index=True)
        tag[tag_msg] = tags[tagged][where]
    m_src, m_dst = src[first], dst[first]
    distinct = len(np.unique(m_src)) == len(m_src) and len(np.unique(m_dst)) == len(m_dst)
    return Shape(m_src, m_dst, tag, order, ptr, len(first) == len(src), distinct)


def region_ready(touched: np.ndarray, rank: np.ndarray, ptr: np.ndarray, regions: np.ndarray,
                 single: bool) -> np.ndarray:
    """Per message (its regions: regions[ptr[m]:ptr[m+1]]), the latest completion of what its rank last did on
    them."""
    if single:  # one region a message
        return touched[rank, regions]
    counts = np.diff(ptr)
    values = touched[np.repeat(rank, counts), regions]
    out = np.zeros(len(rank))
    has = counts > 0
    if has.any():
        out[has] = np.maximum.reduceat(values, ptr[:-1][has])
    return out


class Touches:
    """The data chain kept whole: when each rank last touched each piece (its group's completion)."""

    def __init__(self, ranks: int, regions: int, barriers: bool):
        self.touched = np.zeros((ranks, regions))
        self.barriers = barriers  # a plan with step barriers: a rank's whole stream is one region

    def regions(self, pieces: np.ndarray, stream: int) -> np.ndarray:
        return np.full(len(pieces), stream) if self.barriers else pieces

    def ready_send(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's sender last finished with its pieces."""
        return region_ready(self.touched, sh.src, sh.ptr, self.regions(pieces, stream), sh.single and not self.barriers)

    def ready_recv(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's receiver last finished with its pieces."""
        return region_ready(self.touched, sh.dst, sh.ptr, self.regions(pieces, stream), sh.single and not self.barriers)

    def update(self, sh: "Shape", pieces: np.ndarray, stream: int, send_done: np.ndarray,
               recv_done: np.ndarray) -> None:
        """This step's sides touched their pieces."""
        regions = self.regions(pieces, stream)
        if sh.single and sh.distinct and not self.barriers:
            self.touched[sh.src, regions] = send_done
            self.touched[sh.dst, regions] = recv_done
        else:
            touch(self.touched, sh.src, sh.dst, sh.ptr, regions, send_done, recv_done)


class Tokens:
    """The data chain of a plan whose pieces move as tokens (a ring's): every step moves each piece at most once,
    from the rank that received it last (or from anywhere, the first time) to the next. Every earlier touch of a
    piece is then a hop of its one journey, so a sender's last touch is its own receipt of it, and a receiver's
    earlier touches come before the flow that brings the piece back: per piece, its holder and when the holder was
    done receiving it is the whole state (Declined when a step breaks the discipline)."""

    def __init__(self, pieces: int, checked: bool = True):
        self.checked = checked  # False: the plan declares it (a generated table that says so; tested apart)
        self.holder = np.full(pieces, -1, dtype=np.int64)
        self.held_since = np.zeros(pieces)
        self.stamp = np.full(pieces, -1, dtype=np.int64)

    def ready_send(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's sender received its pieces (checking that it holds them, each moved once)."""
        if not self.checked:
            return self.held_since[pieces] if sh.single else \
                region_ready(self.held_since[None, :], np.zeros(len(sh.src), dtype=np.int64), sh.ptr, pieces, False)
        at = np.arange(len(pieces), dtype=np.int64)
        self.stamp[pieces] = at
        if np.any(self.stamp[pieces] != at):
            raise NotTokens("a piece moves twice in one step")
        senders = sh.src if sh.single else np.repeat(sh.src, np.diff(sh.ptr))
        holder = self.holder[pieces]
        if np.any((holder >= 0) & (holder != senders)):
            raise NotTokens("a piece sent by a rank that does not hold it")
        return region_ready(self.held_since[None, :], np.zeros(len(sh.src), dtype=np.int64), sh.ptr, pieces,
                            sh.single)

    def ready_recv(self, sh: "Shape", pieces: np.ndarray, stream: int) -> None:
        """Nothing beyond the flow's own arrival: the receiver's earlier touches are earlier hops of the pieces."""
        return None

    def update(self, sh: "Shape", pieces: np.ndarray, stream: int, send_done: np.ndarray,
               recv_done: np.ndarray) -> None:
        """The pieces' new holders, and when they were done receiving them."""
        if not self.checked and sh.single:
            self.held_since[pieces] = recv_done
        elif sh.single:
            self.holder[pieces], self.held_since[pieces] = sh.dst, recv_done
        else:
            counts = np.diff(sh.ptr)
            self.holder[pieces], self.held_since[pieces] = np.repeat(sh.dst, counts), np.repeat(recv_done, counts)


def touch(touched: np.ndarray, src, dst, ptr, regions, send_done, recv_done) -> None:
    """What this step's sides did to each (rank, region): the latest of its group, for the next step's sides (a
    step never sends and receives one piece at one rank: plans are validated so)."""
    counts = np.diff(ptr)
    key = np.concatenate([np.repeat(src, counts), np.repeat(dst, counts)]) * touched.shape[1] + \
        np.concatenate([regions, regions])
    done = np.concatenate([np.repeat(send_done, counts), np.repeat(recv_done, counts)])
    if not len(key):
        return
    order = np.argsort(key, kind="stable")
    key, done = key[order], done[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    touched.flat[key[starts]] = np.maximum.reduceat(done, starts)
