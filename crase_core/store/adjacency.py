"""A citation graph direction as plain CSR arrays (every value 1): what the store, the expansion and the anchor
text need of it — a row, the rows' lengths, a product with a vector, the edges among a set of papers — without
``scipy.sparse``, whose import costs more than a cached query's whole run (issue 31). :meth:`Adjacency.tocsr`
gives the scipy matrix for the tools that want one (it imports scipy then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp


class Adjacency:
    """n × n 0/1 matrix in CSR form: ``indptr`` (n + 1) and ``indices`` (ascending within a row), both possibly
    memory-mapped; nothing is copied on open."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, n: int):
        self.indptr = indptr
        self.indices = indices
        self.shape = (n, n)
        self.has_sorted_indices = True

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def row(self, i: int) -> np.ndarray:
        """Ascending columns of row ``i``."""
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def row_lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        """Per row, the sum of ``x`` over its columns (float64; exact for the integer-valued vectors the
        pipeline multiplies, whatever the order of the sums)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros(self.shape[0])
        starts = np.flatnonzero(np.diff(self.indptr))
        if starts.size:
            out[starts] = np.add.reduceat(x[self.indices], self.indptr[starts])
        return out

    def columns_of(self, rows: np.ndarray) -> np.ndarray:
        """The columns of the distinct ``rows``, concatenated: a column appears once per row that holds it, so
        ``np.bincount(m.columns_of(r), minlength=n)`` is the transpose's product with r's 0/1 vector, in time
        proportional to r's entries rather than the whole matrix's."""
        rows = np.asarray(rows, dtype=np.int64)
        lo = np.asarray(self.indptr[rows], dtype=np.int64)
        lengths = np.asarray(self.indptr[rows + 1], dtype=np.int64) - lo
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64)
        offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths - lo, lengths)
        return np.asarray(self.indices[offsets], dtype=np.int64)

    def edges_within(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The entries (u, v) with both ends in the ascending ``positions``, as (row, col) indexes into it, in
        row order and ascending columns within a row."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        lo = np.asarray(self.indptr[positions], dtype=np.int64)
        lengths = np.asarray(self.indptr[positions + 1], dtype=np.int64) - lo
        owner = np.repeat(np.arange(positions.size, dtype=np.int64), lengths)
        offsets = np.arange(owner.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        cols = np.asarray(self.indices[lo[owner] + offsets], dtype=np.int64)
        at = np.searchsorted(positions, cols)
        inside = at < positions.size
        inside[inside] = positions[at[inside]] == cols[inside]
        return owner[inside], at[inside]

    def tocsr(self) -> sp.csr_matrix:
        """The scipy matrix (float32 ones), for checks and tools."""
        import scipy.sparse as sp

        ones = np.broadcast_to(np.float32(1.0), (self.indices.size,))  # no memory: every value is 1
        m = sp.csr_matrix((ones, self.indices, self.indptr), shape=self.shape, copy=False)
        m.has_sorted_indices = True
        return m

    def tocoo(self) -> sp.coo_matrix:
        return self.tocsr().tocoo()


class CitationGraph(Protocol):
    """What a corpus's ``refs``/``cites`` offer: :class:`Adjacency`, or a store with appended segments'
    :class:`~crase_core.store.segments.GraphUnion`."""

    shape: tuple[int, int]

    @property
    def nnz(self) -> int: ...

    def row(self, i: int) -> np.ndarray: ...

    def row_lengths(self) -> np.ndarray: ...

    def __matmul__(self, x: np.ndarray) -> np.ndarray: ...

    def columns_of(self, rows: np.ndarray) -> np.ndarray: ...

    def edges_within(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def tocsr(self) -> sp.csr_matrix: ...

    def tocoo(self) -> sp.coo_matrix: ...
