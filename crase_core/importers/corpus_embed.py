"""``crase corpus embed``: the embeddings semantic feedback reads, for any local corpus, resumably.

:func:`embed_corpus` embeds every paper's title and abstract (:func:`~crase_core.store.embedding_files.embed_text`)
with an :class:`Embedder` — an OpenAI-compatible ``/v1/embeddings`` endpoint
(:class:`EndpointEmbedder`, :mod:`crase_core.llm.embeddings`) or, by default, all-MiniLM-L6-v2 on this
machine (:class:`MiniLMEmbedder`, :mod:`crase_core.encoder`) — and writes the format the embedded corpus ships
(:mod:`crase_core.store.embedding_files`) to ``<corpus folder>/embeddings/embeddings.f16.npy`` (to the cache,
by folder, when the corpus folder cannot be written), where a query finds it
(:func:`crase_core.retrieval.semantic.find_embeddings`).

* **Incremental.** Rows of an existing file from the same embedder (model, source, endpoint, text cut) are
  reused when the texts they were made from are the corpus's first papers, unchanged (their SHA-256 is in
  the manifest): after ``crase corpus add`` only the appended papers are embedded. The embedded corpus's
  shipped all-MiniLM-L6-v2 rows serve the same way for the on-device model.
* **Resumable.** Rows are appended, a round of batches at a time, to a raw float16 file in
  ``.partial-<key>/`` beside the target (fsynced after each round; the key names the embedder, the corpus
  fingerprint and the first row); an interrupted run (Ctrl-C, a crash, the call budget or the deadline)
  keeps every finished round and the next run continues there, after checking those rows again (finite,
  unit length; a torn last row is cut). A partial file is never read by a query; the final file and its
  manifest are written atomically once every row exists.
* **Budgeted** like the chat client: ``--max-calls`` (HTTP requests, retries included), ``--deadline``,
  ``--timeout`` per request, ``--max-retries``, ``--concurrency`` (adaptive on 429/503).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from crase_core import atomic
from crase_core.errors import CraseError, InputError, ModelError
from crase_core.records import Paper
from crase_core.redaction import redact_url
from crase_core.retrieval.semantic import (
    MODEL_NAME,
    cache_embeddings_file,
    candidate_files,
    embeddings_dir,
    folder_embeddings_file,
)
from crase_core.settings.llm import LLMSettings
from crase_core.store import corpus_folder
from crase_core.store.corpus import Corpus
from crase_core.store.embedding_files import (
    EmbeddingsProblem,
    Manifest,
    check_rows,
    embed_text,
    normalised_f16,
    read_header,
    read_manifest,
    rows_of,
    write_embeddings,
)

log = logging.getLogger(__name__)

#: texts per request to an endpoint (the default of ``--batch-size``)
DEFAULT_BATCH = 32
#: an endpoint's text cut (characters): longer abstracts are cut before they are sent
DEFAULT_MAX_CHARS = 6000
#: a round is this many batches per concurrent request slot (rows are made durable once per round)
ROUND_BATCHES = 4


class EmbedStopped(CraseError):
    """The job stopped before every paper was embedded (budget, deadline, failures); what was done is kept."""


class Embedder(Protocol):
    """Turns texts into vectors; names what it is for the manifest."""

    model: str
    source: str  # "minilm" or "endpoint"
    base_url: str  # without credentials ("" for minilm)
    max_chars: int | None
    batch_size: int
    concurrency: int

    def embed(self, batches: Sequence[Sequence[str]]) -> list[np.ndarray | str]:
        """One float16 block of unit rows per batch, in order; a batch that failed is a message (``str``),
        and every batch after a failed one may be a message too. Raises a CraseError when nothing can work."""
        ...


@dataclass
class EndpointEmbedder:
    """Vectors from an OpenAI-compatible embeddings endpoint (:class:`~crase_core.llm.embeddings.EmbeddingEndpoint`)."""

    settings: LLMSettings
    batch_size: int = DEFAULT_BATCH
    max_chars: int | None = DEFAULT_MAX_CHARS
    max_calls: int | None = None
    deadline: float | None = None  # time.monotonic() seconds
    dimension: int | None = None
    source: str = "endpoint"

    def __post_init__(self) -> None:
        from crase_core.llm.embeddings import EmbeddingEndpoint

        self.client = EmbeddingEndpoint(self.settings, max_calls=self.max_calls, deadline=self.deadline,
                                        dimension=self.dimension)
        self.model = str(self.settings.model)
        self.base_url = redact_url(self.settings.base_url)
        self.concurrency = self.settings.concurrency
        self.stopped_by_budget = False

    @property
    def notes(self) -> dict[str, Any]:
        """What the manifest's ``extra`` records about how the vectors were made."""
        return {"pooling": "mean of per-token vectors, computed by Crase (the server returned one per token)"} \
            if self.client.pooled else {}

    def embed(self, batches: Sequence[Sequence[str]]) -> list[np.ndarray | str]:
        out: list[np.ndarray | str] = []
        for r in self.client.embed(batches):
            if r.vectors is None:
                self.stopped_by_budget |= r.budget
                out.append(r.error)
            else:
                out.append(normalised_f16(r.vectors))
        return out


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on this machine's CPU, on onnxruntime (:mod:`crase_core.encoder`; no PyTorch, no
    network): the model the embedded corpus's shipped embeddings were made with, so their rows are reused."""

    source = "minilm"
    base_url = ""
    max_chars = None
    concurrency = 1

    def __init__(self, batch_size: int = 128):
        from crase_core.encoder import EncoderUnavailable, load_encoder

        try:
            self._encoder = load_encoder()
        except EncoderUnavailable as e:
            raise InputError(f"{e}; or embed through an endpoint with --base-url URL --model NAME") from None
        self.model = MODEL_NAME
        self.batch_size = batch_size
        self.notes = {"runtime": "onnxruntime, int8 weights", "model_id": self._encoder.model_id}

    def embed(self, batches: Sequence[Sequence[str]]) -> list[np.ndarray | str]:
        texts = [t for b in batches for t in b]
        vectors = self._encoder.encode(texts)
        out: list[np.ndarray | str] = []
        start = 0
        for b in batches:
            out.append(normalised_f16(vectors[start : start + len(b)]))
            start += len(b)
        return out


