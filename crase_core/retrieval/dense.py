"""The question embedded: a dense candidate list (question vector · corpus vectors) fused with the text search.

Where a local corpus has paper embeddings (:mod:`crase_core.retrieval.semantic`), the question is embedded by
the on-device model (:mod:`crase_core.encoder`, loaded lazily and at most once per process) and every visible
paper gets its cosine with it, c(d) = e_q · e_d. That list is fused with a text-search list ``results`` (best
first, scores s > 0) by the same affine blend semantic feedback uses:

    s'(d) = s₁ · ((1 − w)·s(d)/s₁ + w·mm(c)(d))

over C = ``results`` ∪ the ``len(results)`` visible papers nearest the question, best ``len(results)`` kept;
mm is min-max over C, a paper of C outside ``results`` has s = 0, s₁ the list's best score. A search that found
nothing stays empty: the question's nearest papers alone are not taken as an answer (a question none of whose
words the corpus has — a typo, another language — says so instead of listing whatever is nearest). The search's
score parts are scaled by (1 − w) and the dense
term is one more part, :data:`~crase_core.retrieval.text_parts.QUESTION_EMBEDDING`, so "why this rank" names
the dense share. The blend is the ``interp-w`` hybrid measured in docs/dense.md, with the search's own scale.

Three knobs use it, each 0 = off (:class:`~crase_core.settings.pipeline.PipelineSettings`):
``dense_seed_weight`` (the question's own search, whose top hits join the seeds), ``dense_restart_weight``
(the list the walk restarts from) and ``dense_fusion_weight`` (the list the text candidates, the final
fusion and the text floor read).

The question's vector is cached in the result cache, keyed by the corpus vectors' model and dimension and
the question's text (:class:`QuestionEmbedder`): a repeated question never loads the model. A corpus without
vectors, vectors of another model, or a model that cannot load: the run ranks by words and says why
(:class:`DenseQuestion` ``None`` with a note and a warning).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from crase_core.cache import ResultCache, result_key
from crase_core.paper_source import PaperSource, ScoredPaper
from crase_core.records import Paper
from crase_core.retrieval.semantic import DocEmbeddings, Lookup
from crase_core.retrieval.text_parts import QUESTION_EMBEDDING, added, parts_of, scaled

log = logging.getLogger(__name__)

#: the version of the question-vector cache entries (part of their key)
VECTOR_VERSION = 1


class Encoder(Protocol):
    """What :func:`crase_core.encoder.load_encoder` returns: unit-length float32 rows for texts."""

    model_id: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray: ...


class DenseUnavailable(Exception):
    """Why the question cannot be embedded (one line: the model is missing, damaged or of another kind)."""


def default_loader() -> Encoder:
    """The on-device encoder (imported here, never at module import: the cached path does not load it)."""
    from crase_core.encoder import EncoderUnavailable, load_encoder

    try:
        return load_encoder()
    except EncoderUnavailable as e:
        raise DenseUnavailable(str(e)) from None


def default_identity() -> str:
    """What the on-device model's vectors are, for the cache key, without loading it: its pinned model id, or
    the file and hash ``$CRASE_MINILM_ONNX`` / ``$CRASE_MINILM_ONNX_SHA256`` name instead."""
    from crase_core.encoder import MODEL_ID
    from crase_core.settings import environment

    override, sha = environment.minilm_onnx_override()
    return MODEL_ID if override is None else f"{MODEL_ID}|{override}|{sha or ''}"


def model_name(model: str) -> str:
    """A model's name for comparison: the last path part, lower case, without a quantisation or format suffix
    (``sentence-transformers/all-MiniLM-L6-v2`` and ``all-minilm-l6-v2-int8.onnx`` are both
    ``all-minilm-l6-v2``)."""
    name = model.strip().rstrip("/").rsplit("/", 1)[-1].lower()
    name = re.sub(r"\.onnx$", "", name)
    return re.sub(r"([-_.](int8|uint8|q8|quantized|onnx|fp16|f16|fp32))+$", "", name)


@dataclass
class QuestionEmbedder:
    """Embeds a question with the on-device model, through the result cache (``cache``; None: no cache).

    ``load`` gives the encoder (default: :func:`default_loader`; tests pass a small deterministic one); it is
    called at most once per embedder, and only on a cache miss. ``identity`` names the encoder's vectors
    without loading it (default: :func:`default_identity`): the cache key is that identity, the corpus model
    and dimension, and the question's text."""

    cache: ResultCache | None = None
    load: Callable[[], Encoder] = default_loader
    identity: Callable[[], str] = default_identity
    _encoder: Encoder | None = None
    _failed: str | None = None
    loads: int = 0  # how many times the model was asked for (0 on the cached path)

    def vector(self, text: str, model: str, dim: int) -> np.ndarray:
        """The unit vector of ``text`` from a model that wrote the corpus vectors ``model`` of ``dim``
        dimensions; :class:`DenseUnavailable` when the model cannot load or is another model."""
        key = result_key("question-vector", f"{self.identity()}|{model_name(model)}/{dim}|v{VECTOR_VERSION}", text)
        if self.cache is not None:
            hit = self.cache.get_many([key]).get(key)
            vec = _as_vector(hit, dim)
            if vec is not None:
                return vec
        encoder = self._get()
        if model_name(getattr(encoder, "model_name", encoder.model_id)) != model_name(model) or int(encoder.dim) != dim:
            raise DenseUnavailable(f"the corpus vectors are from {model} ({dim} dimensions), the on-device model is "
                                   f"{encoder.model_id} ({encoder.dim}): the question cannot be compared with them")
        rows = np.asarray(encoder.encode([text]), dtype=np.float32)
        if rows.shape != (1, dim) or not np.all(np.isfinite(rows)):
            raise DenseUnavailable(f"the on-device model returned an array of shape {rows.shape}, not one vector "
                                   f"of {dim}")
        vec = rows[0] / max(float(np.linalg.norm(rows[0])), 1e-12)
        if self.cache is not None:
            self.cache.set_many({key: [float(x) for x in vec]})
        return vec

    def _get(self) -> Encoder:
        if self._failed is not None:
            raise DenseUnavailable(self._failed)
        if self._encoder is None:
            self.loads += 1
            try:
                self._encoder = self.load()
            except DenseUnavailable as e:
                self._failed = str(e)
                raise
        return self._encoder


