"""The parsed corpus on disk, in a format that cannot run code: one ``.npz`` of plain arrays + JSON.

Layout (format :data:`FORMAT`, version :data:`VERSION`), read with ``allow_pickle=False``:

* ``header`` — UTF-8 JSON bytes: format, version, corpus name and fingerprint, paper and edge
  counts, dropped-edge counts, and the dtype and shape of every array below;
* ``text`` — UTF-8 bytes of every string joined by NUL (``n_strings`` of them): all ids, all
  titles, abstracts, venues, urls, then every paper's ``n_authors`` authors, then the names and
  the values of every paper's ``n_external`` external ids;
* ``year``, ``month``, ``citation_count`` (int64, −2⁶² for None), ``months`` (int32);
* ``refs_indptr``/``refs_indices``, ``cites_indptr``/``cites_indices`` — int32 CSR structure of
  the citation graph and its transpose (every stored value is 1).

:func:`read` verifies the format, version and fingerprint, the CRC-32 of every
member (the zip container's, checked as each array is read in full), dtypes and
shapes against the header, and the structure of every array (CSR pointers
monotone and in range, string and paper counts consistent); it returns None on
any mismatch: a corrupt,
truncated, foreign or stale file is a cache miss (the caller rebuilds it),
never an error and never executed.
"""

from __future__ import annotations

import io
import json
import logging
import zipfile
from itertools import islice
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from . import atomic
from .corpus import Corpus
from .records import Paper

log = logging.getLogger(__name__)

FORMAT = "crase-corpus"
VERSION = 2
_ARRAYS = ("months", "refs_indptr", "refs_indices", "cites_indptr", "cites_indices",
           "n_strings", "n_authors", "n_external", "year", "month", "citation_count")
_INT_DTYPES = {"n_strings": np.int64, "year": np.int64, "month": np.int64, "citation_count": np.int64}
_NONE = -(2**62)  # stands for None in the year/month/citation_count columns


def _bytes_array(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.uint8)


def write(corpus: Corpus, path: Path) -> Path:
    """Save ``corpus`` at ``path`` atomically (unique temp name + rename: concurrent writers are safe).

    Raises ValueError (nothing written) when a string holds a NUL character, the separator of ``text``.
    """
    papers = corpus.papers
    strings = [p.id for p in papers] + [p.title for p in papers] + [p.abstract for p in papers]
    strings += [p.venue for p in papers] + [p.url for p in papers]
    strings += [a for p in papers for a in p.authors]
    strings += [name for p in papers for name, _ in p.external_ids]
    strings += [value for p in papers for _, value in p.external_ids]
    if any("\x00" in x for x in strings):
        raise ValueError("a paper field holds a NUL character")
    text = "\x00".join(strings).encode("utf-8", "surrogatepass")

    def ints(values: list[int | None]) -> np.ndarray:
        return np.array([_NONE if v is None else v for v in values], dtype=np.int64)

    arrays = {
        "months": np.asarray(corpus.months, dtype=np.int32),
        "refs_indptr": corpus.refs.indptr.astype(np.int32),
        "refs_indices": corpus.refs.indices.astype(np.int32),
        "cites_indptr": corpus.cites.indptr.astype(np.int32),
        "cites_indices": corpus.cites.indices.astype(np.int32),
        "n_strings": np.array([len(strings)], dtype=np.int64),
        "n_authors": np.array([len(p.authors) for p in papers], dtype=np.int32),
        "n_external": np.array([len(p.external_ids) for p in papers], dtype=np.int32),
        "year": ints([p.year for p in papers]),
        "month": ints([p.month for p in papers]),
        "citation_count": ints([p.citation_count for p in papers]),
    }
    header = {"format": FORMAT, "version": VERSION, "name": corpus.name, "fingerprint": corpus.fingerprint,
              "n_papers": len(corpus), "n_refs": int(corpus.refs.nnz), "dropped_edges": corpus.dropped_edges,
              "arrays": {k: [a.dtype.str, list(a.shape)] for k, a in arrays.items()}}
    buf = io.BytesIO()
    np.savez(buf, header=_bytes_array(json.dumps(header).encode("utf-8")), text=_bytes_array(text), **arrays)
    return atomic.write_bytes(path, buf.getvalue())


def _csr(indptr: np.ndarray, indices: np.ndarray, n: int) -> sp.csr_matrix | None:
    if indptr.shape != (n + 1,) or indices.ndim != 1 or indptr[0] != 0 or indptr[-1] != indices.size:
        return None
    if np.any(np.diff(indptr) < 0) or (indices.size and (indices.min() < 0 or indices.max() >= n)):
        return None
    data = np.ones(indices.size, dtype=np.float32)
    m = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    m.has_sorted_indices = True
    return m


