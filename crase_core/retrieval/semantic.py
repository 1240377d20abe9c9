"""Semantic feedback: the search's top hit's sentence embedding as a second query (vector pseudo-relevance feedback).

A question rarely uses the words of every paper that answers it; the papers that answer it do read like
the one the search ranks first. With ``semantic_feedback_weight`` w > 0 and embeddings for the corpus,
each local search's list is fused with the papers closest to its top hit d₁ in the embedding space:

    s'(d) = s₁ · ((1 − w)·s(d)/s₁ + w·mm(cos(e_d, e_{d₁}))(d))

over C = the search's own list ∪ the ``len(list)`` visible papers nearest to d₁, best ``len(list)`` kept;
mm is min-max over C, a paper of C outside the search's list has s = 0, s₁ the list's best score (so the
fused list keeps the search's score scale, and every search hit keeps a positive score). No model runs for
it: the top hit's own row is the second query (the question itself is embedded by
:mod:`crase_core.retrieval.dense`). Vector PRF as in Li et al., "Pseudo Relevance Feedback
with Deep Language Models and Dense Retrievers" (2021), with one feedback document.

Embeddings of a local corpus (:func:`find_embeddings`): written by ``crase corpus embed`` beside the corpus
files (from any OpenAI-compatible embeddings endpoint, or the bundled all-MiniLM-L6-v2), or shipped for the
embedded corpus (``assets/embeddings/``, all-MiniLM-L6-v2) — one float16 row per paper of its title and
abstract, with a manifest and checksum (:mod:`crase_core.store.embedding_files`). A corpus without them, or with a
file that fails a check (another corpus, a changed one, a damaged or reordered file), runs without the
feedback and its run says so and how to turn it on (:attr:`Lookup.note`); nothing is unpickled.

A remote source that carries vectors of its own (Semantic Scholar's SPECTER2, ``embedding.specter_v2``)
gets the same fusion over its search list alone (:func:`rerank_fuse`): the API cannot be searched by a
vector, so no paper is added, the list is re-ordered.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from crase_core.cache import cache_root
from crase_core.paper_source import ScoredPaper
from crase_core.records import Paper
from crase_core.resources import corpus_dir, embeddings_dir
from crase_core.retrieval.text_parts import SEMANTIC, added, parts_of, scaled
from crase_core.store.embedding_files import (
    EmbeddingsProblem,
    Manifest,
    manifest_path,
    read_embeddings,
    read_embeddings_mapped,
    read_header,
    read_manifest,
)

log = logging.getLogger(__name__)
MODEL_NAME = "all-MiniLM-L6-v2"
#: the embedded corpus's folder (its embeddings are shipped; commands name no folder for it)
DEFAULT_FOLDER = corpus_dir("hepth")


@dataclass(frozen=True)
class DocEmbeddings:
    """One unit-length row per corpus paper, in the corpus's order (float32 in memory); ``manifest`` says what
    they are (:mod:`crase_core.store.embedding_files`), ``path`` where they were read."""

    matrix: np.ndarray
    path: str = ""
    manifest: Manifest | None = None

    def cosines(self, row: int) -> np.ndarray:
        """Cosine of paper ``row`` with every paper (the rows are unit length)."""
        return self.matrix @ self.matrix[row]

    def describe(self) -> str:
        """What these embeddings are, for the run's note (model, dimensions, where from, papers)."""
        if self.manifest is None:
            return f"{self.matrix.shape[1]}-dimensional embeddings given to the source"
        return f"{self.manifest.describe()}, {self.manifest.count:,} papers"


@dataclass(frozen=True)
class Lookup:
    """What :func:`find_embeddings` found for a corpus: the verified embeddings, or None and why.

    ``problem``: a file was there and was refused (one line: which file and why; the run warns);
    ``note``: one sentence for the run (what semantic feedback reads, or why it is off and how to turn it on).
    """

    embeddings: DocEmbeddings | None
    note: str
    problem: str | None = None


def embeddings_file(name: str, fingerprint: str, folder: Path | None = None) -> Path:
    """Where the embeddings of corpus ``name`` with ``fingerprint`` are shipped."""
    return (folder or embeddings_dir()) / f"{name}-{fingerprint[:16]}-{MODEL_NAME}.f16.npy"


