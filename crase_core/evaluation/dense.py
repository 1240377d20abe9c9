"""The dense baseline: all-MiniLM-L6-v2 cosine similarity over the whole (visible) corpus.

Runs on the on-device model (:mod:`crase_core.encoder`: onnxruntime, no PyTorch). The corpus side is the
corpus's own all-MiniLM-L6-v2 embeddings when it has them (``crase corpus embed``, or the shipped hep-th
file); otherwise every paper's title and abstract is embedded once per corpus fingerprint and kept under the
cache dir as a plain ``.npy`` (never pickled).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import numpy as np

from crase_core import atomic
from crase_core.cache import cache_root
from crase_core.errors import InputError
from crase_core.retrieval.semantic import MODEL_NAME, read_matrix
from crase_core.store.embedding_files import embed_text

log = logging.getLogger(__name__)


def dense_available() -> bool:
    """Whether the on-device model loads here."""
    from crase_core.encoder import unavailable_reason

    return unavailable_reason() is None


def _load_model() -> Any:
    from crase_core.encoder import EncoderUnavailable, load_encoder

    try:
        return load_encoder()
    except EncoderUnavailable as e:
        raise InputError(f"the dense baseline cannot run: {e}") from None


def _load_cached(path: Path, rows: int) -> np.ndarray | None:
    """The cached embeddings at ``path`` if they are a plain float32 array with one row per paper, else None."""
    return read_matrix(path, rows, (np.float32,), "dense embedding cache (recomputing it)")


def _corpus_vectors(source: Any, rows: int) -> np.ndarray | None:
    """The corpus's own all-MiniLM-L6-v2 rows (float32), if it has them."""
    lookup = getattr(source, "semantic", None)
    emb = getattr(lookup, "embeddings", None)
    manifest = getattr(emb, "manifest", None)
    from crase_core.retrieval.dense import model_name

    if emb is None or manifest is None or model_name(manifest.model) != model_name(MODEL_NAME):
        return None
    if emb.matrix.shape != (rows, 384):
        return None
    return np.asarray(emb.matrix, dtype=np.float32)


class DenseIndex:
    """Normalised embeddings of every corpus paper; ``search`` ranks the source's visible ones."""

    def __init__(self, source: Any, batch_size: int = 64, progress: bool = True):
        corpus = getattr(source, "corpus", None)
        if corpus is None:
            raise InputError("the dense baseline runs over a local corpus only")
        self.model = _load_model()
        self.ids = [p.id for p in corpus.papers]
        own = _corpus_vectors(source, len(self.ids))
        if own is not None:
            self.emb = own
            return
        path = Path(cache_root()) / "dense" / f"{corpus.name}-{corpus.fingerprint[:16]}-{MODEL_NAME}.npy"
        cached = _load_cached(path, len(self.ids))
        if cached is not None:
            self.emb = cached
            return
        texts = [embed_text(p) for p in corpus.papers]
        log.info("embedding %d papers with %s on this machine (once per corpus)", len(texts), MODEL_NAME)
        self.emb = self.model.encode(texts, batch_size=batch_size)
        buf = io.BytesIO()
        np.save(buf, self.emb, allow_pickle=False)
        try:  # a unique temp name and an atomic rename: concurrent first runs never share a temp file
            atomic.write_bytes(path, buf.getvalue())
        except InputError as e:
            log.warning("dense embeddings not cached (%s); using them from memory", e)

    def search(self, query: str, k: int, source: Any) -> list[str]:
        """Top-k visible papers by cosine similarity to ``query`` (ties by corpus row)."""
        from crase_core.retrieval.dense import nearest_rows

        sims = self.emb @ self.model.encode([query])[0].astype(np.float32)
        visible = getattr(source, "visible", None)
        rows = nearest_rows(sims, np.ones(len(sims), dtype=bool) if visible is None else np.asarray(visible), k)
        return [self.ids[i] for i in rows]
