"""Corpus embeddings on disk: one float16 ``.npy`` of unit-length rows in the corpus's order, and beside it a
JSON manifest recording what they are and a checksum of the file.

Format (the embedded corpus ships one, ``assets/embeddings/``; ``crase corpus embed`` writes the same):

* ``<stem>.f16.npy`` — a plain ``.npy`` (format 1.0, never pickled) of ``count × dimension`` little-endian
  float16, row i the embedding of corpus paper i (:attr:`~crase_core.records.Paper.text`, title and
  abstract), normalised to unit length;
* ``<stem>.f16.json`` — the manifest (:class:`Manifest`): the model, its dimension, where the vectors came
  from (``minilm``: the bundled all-MiniLM-L6-v2; ``endpoint``: an OpenAI-compatible ``/v1/embeddings``
  endpoint, named by its URL without credentials), the number of rows, the corpus's name and fingerprint,
  the SHA-256 of the texts embedded (in order; it lets a later ``corpus embed`` reuse the rows of papers
  that did not change), and the size and SHA-256 of the ``.npy`` file.

Reading (:func:`read_embeddings`) refuses, with one line saying why, a file that is missing its manifest,
written for another corpus or another number of papers, of another size than recorded, whose header does
not describe exactly the rows the file holds (an empty file; a header claiming 29,555 × 10⁹), whose bytes do
not hash to the recorded SHA-256 (rows shuffled, edited or truncated), or whose rows are not finite unit
vectors. The checks before the hash read only the manifest, the file's size and its header, so a lying
header never allocates; the hash is computed over the bytes that are read anyway (one pass; ≈ 35 ms for
the embedded corpus's 22.7 MB here). A query's lookup (:func:`read_embeddings_mapped`) then keeps a float32
copy of the verified rows in the cache, which the next process maps while the file is unchanged.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from crase_core import atomic
from crase_core.errors import InputError
from crase_core.records import Paper

FORMAT = "crase-embeddings"
VERSION = 1
#: the largest manifest read (it is a few hundred bytes; the cap keeps /dev/zero or a huge file out)
MAX_MANIFEST_BYTES = 1 << 16
SOURCES = ("minilm", "endpoint")
#: the tolerance on a row's norm (float16 rounding of a unit vector stays well inside it)
NORM_TOLERANCE = 1e-2
_DTYPES = {"<f2": np.dtype("<f2"), "<f4": np.dtype("<f4")}


class EmbeddingsProblem(Exception):
    """Why an embeddings file cannot be used (one line, for a warning)."""


@dataclass(frozen=True)
class Manifest:
    """What an embeddings file holds (the module docstring); ``base_url`` carries no credentials."""

    model: str
    dimension: int
    count: int
    corpus_name: str
    corpus_fingerprint: str
    texts_sha256: str
    source: str  # "minilm" or "endpoint"
    size: int = 0  # bytes of the .npy file
    sha256: str = ""  # of the .npy file
    base_url: str = ""
    max_chars: int | None = None  # texts cut to this many characters before embedding (None: whole)
    created: str = ""
    format: str = FORMAT
    version: int = VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        """The manifest in ``data`` (parsed JSON); :class:`EmbeddingsProblem` naming what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise EmbeddingsProblem("its manifest is not an embeddings manifest")
        if data.get("version") != VERSION:
            raise EmbeddingsProblem(f"its manifest has version {data.get('version')!r}, this Crase reads {VERSION}")
        want: dict[str, type | tuple[type, ...]] = {
            "model": str, "dimension": int, "count": int, "corpus_name": str, "corpus_fingerprint": str,
            "texts_sha256": str, "source": str, "size": int, "sha256": str, "base_url": str,
            "max_chars": (int, type(None)), "created": str, "extra": dict}
        for key, kind in want.items():
            value = data.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise EmbeddingsProblem(f"its manifest's {key!r} is missing or not a {_kind_name(kind)}")
        if data["source"] not in SOURCES or data["dimension"] < 1 or data["count"] < 1 or data["size"] < 0:
            raise EmbeddingsProblem("its manifest holds impossible values (source, dimension, count or size)")
        return cls(**{k: data[k] for k in (*want, "format", "version")})

    def describe(self) -> str:
        """``all-MiniLM-L6-v2 (384 dimensions, the bundled model)`` or ``nomic-embed (768 dimensions, from URL)``."""
        where = "the bundled model" if self.source == "minilm" else f"from {self.base_url}"
        return f"{self.model} ({self.dimension} dimensions, {where})"


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "string", int: "integer", dict: "table", type(None): "null"}[k] for k in kinds)