def _as_vector(value: Any, dim: int) -> np.ndarray | None:
    """A cached vector, or None when the entry is absent or not ``dim`` finite numbers (a miss)."""
    if not isinstance(value, list) or len(value) != dim:
        return None
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        return None
    norm = float(np.linalg.norm(vec)) if np.all(np.isfinite(vec)) else 0.0
    return vec / norm if norm > 0 else None


@dataclass(frozen=True)
class DenseQuestion:
    """The question's cosine with every corpus paper (``cosines``, by corpus row) and the visible papers
    nearest it (``nearest``: rows, best first; ties by row)."""

    cosines: np.ndarray
    nearest: np.ndarray


def nearest_rows(cosines: np.ndarray, visible: np.ndarray, limit: int) -> np.ndarray:
    """The ``limit`` visible rows of highest cosine, best first (ties by row). Pure."""
    rows = np.flatnonzero(visible)
    if limit <= 0 or rows.size == 0:
        return np.zeros(0, dtype=np.int64)
    if rows.size > limit:
        rows = rows[np.argpartition(-cosines[rows], limit - 1)[:limit]]
    return rows[np.lexsort((rows, -cosines[rows]))]


def wanted(settings: Any) -> bool:
    """Whether ``settings`` embed the question anywhere (any of the three weights > 0)."""
    return max(settings.dense_seed_weight, settings.dense_restart_weight, settings.dense_fusion_weight) > 0


@dataclass(frozen=True)
class DenseStatus:
    """What :func:`embed_question` found: the question's scores (None: words only), one sentence for the run,
    and a warning when the run fell back to words although the question was to be embedded."""

    dense: DenseQuestion | None
    note: str
    warning: str | None = None