def _groups(flat: list[str], counts: list[int]) -> list[tuple[str, ...]]:
    """``flat`` cut into consecutive tuples of ``counts[i]`` items."""
    if not flat:
        return [()] * len(counts)
    if len(flat) == len(counts):  # one item each (e.g. every paper has exactly one external id)
        return [(x,) for x in flat]
    it = iter(flat)
    return [tuple(islice(it, c)) for c in counts]


def _papers(text: str, arrays: dict[str, np.ndarray], n: int) -> tuple[list[Paper], list[str]]:
    """The papers and their ids, rebuilt column by column; ValueError when the columns do not fit together."""
    n_authors, n_external = arrays["n_authors"], arrays["n_external"]
    columns = [arrays[k] for k in ("year", "month", "citation_count")]
    if any(a.shape != (n,) for a in (n_authors, n_external, *columns)):
        raise ValueError("column lengths differ")
    if (n_authors < 0).any() or (n_external < 0).any():
        raise ValueError("negative counts")
    na, ne = int(n_authors.sum()), int(n_external.sum())
    strings = text.split("\x00")
    if len(strings) != 5 * n + na + 2 * ne or arrays["n_strings"].tolist() != [len(strings)]:
        raise ValueError("string count")
    ids, titles, abstracts, venues, urls = (strings[k * n : (k + 1) * n] for k in range(5))
    authors = _groups(strings[5 * n : 5 * n + na], n_authors.tolist())
    flat_names, flat_values = strings[5 * n + na : 5 * n + na + ne], strings[5 * n + na + ne :]
    external: list[tuple[tuple[str, str], ...]]
    if ne == n and (n_external == 1).all():  # the usual case: one external id a paper (its arXiv id)
        external = [((k, v),) for k, v in zip(flat_names, flat_values, strict=True)]
    else:
        names, values = _groups(flat_names, n_external.tolist()), _groups(flat_values, n_external.tolist())
        external = [tuple(zip(k, v, strict=True)) for k, v in zip(names, values, strict=True)]
    years, months, counts = ([None if v == _NONE else v for v in a.tolist()] if (a == _NONE).any() else a.tolist()
                             for a in columns)
    papers = list(map(Paper, ids, titles, abstracts, years, months, authors, venues, urls, external, counts))
    return papers, ids


def read(path: Path, fingerprint: str, name: str) -> Corpus | None:
    """The corpus saved at ``path`` if it is a valid cache of the corpus ``fingerprint``, else None."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if set(z.files) != {"header", "text", *_ARRAYS}:
                return None
            header = json.loads(z["header"].tobytes().decode("utf-8"))
            if not (isinstance(header, dict) and header.get("format") == FORMAT
                    and header.get("version") == VERSION and header.get("fingerprint") == fingerprint):
                return None
            blob = np.ascontiguousarray(z["text"]).data
            arrays = {k: z[k] for k in _ARRAYS}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as e:
        log.warning("cached corpus %s unreadable (%s); rebuilding it", path, type(e).__name__)
        return None
    if any(a.dtype != _INT_DTYPES.get(k, np.int32) or header.get("arrays", {}).get(k) != [a.dtype.str, list(a.shape)]
           for k, a in arrays.items()):
        log.warning("cached corpus %s does not match its header; rebuilding it", path)
        return None
    try:
        n = header.get("n_papers")
        if not isinstance(n, int) or n < 0:
            raise ValueError("paper count")
        papers, ids = _papers(str(blob, "utf-8", "surrogatepass"), arrays, n)
        refs = _csr(arrays["refs_indptr"], arrays["refs_indices"], n)
        cites = _csr(arrays["cites_indptr"], arrays["cites_indices"], n)
        months = arrays["months"]
        dropped = {str(k): int(v) for k, v in dict(header.get("dropped_edges") or {}).items()}
        if refs is None or cites is None or months.shape != (n,):
            raise ValueError("graph structure")
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        log.warning("cached corpus %s is malformed (%s); rebuilding it", path, e)
        return None
    index = dict(zip(ids, range(n), strict=True))
    if len(index) != n:
        log.warning("cached corpus %s repeats a paper id; rebuilding it", path)
        return None
    return Corpus(name=name, papers=papers, index=index, months=months, refs=refs, cites=cites,
                  fingerprint=fingerprint, dropped_edges=dropped)