def folder_embeddings_file(folder: Path) -> Path:
    """Where ``crase corpus embed`` writes the embeddings of the corpus in ``folder`` (beside its files)."""
    return folder / "embeddings" / "embeddings.f16.npy"


def cache_embeddings_file(folder: Path) -> Path:
    """Where ``crase corpus embed`` writes them when ``folder`` cannot be written (the cache, by folder path)."""
    key = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return cache_root() / "embeddings" / f"{folder.name}-{key}" / "embeddings.f16.npy"


def verified_copies() -> Path:
    """Where float32 copies of verified embeddings are kept for the next process to map (the cache)."""
    return cache_root() / "embeddings" / "verified"


def candidate_files(folder: Path | None, name: str, fingerprint: str) -> list[Path]:
    """The embeddings files a corpus may have, in the order they are looked for: written by ``crase corpus
    embed`` beside the corpus files or in the cache (when the folder is read-only), then shipped."""
    out = [folder_embeddings_file(folder), cache_embeddings_file(folder)] if folder is not None else []
    return [*out, embeddings_file(name, fingerprint)]


def embed_hint(folder: Path | None) -> str:
    """How to turn semantic feedback on for the corpus in ``folder`` (None: the embedded corpus)."""
    where = _where(folder)
    return (f"turn it on with `crase corpus embed{where}` ({MODEL_NAME} on this machine; or an OpenAI-compatible "
            "embeddings endpoint with --base-url URL --model NAME)")


def find_embeddings(folder: Path | None, name: str, fingerprint: str, rows: int, *, fresh: bool = False) -> Lookup:
    """The verified embeddings of the corpus ``name``/``fingerprint`` of ``rows`` papers (in ``folder``): the
    first of :func:`candidate_files` that exists decides — its rows when they pass every check of
    :func:`~crase_core.store.embedding_files.read_embeddings`, else none and the problem (never a broken file
    silently, never an exception). One read per process and version of the files (cached by their size and
    mtime; ``fresh``: read them again whatever the cache holds)."""
    stamp = tuple((str(p), _stamp(p)) for p in candidate_files(folder, name, fingerprint))
    args = (str(folder) if folder is not None else None, name, fingerprint, rows, stamp)
    return find_file.__wrapped__(*args) if fresh else find_file(*args)


def _stamp(path: Path) -> tuple[int, int, int, int]:
    """(size, mtime) of an embeddings file and its manifest; zeros for what is absent."""
    out: list[int] = []
    for p in (path, manifest_path(path)):
        try:
            st = p.stat()
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [0, 0]
    return out[0], out[1], out[2], out[3]


@lru_cache(maxsize=8)
def find_file(folder_name: str | None, name: str, fingerprint: str, rows: int, _stamp: tuple) -> Lookup:
    folder = Path(folder_name) if folder_name is not None else None
    hint = embed_hint(folder)
    for path in candidate_files(folder, name, fingerprint):
        if not (path.exists() or manifest_path(path).exists()):
            continue
        try:
            matrix, manifest = read_embeddings_mapped(path, rows=rows, fingerprint=fingerprint,
                                                      copies=verified_copies())
        except EmbeddingsProblem as e:
            problem = f"semantic feedback off: the embeddings {path} cannot be used: {e}; {rewrite_hint(folder, path)}"
            log.info("%s", problem)
            return Lookup(None, problem, problem)
        emb = DocEmbeddings(matrix, str(path), manifest)
        return Lookup(emb, f"semantic feedback on: {emb.describe()} (the papers nearest the top hit join its list)")
    stale = sorted(embeddings_dir().glob(f"{glob.escape(name)}-*-{MODEL_NAME}.f16.npy")) if not _where(folder) else []
    why = ("the shipped embeddings are for an earlier version of this corpus (papers were added since)"
           if stale else f"no embeddings for the corpus {name} (fingerprint {fingerprint[:16]})")
    return Lookup(None, f"semantic feedback off: {why}; {hint}")