def manifest_path(path: Path) -> Path:
    """The manifest beside ``path`` (``x.f16.npy`` → ``x.f16.json``)."""
    return path.with_suffix(".json")


def texts_digest(papers: Sequence[Paper], count: int | None = None, max_chars: int | None = None) -> str:
    """SHA-256 of the first ``count`` papers' texts as embedded (each cut to ``max_chars``), length-prefixed."""
    h = hashlib.sha256()
    for i in range(len(papers) if count is None else count):
        data = embed_text(papers[i], max_chars).encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def embed_text(paper: Paper, max_chars: int | None = None) -> str:
    """The text of ``paper`` that is embedded: its title and abstract, cut to ``max_chars`` characters."""
    text = paper.text
    return text if max_chars is None else text[:max_chars]


# ---- reading ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Header:
    """The array a ``.npy`` file's header describes, and where its data starts."""

    shape: tuple[int, ...]
    dtype: np.dtype
    offset: int


def read_manifest(path: Path) -> Manifest:
    """The manifest beside the embeddings file ``path``; :class:`EmbeddingsProblem` when absent or broken."""
    mpath = manifest_path(path)
    data = _read_bounded(mpath, MAX_MANIFEST_BYTES, f"its manifest {mpath.name}")
    try:
        parsed = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise EmbeddingsProblem(f"its manifest {mpath.name} is not valid JSON") from None
    return Manifest.from_json(parsed)


def open_regular(path: Path, what: str) -> io.BufferedReader:
    """``path`` open for reading when it is a regular file; :class:`EmbeddingsProblem` naming ``what`` when it is
    missing, unreadable or anything else — a directory, a FIFO (never blocks), a device. The kind is checked on
    the descriptor, before it becomes a file object (a directory cannot even be wrapped in one)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise EmbeddingsProblem(f"{what} is missing") from None
    except OSError as e:
        raise EmbeddingsProblem(f"{what} cannot be read ({e.strerror or e})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise EmbeddingsProblem(f"{what} is {kind}" + (" (a regular file was expected)" if stat.S_ISDIR(mode) else ""))
    return os.fdopen(fd, "rb")


def _read_bounded(path: Path, limit: int, what: str) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (a FIFO or device never blocks nor streams)."""
    with open_regular(path, what) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise EmbeddingsProblem(f"{what} is larger than {limit >> 10} KiB")
    return data


def read_header(f: io.BufferedIOBase, size: int) -> Header:
    """The header of the ``.npy`` file open as ``f`` (``size`` bytes), checked to describe a plain 2-D float
    array whose data fills the rest of the file exactly; :class:`EmbeddingsProblem` otherwise."""
    if size == 0:
        raise EmbeddingsProblem("the file is empty")
    try:
        major, minor = np.lib.format.read_magic(f)
        if (major, minor) == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif (major, minor) == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise EmbeddingsProblem(f"it is a .npy file of format {major}.{minor}, not 1.0 or 2.0")
    except EmbeddingsProblem:
        raise
    except Exception as e:  # numpy raises ValueError, EOFError or SyntaxError for a damaged header
        raise EmbeddingsProblem(f"it is not a readable .npy file ({type(e).__name__})") from None
    if dtype.hasobject or dtype.str not in _DTYPES or fortran:
        raise EmbeddingsProblem(f"it holds {dtype.str}{' (Fortran order)' if fortran else ''}, not float16/float32 rows")
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise EmbeddingsProblem(f"it holds an array of shape {shape}, not rows of vectors")
    offset = f.tell()
    need = offset + shape[0] * shape[1] * dtype.itemsize
    if need != size:
        raise EmbeddingsProblem(f"its header says {shape[0]:,} × {shape[1]:,} {dtype.name} ({need:,} bytes) but "
                                f"the file has {size:,} bytes: truncated, padded or a lying header")
    return Header(tuple(int(x) for x in shape), dtype, offset)