@dataclass
class EmbedReport:
    """What :func:`embed_corpus` did."""

    path: Path
    manifest: Manifest
    embedded: int  # papers embedded by this run
    reused: int  # rows taken from an earlier file (incremental) or an interrupted run (resumed)
    seconds: float
    up_to_date: bool = False
    note: str = ""  # e.g. written to the cache because the corpus folder is read-only

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


# ---- where -----------------------------------------------------------------------------------------------

def target_file(folder: Path) -> tuple[Path, str]:
    """Where the corpus in ``folder`` gets its embeddings: beside its files, else (read-only) in the cache."""
    path = folder_embeddings_file(folder)
    if path.is_dir() and not path.is_symlink():  # queries look there first: a file in the cache would never be read
        raise InputError(f"{path} is a directory, where the corpus's embeddings file belongs: remove it, then run "
                         "`crase corpus embed` again")
    try:
        atomic.check_writable(path)
        return path, ""
    except InputError as e:
        fallback = cache_embeddings_file(folder)
        atomic.check_writable(fallback)
        return fallback, f"{e}; writing them to the cache instead ({fallback})"


def _identity(embedder: Embedder) -> dict[str, Any]:
    return {"model": embedder.model, "source": embedder.source, "base_url": embedder.base_url,
            "max_chars": embedder.max_chars}


def _same_embedder(m: Manifest, embedder: Embedder) -> bool:
    return _identity(embedder) == {"model": m.model, "source": m.source, "base_url": m.base_url,
                                   "max_chars": m.max_chars}