def _where(folder: Path | None) -> str:
    """`` DIR`` for a command line about ``folder`` (nothing for the embedded corpus, the commands' default)."""
    if folder is None or folder.resolve() == DEFAULT_FOLDER.resolve():
        return ""
    return " " + shlex.quote(str(folder))


def rewrite_hint(folder: Path | None, path: Path) -> str:
    """How to replace the refused embeddings file ``path`` of the corpus in ``folder``."""
    where = _where(folder)
    try:
        m: Manifest | None = read_manifest(path)
    except EmbeddingsProblem:
        m = None
    how = ("--minilm" if m.source == "minilm" else f"--base-url {shlex.quote(m.base_url)} --model "
           f"{shlex.quote(m.model)}") if m is not None else "--base-url URL --model NAME (or --minilm)"
    if path.parent == embeddings_dir():
        return f"reinstall Crase to restore the shipped file, or write new ones with `crase corpus embed{where} {how}`"
    if path.is_dir():  # nothing is written over a directory: it goes first
        return f"remove that directory, then write them again with `crase corpus embed{where} {how}`"
    return f"write them again with `crase corpus embed{where} {how}`"


def load_embeddings(path: Path, rows: int, fingerprint: str) -> DocEmbeddings | None:
    """The verified embeddings at ``path`` (see :func:`find_embeddings`), or None with a warning saying why."""
    try:
        matrix, manifest = read_embeddings(path, rows=rows, fingerprint=fingerprint)
    except EmbeddingsProblem as e:
        log.warning("semantic feedback off: %s: %s", path, e)
        return None
    return DocEmbeddings(matrix, str(path), manifest)


def read_matrix(path: Path, rows: int, dtypes: tuple[type, ...], what: str) -> np.ndarray | None:
    """The 2-D array at ``path`` if it is a plain (never pickled) array of ``rows`` rows in one of ``dtypes``,
    else None: a missing file silently, a broken one with a warning naming ``what``. The header is checked
    against the file's size before anything is allocated (an empty file, a lying header)."""
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as f:
            header = read_header(f, path.stat().st_size)
    except (OSError, EmbeddingsProblem) as e:
        log.warning("%s: %s is unusable (%s)", what, path, e)
        return None
    if header.shape[0] != rows or header.dtype not in [np.dtype(t) for t in dtypes]:
        log.warning("%s: %s has shape %s and dtype %s, not %d rows of %s", what, path, header.shape,
                    header.dtype, rows, "/".join(np.dtype(t).name for t in dtypes))
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        log.warning("%s: %s is unreadable (%s)", what, path, e)
        return None


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


def rerank_fuse(results: Sequence[ScoredPaper], vectors: Mapping[str, np.ndarray], weight: float) -> list[ScoredPaper]:
    """``results`` (best first) re-ordered by the module docstring's fusion over C = ``results`` alone, with
    ``vectors`` (paper id → unit vector; a paper without one gets the lowest semantic score). ``results``
    itself when ``weight`` is 0, the list is empty or its top hit has no vector. Pure."""
    if weight <= 0 or not results or results[0].paper.id not in vectors:
        return list(results)
    top = max(r.score for r in results)
    if top <= 0:
        return list(results)
    anchor = vectors[results[0].paper.id]
    cos = np.array([float(vectors[r.paper.id] @ anchor) if r.paper.id in vectors else np.nan for r in results])
    floor = float(np.nanmin(cos))
    sem = _minmax(np.where(np.isnan(cos), floor, cos))
    lex = np.array([r.score for r in results], dtype=np.float64) / top
    fused = top * ((1.0 - weight) * lex + weight * sem)
    order = sorted(range(len(results)), key=lambda k: (-float(fused[k]), results[k].paper.id))

    def parts(k: int) -> dict[str, float]:  # the search's parts scaled by 1 − w, plus this one (text_parts)
        r = results[k]
        return added(scaled(parts_of(r.parts, r.score), 1.0 - weight), SEMANTIC, float(top * weight * sem[k]))

    return [ScoredPaper(results[k].paper, float(fused[k]), parts(k)) for k in order if fused[k] > 0.0]
