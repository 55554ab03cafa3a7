"""PowerSGD (Vogels et al., NeurIPS'19, Algorithm 1): each gradient matrix M (a tensor viewed as rows x the rest) plus
its error-feedback memory is approximated at rank r by one step of subspace iteration, warm-started from the last
iteration's Q: P = M Q is summed by the algorithm's all-reduce, orthogonalized, Q = M^T P is summed by a second
all-reduce, and every rank applies P Q^T / n. Both factors add on the way, so it composes with any summing plan;
tensors that a rank-r pair would not shrink (biases, small layers) travel uncompressed with the first all-reduce.
The memory is always on (the paper: without it PowerSGD does not reach SGD's accuracy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from workloads.codecs.base import NoCompression
from workloads.option_fields import option

Shape = Tuple[int, ...]
Q_SEED = 20191208  # every rank starts from the same Q (NeurIPS'19's first day): the factors must add up


@dataclass(frozen=True)
class PowerOptions:
    """The rank of PowerSGD's factors."""

    powersgd_rank: int = option(2, "powersgd: the rank r of each gradient matrix's factors (r x (rows + columns) "
                                "values sent in place of rows x columns)", low=1, high=256, shapes_plan=True)


def matrix_of(shape: Shape) -> Tuple[int, int]:
    """(rows, columns) a tensor is viewed as: its first dimension by the rest (a vector: one row)."""
    rows = int(shape[0]) if len(shape) > 1 else 1
    return rows, int(np.prod(shape)) // max(1, rows)


def compressed(shape: Shape, rank: int) -> bool:
    """Whether a rank-r pair of factors is smaller than the tensor (a vector never is)."""
    rows, cols = matrix_of(shape)
    return len(shape) > 1 and rank * (rows + cols) < rows * cols


def phase_sizes(shapes: Sequence[Shape], rank: int) -> Tuple[List[int], List[int]]:
    """The element counts of the two all-reduces: the P factors and the uncompressed tensors, then the Q factors."""
    first, second, plain = [], [], []
    for shape in shapes:
        rows, cols = matrix_of(shape)
        if compressed(shape, rank):
            first.append(rows * rank)
            second.append(cols * rank)
        else:
            plain.append(rows * cols)
    return first + plain, second


def orthogonalize(p: np.ndarray) -> np.ndarray:
    """Gram-Schmidt on P's columns, in place (a zero column stays zero), as the paper's reference code."""
    for i in range(p.shape[1]):
        column = p[:, i]
        norm = float(np.linalg.norm(column))
        column /= norm if norm > 0 else 1.0
        if i + 1 < p.shape[1]:
            p[:, i + 1:] -= np.outer(column, column @ p[:, i + 1:])
    return p