# ---- reuse -------------------------------------------------------------------------------------------------

def texts_digests(papers: Sequence[Paper], cuts: Sequence[int], max_chars: int | None) -> dict[int, str]:
    """SHA-256 (as :func:`~crase_core.store.embedding_files.texts_digest`) of the first ``c`` texts for each ``c`` in
    ``cuts``, in one pass."""
    h = hashlib.sha256()
    out: dict[int, str] = {}
    wanted = sorted(set(cuts))
    done = 0
    for c in wanted:
        for i in range(done, c):
            data = embed_text(papers[i], max_chars).encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        done = c
        out[c] = h.copy().hexdigest()
    return out


def verified_file(path: Path) -> Manifest:
    """The manifest of the embeddings file ``path`` after checking its size, header and SHA-256 against it
    (whatever corpus it was written for); :class:`EmbeddingsProblem` otherwise."""
    manifest = read_manifest(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size != manifest.size:
            raise EmbeddingsProblem(f"the file has {size:,} bytes, its manifest says {manifest.size:,}")
        header = read_header(f, size)
        if header.shape != (manifest.count, manifest.dimension) or header.dtype.str != "<f2":
            raise EmbeddingsProblem("its header does not match its manifest")
        f.seek(0)
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    if h.hexdigest() != manifest.sha256:
        raise EmbeddingsProblem("its bytes do not match the SHA-256 its manifest records")
    return manifest


def reusable(corpus: Corpus, folder: Path, target: Path, embedder: Embedder,
             say: Callable[[str], None]) -> tuple[Path, Manifest] | None:
    """An earlier file of this embedder whose rows are the embeddings of the corpus's first papers as they are
    now (the target itself, or the shipped file of the embedded corpus), or None."""
    candidates = [target, folder_embeddings_file(folder), cache_embeddings_file(folder)]
    if embedder.source == "minilm":
        candidates += sorted(embeddings_dir().glob(f"{corpus.name}-*-{MODEL_NAME}.f16.npy"))
    best: tuple[Path, Manifest] | None = None
    for path in dict.fromkeys(candidates):
        if not path.is_file():
            continue
        try:
            manifest = verified_file(path)
        except (EmbeddingsProblem, OSError) as e:
            say(f"not reusing {path}: {e}")
            continue
        if not _same_embedder(manifest, embedder) or manifest.count > len(corpus):
            continue
        if best is None or manifest.count > best[1].count:
            best = (path, manifest)
    if best is None:
        return None
    path, manifest = best
    digest = texts_digests(corpus.papers, [manifest.count], embedder.max_chars)[manifest.count]
    if digest != manifest.texts_sha256:
        say(f"not reusing {path}: the texts of the corpus's first {manifest.count:,} papers changed since")
        return None
    return best


# ---- partial rows --------------------------------------------------------------------------------------------

class Partial:
    """Rows embedded so far by an interrupted or running job: a raw little-endian float16 file of whole rows
    in ``.partial-<key>/rows.f16`` beside the target, and ``job.json`` naming what they are."""

    def __init__(self, target: Path, job: dict[str, Any]):
        self.job = job
        key = hashlib.sha256(json.dumps(job, sort_keys=True).encode()).hexdigest()[:16]
        self.folder = target.parent / f".partial-{key}"
        self.rows_path = self.folder / "rows.f16"

    def stale_folders(self) -> list[Path]:
        return [p for p in self.folder.parent.glob(".partial-*") if p != self.folder and p.is_dir()]

    def load(self, dimension: int | None, say: Callable[[str], None]) -> tuple[int, int | None]:
        """(rows already there, their dimension); rows that fail a check are dropped and the job starts over."""
        try:
            job = json.loads((self.folder / "job.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0, dimension
        dim = job.get("dimension") if isinstance(job, dict) else None
        if not isinstance(dim, int) or dim < 1 or (dimension is not None and dim != dimension):
            return 0, dimension
        size = self.rows_path.stat().st_size if self.rows_path.is_file() else 0
        rows = size // (2 * dim)
        if size != rows * 2 * dim:  # a torn last row (a crash mid-write): cut it
            with open(self.rows_path, "r+b") as f:
                f.truncate(rows * 2 * dim)
        if rows:
            try:
                check_rows(np.fromfile(self.rows_path, dtype="<f2").reshape(rows, dim).astype(np.float32))
            except (EmbeddingsProblem, ValueError, OSError) as e:
                say(f"the rows of the interrupted run fail a check ({e}); starting over")
                self.clear()
                return 0, dimension
        return rows, dim

    def append(self, block: np.ndarray) -> None:
        """Add ``block``'s rows (durably: fsynced) after the ones there."""
        if not (self.folder / "job.json").is_file():
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise InputError(f"cannot write {self.folder}: {e.strerror or e}") from None
            atomic.write_text(self.folder / "job.json", json.dumps({**self.job, "dimension": int(block.shape[1])},
                                                                   indent=2))
        with open(self.rows_path, "ab") as f:
            f.write(np.ascontiguousarray(block, dtype="<f2").tobytes())
            f.flush()
            os.fsync(f.fileno())

    def rows(self, count: int, dimension: int) -> np.ndarray:
        return np.memmap(self.rows_path, dtype="<f2", mode="r", shape=(count, dimension))

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# ---- the job ---------------------------------------------------------------------------------------------------

def embed_corpus(folder: Path, embedder: Embedder, *, fresh: bool = False,
                 progress: Callable[[str], None] = log.info) -> EmbedReport:
    """Embed the corpus in ``folder`` with ``embedder`` and write its embeddings file (module docstring).

    Raises :class:`EmbedStopped` when the budget, the deadline or repeated failures stop it before the end
    (every finished round is kept for the next run), :class:`~crase_core.errors.ModelError` when the endpoint
    cannot work at all, InputError when nothing can be written."""
    t0 = time.perf_counter()
    corpus = corpus_folder.open_or_build(folder, progress=progress)
    target, note = target_file(folder)
    if note:
        progress(note)
    with one_job(folder, target, progress):
        return _embed_locked(corpus, folder, target, note, embedder, fresh, progress, t0)


@contextlib.contextmanager
def one_job(folder: Path, target: Path, say: Callable[[str], None]) -> Iterator[None]:
    """Hold a lock on the corpus folder itself (``flock`` on the directory: no file is made) for the block: one
    job at a time writes a corpus's rows and file. Another job of the same corpus waits for it, saying so, and
    then finds its file (up to date, or rows to reuse); it never reads rows a running job is writing."""
    def wait() -> None:
        say(f"another `crase corpus embed` of this corpus is writing {target}; waiting for it to finish")

    with atomic.folder_lock(folder, "the corpus folder", wait):
        yield


def _embed_locked(corpus: Corpus, folder: Path, target: Path, note: str, embedder: Embedder, fresh: bool,
                  progress: Callable[[str], None], t0: float) -> EmbedReport:
    """:func:`embed_corpus` once it holds the corpus's lock (:func:`one_job`)."""
    n = len(corpus)
    base = None if fresh else reusable(corpus, folder, target, embedder, progress)
    if base is not None and base[1].count == n and base[1].corpus_fingerprint == corpus.fingerprint:
        found = next((p for p in candidate_files(folder, corpus.name, corpus.fingerprint) if p.exists()), None)
        if found == base[0]:  # what queries read already is this embedder's, for every paper
            return EmbedReport(base[0], base[1], 0, n, time.perf_counter() - t0, up_to_date=True, note=note)
    start = base[1].count if base is not None else 0
    dimension = base[1].dimension if base is not None else None
    partial = Partial(target, {**_identity(embedder), "corpus": corpus.fingerprint, "start": start, "count": n})
    for stale in partial.stale_folders():
        progress(f"removing the rows of an earlier, different embedding job ({stale.name})")
        shutil.rmtree(stale, ignore_errors=True)
    if fresh:
        partial.clear()
    done, dimension = partial.load(dimension, progress)
    if done > n - start:  # more rows than the job has papers: not this job's
        partial.clear()
        done, dimension = 0, base[1].dimension if base is not None else None
    if done:
        progress(f"resuming: {done:,} papers were embedded by an interrupted run")
    if base is not None:
        progress(f"reusing the embeddings of the first {start:,} papers from {base[0]}")
    embedded, dimension = _embed_rows(corpus, embedder, partial, start + done, dimension, progress)
    digest = texts_digests(corpus.papers, [n], embedder.max_chars)[n]
    assert dimension is not None
    manifest = Manifest(model=embedder.model, dimension=dimension, count=n, corpus_name=corpus.name,
                        corpus_fingerprint=corpus.fingerprint, texts_sha256=digest, source=embedder.source,
                        base_url=embedder.base_url, max_chars=embedder.max_chars, created=date.today().isoformat(),
                        extra=dict(getattr(embedder, "notes", {})))
    parts: list[np.ndarray] = []
    if base is not None:
        parts.append(rows_of(base[0], base[1], start))
    if n - start:
        parts.append(partial.rows(n - start, dimension))
    written = write_embeddings(target, _blocks(parts), manifest)
    partial.clear()
    return EmbedReport(target, written, embedded, start + done, time.perf_counter() - t0, note=note)


def _blocks(parts: Sequence[np.ndarray], rows: int = 1 << 15) -> Iterator[np.ndarray]:
    for part in parts:
        for i in range(0, part.shape[0], rows):
            yield np.asarray(part[i : i + rows])


def _embed_rows(corpus: Corpus, embedder: Embedder, partial: Partial, first: int, dimension: int | None,
                progress: Callable[[str], None]) -> tuple[int, int | None]:
    """Embed papers ``first``…N−1 into ``partial``, a round at a time; (papers embedded, dimension)."""
    n = len(corpus)
    round_size = embedder.batch_size * max(1, embedder.concurrency) * ROUND_BATCHES
    embedded = 0
    t0 = time.perf_counter()
    i = first
    try:
        while i < n:
            end = min(n, i + round_size)
            texts = [embed_text(corpus.papers[j], embedder.max_chars) for j in range(i, end)]
            batches = [texts[k : k + embedder.batch_size] for k in range(0, len(texts), embedder.batch_size)]
            blocks = embedder.embed(batches)
            good: list[np.ndarray] = []
            failure = ""
            for block in blocks:
                if isinstance(block, str):
                    failure = block
                    break
                if dimension is None:
                    dimension = int(block.shape[1])
                if block.shape[1] != dimension:
                    raise ModelError(f"the embedder returned {block.shape[1]}-dimensional vectors where the ones "
                                     f"before have {dimension}; rerun with --fresh to start over with one model")
                good.append(block)
            if good:
                partial.append(np.vstack(good))
                rows = sum(b.shape[0] for b in good)
                embedded += rows
                i += rows
            rate = embedded / max(1e-9, time.perf_counter() - t0)
            progress(f"embedded {i:,} of {n:,} papers ({rate:,.1f} papers/s"
                     + (f", about {(n - i) / rate / 60:,.0f} min left)" if rate > 0 and i < n else ")"))
            if failure:
                raise EmbedStopped(f"embedding stopped after {i:,} of {n:,} papers: {failure}. The {i:,} are kept: "
                                   "rerun the same command to continue")
    except KeyboardInterrupt:
        progress(f"interrupted after {i:,} of {n:,} papers; they are kept: rerun the same command to continue")
        raise
    return embedded, dimension