def read_embeddings(path: Path, *, rows: int, fingerprint: str) -> tuple[np.ndarray, Manifest]:
    """The verified embeddings at ``path`` for a corpus of ``rows`` papers with ``fingerprint``, as a float32
    ``rows × dimension`` array of unit rows, and their manifest; :class:`EmbeddingsProblem` saying why not
    (module docstring: manifest, corpus, size, header, checksum, finite unit rows — in that order)."""
    manifest = read_manifest(path)
    if manifest.corpus_fingerprint != fingerprint:
        raise EmbeddingsProblem(
            f"they were written for corpus {manifest.corpus_name} with fingerprint {manifest.corpus_fingerprint[:16]} "
            f"({manifest.count:,} papers), this corpus's is {fingerprint[:16]} ({rows:,} papers): it changed or "
            "grew since, or they belong to another corpus")
    if manifest.count != rows:
        raise EmbeddingsProblem(f"they hold {manifest.count:,} rows for a corpus of {rows:,} papers")
    with open_regular(path, "the file") as f:
        st = os.fstat(f.fileno())
        if st.st_size != manifest.size:
            raise EmbeddingsProblem(f"the file has {st.st_size:,} bytes, its manifest says {manifest.size:,}: "
                                    "truncated or replaced")
        header = read_header(f, st.st_size)
        if header.shape != (manifest.count, manifest.dimension):
            raise EmbeddingsProblem(f"its header says {header.shape[0]:,} × {header.shape[1]:,}, its manifest "
                                    f"{manifest.count:,} × {manifest.dimension:,}")
        f.seek(0)
        data = f.read(st.st_size + 1)
    if len(data) != manifest.size:
        raise EmbeddingsProblem("the file changed while it was read")
    if hashlib.sha256(data).hexdigest() != manifest.sha256:
        raise EmbeddingsProblem("its bytes do not match the SHA-256 its manifest records: rows reordered, edited "
                                "or damaged since they were written")
    matrix = np.frombuffer(data, dtype=header.dtype, offset=header.offset).reshape(header.shape)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    check_rows(matrix)
    return matrix, manifest


#: the float32 copies of verified embeddings under a copies folder (:func:`read_embeddings_mapped`)
COPY_FORMAT = 1


def read_embeddings_mapped(path: Path, *, rows: int, fingerprint: str,
                           copies: Path | None) -> tuple[np.ndarray, Manifest]:
    """:func:`read_embeddings`, and then a float32 copy of the verified rows kept in ``copies`` (a cache folder)
    that a later process maps instead of reading, hashing and converting the float16 file again (issue 31).

    The copy is used only while the file is the one verified: the same manifest checksum, and the same size,
    modification and change times, inode and device as recorded when it was verified (any write changes the
    change time, which no one can set back; the file is then read and verified again). A copy that is missing, damaged or of another shape is rebuilt from a fresh
    verification; a copies folder that cannot be written only means no copy. ``copies`` None: no copy."""
    if copies is not None:
        try:
            manifest = read_manifest(path)
            if manifest.corpus_fingerprint == fingerprint and manifest.count == rows:
                mapped = _mapped_copy(path, manifest, copies)
                if mapped is not None:
                    return mapped, manifest
        except (EmbeddingsProblem, OSError, ValueError):
            pass  # read_embeddings below says what is wrong with the file itself
    matrix, manifest = read_embeddings(path, rows=rows, fingerprint=fingerprint)
    if copies is not None:
        _write_copy(path, manifest, matrix, copies)
    return matrix, manifest


def copy_paths(manifest: Manifest, copies: Path) -> tuple[Path, Path]:
    """(the float32 copy, its stamp) of the embeddings ``manifest`` describes, in ``copies``."""
    stem = f"{manifest.sha256[:32]}-{manifest.count}x{manifest.dimension}"
    return copies / f"{stem}.f32.npy", copies / f"{stem}.json"


def _source_stamp(path: Path, manifest: Manifest) -> dict[str, Any]:
    st = os.stat(path)
    return {"format": COPY_FORMAT, "sha256": manifest.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns, "inode": st.st_ino, "device": st.st_dev}