class PowerSGD(NoCompression):
    """Rank-r PowerSGD with warm start and error feedback: first(flat) gives the first all-reduce's vector,
    second(summed) the second's, finish(summed, workers) the averaged update; the memory is renewed in finish."""

    lowrank = True  # two all-reduces a synchronization (PlanSync runs them; the flow model and theory too)
    exact_size = True
    check = "sum"
    options = PowerOptions
    summary = "PowerSGD rank r: P = MQ and Q = M^T P summed by two all-reduces, r (rows + columns) values a matrix"

    @staticmethod
    def wire_fraction(plan, piece_elems: Sequence[int]) -> float:
        """Its values are fp32: the fraction is in how few there are (phase_sizes), not in their width."""
        return 1.0

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None, shapes: Optional[Sequence[Shape]] = None):
        self.opts = options if options is not None else self.options()
        self.rank = self.opts.powersgd_rank
        self.shapes = [tuple(int(d) for d in s) for s in (shapes or [(n,) for n in layer_sizes])]
        if [int(np.prod(s)) for s in self.shapes] != [int(n) for n in layer_sizes]:
            raise ValueError("PowerSGD's tensor shapes do not match the layer sizes")
        self.bounds = np.cumsum([0] + [int(n) for n in layer_sizes])
        self.matrices = [i for i, s in enumerate(self.shapes) if compressed(s, self.rank)]
        self.plain = [i for i, s in enumerate(self.shapes) if not compressed(s, self.rank)]
        self.sizes = phase_sizes(self.shapes, self.rank)
        total = int(self.bounds[-1])
        self.memory = np.zeros(total, np.float32)
        self.vector = np.zeros(total, np.float32)  # gradient + memory; buffers reused (fresh tens of MB fault pages)
        self.out = np.zeros(total, np.float32)
        self.q = {i: np.random.default_rng([Q_SEED, i]).standard_normal((matrix_of(self.shapes[i])[1], self.rank))
                  .astype(np.float32) for i in self.matrices}
        self.m = {}  # this iteration's M of each matrix (gradient + memory)
        self.p = {}
        self.mine = {}  # this rank's own Q = M^T P of each matrix
        self.residual_norm = 0.0

    @classmethod
    def phase_sizes(cls, shapes: Sequence[Shape], options=None) -> Tuple[List[int], List[int]]:
        """The element counts of its two all-reduces for tensors of these shapes."""
        return phase_sizes(shapes, (options or cls.options()).powersgd_rank)

    @classmethod
    def words(cls, shapes: Sequence[Shape], options=None) -> int:
        """Values a rank puts into the two all-reduces (fp32 each)."""
        first, second = cls.phase_sizes(shapes, options)
        return sum(first) + sum(second)

    @classmethod
    def payload_fraction(cls, shapes: Sequence[Shape], options=None) -> float:
        """The two all-reduces' values over the gradient's."""
        return cls.words(shapes, options) / max(1, sum(int(np.prod(s)) for s in shapes))

    def _matrix(self, vector: np.ndarray, i: int) -> np.ndarray:
        """Tensor i of a layer-major vector as its matrix view."""
        return vector[self.bounds[i]:self.bounds[i + 1]].reshape(matrix_of(self.shapes[i]))

    def first(self, flat: np.ndarray) -> np.ndarray:
        """M = gradient + memory; the first all-reduce's vector: each matrix's P = M Q, then the plain tensors."""
        vector = np.add(flat, self.memory, out=self.vector)
        self.m = {i: self._matrix(vector, i) for i in self.matrices}
        self.plain_values = [vector[self.bounds[i]:self.bounds[i + 1]] for i in self.plain]
        parts = [(self.m[i] @ self.q[i]).ravel() for i in self.matrices]
        return np.concatenate(parts + self.plain_values).astype(np.float32) if parts or self.plain else \
            np.zeros(0, np.float32)

    def second(self, summed: np.ndarray) -> np.ndarray:
        """The second all-reduce's vector: each matrix's Q = M^T P, P the summed factor orthogonalized."""
        self.summed_first = summed.copy()
        at, parts = 0, []
        for i in self.matrices:
            rows = matrix_of(self.shapes[i])[0]
            self.p[i] = orthogonalize(self.summed_first[at:at + rows * self.rank].reshape(rows, self.rank)
                                      .astype(np.float32))
            at += rows * self.rank
            self.mine[i] = self.m[i].T @ self.p[i]
            parts.append(self.mine[i].ravel())
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)

    def finish(self, summed: np.ndarray, workers: int) -> np.ndarray:
        """The update every rank applies: P Q_sum^T / n for each matrix, the plain tensors' sum / n; the memory keeps
        M - P Q_mine^T (what this rank's approximation left out), Q_sum / n warm-starts the next iteration."""
        out, at = self.out, 0
        for i in self.matrices:
            cols = matrix_of(self.shapes[i])[1]
            q_sum = summed[at:at + cols * self.rank].reshape(cols, self.rank)
            at += cols * self.rank
            update, memory = self._matrix(out, i), self._matrix(self.memory, i)
            np.matmul(self.p[i], q_sum.T, out=update)
            np.divide(update, np.float32(workers), out=update)
            np.matmul(self.p[i], self.mine[i].T, out=memory)
            np.subtract(self.m[i], memory, out=memory)
            if q_sum.any():  # a layer without gradient this time keeps its Q (a zero Q would stay zero)
                self.q[i] = (q_sum / np.float32(workers)).astype(np.float32)
        at = sum(self.sizes[0][:len(self.matrices)])
        for i in self.plain:
            n = self.bounds[i + 1] - self.bounds[i]
            out[self.bounds[i]:self.bounds[i + 1]] = self.summed_first[at:at + n] / np.float32(workers)
            at += n
        self.residual_norm = float(np.linalg.norm(self.memory))
        return out

    def decompress(self, summed: np.ndarray, ctx, workers: int) -> np.ndarray:
        """finish(), as the summing codecs' decompress is called."""
        return self.finish(summed, workers)