def embed_question(query: str, source: PaperSource, embedder: QuestionEmbedder | None, limit: int) -> DenseStatus:
    """The question's dense scores over ``source``'s corpus (module docstring), or why not."""
    lookup = getattr(source, "semantic", None)
    corpus = getattr(source, "corpus", None)
    visible = getattr(source, "visible", None)
    if not isinstance(lookup, Lookup) or corpus is None or visible is None:
        return DenseStatus(None, f"question not embedded: the source {source.name} has no corpus vectors to "
                           "compare it with")
    emb: DocEmbeddings | None = lookup.embeddings
    if emb is None:
        why = lookup.problem or lookup.note.split(": ", 1)[-1]
        if lookup.problem is not None:  # a file that was there and was refused: a fall-back worth a warning,
            # in a few words (the semantic-feedback warning already names the file and why)
            note = "question not embedded (ranked by words): the corpus's embeddings file was refused (see the " \
                   "semantic-feedback note)"
            return DenseStatus(None, note, note)
        # a corpus never embedded: said once, by the note (the semantic-feedback line says how to embed it)
        return DenseStatus(None, f"question not embedded (ranked by words): {why}")
    if embedder is None:
        return DenseStatus(None, "question not embedded: no encoder was given to this run")
    model = emb.manifest.model if emb.manifest is not None else ""
    dim = int(emb.matrix.shape[1])
    try:
        vec = embedder.vector(query, model, dim)
    except DenseUnavailable as e:
        note = f"question not embedded (ranked by words): {e}"
        return DenseStatus(None, note, note)
    cosines = emb.matrix @ vec
    return DenseStatus(DenseQuestion(cosines, nearest_rows(cosines, visible, limit)),
                       f"question embedded: {model or 'the corpus model'} ({dim} dimensions), fused with the search")


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def dense_fuse(results: Sequence[ScoredPaper], dense: DenseQuestion, weight: float, row_of: Mapping[str, int],
               papers: Sequence[Paper], limit: int | None = None) -> list[ScoredPaper]:
    """``results`` (best first) fused with the question's nearest papers (module docstring), at most ``limit``
    (default ``len(results)``), best first (ties by id). ``row_of`` maps an id to its corpus row, ``papers`` the
    corpus's papers by row; a result without a row gets the lowest cosine of C. ``results`` itself when
    ``weight`` is 0 or ``results`` has no positive score. Pure."""
    top = max((r.score for r in results), default=0.0)
    limit = limit if limit is not None else len(results)
    if weight <= 0 or top <= 0 or limit <= 0:
        return list(results)
    scale = top
    by_id: dict[str, Paper] = {r.paper.id: r.paper for r in results}
    for i in dense.nearest[:limit].tolist():
        by_id.setdefault(papers[i].id, papers[i])
    ids = list(by_id)
    if not ids:
        return []
    lexical = {r.paper.id: r.score for r in results}
    lex = np.array([max(lexical.get(pid, 0.0), 0.0) for pid in ids], dtype=np.float64) / scale
    cos = np.array([float(dense.cosines[row_of[pid]]) if pid in row_of else np.nan for pid in ids])
    cos = np.where(np.isnan(cos), np.nanmin(cos) if np.any(~np.isnan(cos)) else 0.0, cos)
    sem = _minmax(cos)
    fused = scale * ((1.0 - weight) * lex + weight * sem)
    order = sorted(range(len(ids)), key=lambda k: (-float(fused[k]), ids[k]))[:limit]
    before = {r.paper.id: parts_of(r.parts, r.score) for r in results}

    def parts(k: int) -> dict[str, float]:  # the search's parts scaled by 1 − w, plus the dense term
        return added(scaled(before.get(ids[k], {}), 1.0 - weight), QUESTION_EMBEDDING, float(scale * weight * sem[k]))

    return [ScoredPaper(by_id[ids[k]], float(fused[k]), parts(k)) for k in order if fused[k] > 0.0]


def fuse_for(source: PaperSource, results: Sequence[ScoredPaper], dense: DenseQuestion | None,
             weight: float) -> list[ScoredPaper]:
    """:func:`dense_fuse` of ``results`` over ``source``'s corpus; ``results`` itself without dense scores."""
    corpus = getattr(source, "corpus", None)
    if dense is None or weight <= 0 or corpus is None:
        return list(results)
    return dense_fuse(results, dense, weight, corpus.index, corpus.papers)