def _mapped_copy(path: Path, manifest: Manifest, copies: Path) -> np.ndarray | None:
    """The mapped float32 copy of ``path``'s rows when its stamp says it was made from this very file."""
    copy, stamp_file = copy_paths(manifest, copies)
    try:
        stamp = json.loads(_read_bounded(stamp_file, MAX_MANIFEST_BYTES, "the copy's stamp").decode("utf-8"))
    except (EmbeddingsProblem, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if stamp != _source_stamp(path, manifest):
        return None
    try:
        matrix = np.load(copy, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if matrix.dtype != np.float32 or matrix.shape != (manifest.count, manifest.dimension):
        return None
    return np.asarray(matrix)


def _write_copy(path: Path, manifest: Manifest, matrix: np.ndarray, copies: Path) -> None:
    """Keep ``matrix`` (just verified) as the float32 copy of ``path``, stamp last (best effort)."""
    copy, stamp_file = copy_paths(manifest, copies)
    try:
        copies.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{copy.name}.", suffix=".tmp", dir=copies)
        try:
            with os.fdopen(fd, "wb") as f:
                np.save(f, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
            os.replace(tmp_name, copy)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
        atomic.write_text(stamp_file, json.dumps(_source_stamp(path, manifest)))
    except (OSError, InputError):
        pass  # no copy: the next process reads and verifies the file again


def check_rows(matrix: np.ndarray) -> None:
    """:class:`EmbeddingsProblem` unless every row of ``matrix`` is finite and of unit length (one pass: the
    squared norms, which a NaN or infinity in a row makes non-finite)."""
    squares = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
    if not np.all(np.isfinite(squares)):
        raise EmbeddingsProblem("some rows are not finite (NaN or infinity)" if not np.all(np.isfinite(matrix))
                                else "some rows are not unit vectors")
    if squares.size and float(np.abs(np.sqrt(squares) - 1).max()) > NORM_TOLERANCE:
        raise EmbeddingsProblem("some rows are not unit vectors")


# ---- writing ------------------------------------------------------------------------------------------

def normalised_f16(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (rows) scaled to unit length in float64, as float16; ValueError for a zero or non-finite row."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or not np.all(np.isfinite(v)):
        raise ValueError("vectors that are not finite rows")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    if np.any(norms <= 0):
        raise ValueError("a zero vector")
    return (v / norms).astype("<f2")


def write_embeddings(path: Path, parts: Iterable[np.ndarray], manifest: Manifest) -> Manifest:
    """Write ``parts`` (float16 row blocks, ``manifest.count`` rows of ``manifest.dimension`` in all) as the
    ``.npy`` at ``path``, then its manifest with the file's size and SHA-256; both atomically (temp file,
    fsync, rename), the ``.npy`` first. A crash between the two renames leaves a file whose checksum does
    not match the old manifest: it is refused, never used. Returns the manifest written."""
    header = {"descr": "<f2", "fortran_order": False, "shape": (manifest.count, manifest.dimension)}
    h = hashlib.sha256()
    written = 0
    atomic.check_writable(path)  # a link or device in the way is refused; the folder is writable
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, header)
            head = buf.getvalue()
            f.write(head)
            h.update(head)
            size = len(head)
            for part in parts:
                block = np.ascontiguousarray(part, dtype="<f2")
                if block.ndim != 2 or block.shape[1] != manifest.dimension:
                    raise ValueError(f"a block of shape {block.shape}, not rows of {manifest.dimension}")
                data = block.tobytes()
                f.write(data)
                h.update(data)
                size += len(data)
                written += block.shape[0]
            if written != manifest.count:
                raise ValueError(f"{written} rows written, {manifest.count} expected")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        raise
    final = Manifest(**{**asdict(manifest), "size": size, "sha256": h.hexdigest()})
    atomic.write_text(manifest_path(path), final.to_json())
    _fsync_folder(path.parent)
    return final


def _fsync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` durable (best effort: some file systems refuse a folder fsync)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def rows_of(path: Path, manifest: Manifest, count: int) -> np.ndarray:
    """The first ``count`` rows (float16, memory-mapped) of the verified embeddings file ``path``."""
    a = np.load(path, mmap_mode="r", allow_pickle=False)
    if a.shape != (manifest.count, manifest.dimension):
        raise EmbeddingsProblem("the file changed since it was verified")
    return np.asarray(a[:count], dtype="<f2")
