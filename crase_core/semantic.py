"""Semantic feedback: the search's top hit's sentence embedding as a second query (vector pseudo-relevance feedback).

A question rarely uses the words of every paper that answers it; the papers that answer it do read like
the one the search ranks first. With ``semantic_feedback_weight`` w > 0 and embeddings for the corpus,
each local search's list is fused with the papers closest to its top hit d₁ in the embedding space:

    s'(d) = s₁ · ((1 − w)·s(d)/s₁ + w·mm(cos(e_d, e_{d₁}))(d))

over C = the search's own list ∪ the ``len(list)`` visible papers nearest to d₁, best ``len(list)`` kept;
mm is min-max over C, a paper of C outside the search's list has s = 0, s₁ the list's best score (so the
fused list keeps the search's score scale, and every search hit keeps a positive score). The embeddings are all-MiniLM-L6-v2's (normalised, float16 on disk) of every
paper's title and abstract, computed once per corpus and shipped for the embedded one
(``assets/embeddings/``); no model runs at query time. Vector PRF as in Li et al., "Pseudo Relevance
Feedback with Deep Language Models and Dense Retrievers" (2021), with one feedback document.

A corpus without a matching embeddings file (another corpus, a changed one) runs without the feedback,
and says so (:func:`unavailable_reason`). Files are read with ``allow_pickle=False`` and checked
(shape, dtype, finite, unit length) before use.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .records import Paper
from .resources import embeddings_dir
from .sources.base import ScoredPaper
from .text_parts import SEMANTIC, added, parts_of, scaled

log = logging.getLogger(__name__)
MODEL_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class DocEmbeddings:
    """One unit-length row per corpus paper, in the corpus's order (float32 in memory)."""

    matrix: np.ndarray
    path: str = ""

    def cosines(self, row: int) -> np.ndarray:
        """Cosine of paper ``row`` with every paper (the rows are unit length)."""
        return self.matrix @ self.matrix[row]


def embeddings_file(name: str, fingerprint: str, folder: Path | None = None) -> Path:
    """Where the embeddings of corpus ``name`` with ``fingerprint`` are shipped."""
    return (folder or embeddings_dir()) / f"{name}-{fingerprint[:16]}-{MODEL_NAME}.f16.npy"


def read_matrix(path: Path, rows: int, dtypes: tuple[type, ...], what: str) -> np.ndarray | None:
    """The 2-D array at ``path`` if it is a plain (never pickled) array of ``rows`` rows in one of ``dtypes``,
    else None: a missing file silently, a broken one with a warning naming ``what``."""
    if not path.is_file():
        return None
    try:
        raw = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        log.warning("%s: %s is unreadable (%s)", what, path, e)
        return None
    if raw.ndim != 2 or raw.shape[0] != rows or raw.dtype not in dtypes or raw.shape[1] == 0:
        log.warning("%s: %s has shape %s and dtype %s, not %d rows of %s", what, path, raw.shape, raw.dtype, rows,
                    "/".join(np.dtype(t).name for t in dtypes))
        return None
    return raw


def load_embeddings(path: Path, rows: int) -> DocEmbeddings | None:
    """The embeddings at ``path`` if they are a finite float array of ``rows`` unit-length rows, else None
    (a missing file silently; a broken one with a warning: the search then runs without the feedback)."""
    raw = read_matrix(path, rows, (np.float16, np.float32), "semantic feedback off")
    if raw is None:
        return None
    matrix = np.ascontiguousarray(raw, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1)
    if not np.all(np.isfinite(matrix)) or np.abs(norms - 1).max() > 1e-2:
        log.warning("semantic feedback off: %s holds non-finite or non-normalised rows", path)
        return None
    return DocEmbeddings(matrix, str(path))


@lru_cache(maxsize=4)
def shipped_embeddings(name: str, fingerprint: str, rows: int) -> DocEmbeddings | None:
    """The shipped embeddings of a corpus (one load per process), or None."""
    return load_embeddings(embeddings_file(name, fingerprint), rows)


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def feedback_fuse(results: Sequence[ScoredPaper], embeddings: DocEmbeddings, row_of: Mapping[str, int],
                  papers: Sequence[Paper], visible: np.ndarray, weight: float) -> list[ScoredPaper]:
    """``results`` (best first) fused with the papers nearest to its top hit (module docstring), as many
    as ``results``, best first (ties by id). ``row_of`` maps a paper id to its corpus row, ``papers`` is the
    corpus's papers by row. ``results`` itself when ``weight`` is 0, the list is empty or its top hit has
    no row. Pure."""
    if weight <= 0 or not results or results[0].paper.id not in row_of:
        return list(results)
    limit = len(results)
    top = max(r.score for r in results)
    if top <= 0:
        return list(results)
    sims = embeddings.cosines(row_of[results[0].paper.id])
    candidates = np.flatnonzero(visible)
    if candidates.size > limit:
        candidates = candidates[np.argpartition(-sims[candidates], limit - 1)[:limit]]
    by_id: dict[str, Paper] = {r.paper.id: r.paper for r in results}
    for i in candidates.tolist():
        by_id.setdefault(papers[i].id, papers[i])
    ids = list(by_id)
    lexical = {r.paper.id: r.score for r in results}
    lex = np.array([lexical.get(pid, 0.0) for pid in ids], dtype=np.float64) / top
    sem = _minmax(sims[np.array([row_of[pid] for pid in ids], dtype=np.int64)].astype(np.float64))
    fused = top * ((1.0 - weight) * lex + weight * sem)
    order = sorted(range(len(ids)), key=lambda k: (-float(fused[k]), ids[k]))[:limit]
    before = {r.paper.id: parts_of(r.parts, r.score) for r in results}

    def parts(k: int) -> dict[str, float]:  # the search's parts scaled by 1 − w, plus this one (text_parts)
        return added(scaled(before.get(ids[k], {}), 1.0 - weight), SEMANTIC, float(top * weight * sem[k]))

    return [ScoredPaper(by_id[ids[k]], float(fused[k]), parts(k)) for k in order if fused[k] > 0.0]
