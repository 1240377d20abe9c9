"""Fault injection: the on-device model (crase_core/encoder.py) missing, truncated, replaced, a folder, of the
wrong hash, unloadable, or without onnxruntime: one line says which file and what to do, nothing crashes, and
`crase corpus embed` exits 2 with that line (no traceback)."""

from __future__ import annotations

import builtins
import shutil
from pathlib import Path

import pytest
from cli_tools import crase, one_error

from crase_core import encoder
from crase_core.encoder import EncoderUnavailable, load_encoder, unavailable_reason


@pytest.fixture(autouse=True)
def fresh_load():
    encoder.forget_loaded()
    yield
    encoder.forget_loaded()


def _use(monkeypatch, path: Path, sha: str | None = None) -> None:
    monkeypatch.setenv("CRASE_MINILM_ONNX", str(path))
    if sha is not None:
        monkeypatch.setenv("CRASE_MINILM_ONNX_SHA256", sha)


def _real() -> Path:
    return encoder.model_files().model


@pytest.mark.fault_kind("encoder-model-missing")
def test_a_missing_model_file_is_named(monkeypatch, tmp_path):
    _use(monkeypatch, tmp_path / "gone.onnx")
    with pytest.raises(EncoderUnavailable, match=r"model file is missing: .*gone\.onnx"):
        load_encoder()
    assert "missing" in (unavailable_reason() or "")


@pytest.mark.fault_kind("encoder-model-truncated")
def test_a_truncated_model_file_is_refused_before_onnxruntime_reads_it(monkeypatch, tmp_path):
    cut = tmp_path / "model.onnx"
    cut.write_bytes(_real().read_bytes()[:1_000_000])
    _use(monkeypatch, cut)
    with pytest.raises(EncoderUnavailable, match="damaged or not the pinned file"):
        load_encoder()


@pytest.mark.fault_kind("encoder-model-replaced")
def test_another_file_in_its_place_is_refused(monkeypatch, tmp_path):
    other = tmp_path / "model.onnx"
    other.write_bytes(b"\x08\x07" * 1000)
    _use(monkeypatch, other)
    with pytest.raises(EncoderUnavailable, match="SHA-256 [0-9a-f]{16}…, expected 8199be6f699a395f"):
        load_encoder()


@pytest.mark.fault_kind("encoder-model-folder")
def test_a_folder_in_its_place_is_named(monkeypatch, tmp_path):
    (tmp_path / "model.onnx").mkdir()
    _use(monkeypatch, tmp_path / "model.onnx")
    with pytest.raises(EncoderUnavailable, match="is a folder, not a file"):
        load_encoder()


@pytest.mark.fault_kind("encoder-model-unloadable")
def test_a_file_onnxruntime_cannot_load_is_one_line(monkeypatch, tmp_path):
    """The hash is vouched for by the user (CRASE_MINILM_ONNX_SHA256) but the bytes are no ONNX model."""
    import hashlib

    junk = tmp_path / "model.onnx"
    junk.write_bytes(b"not a protobuf" * 100)
    _use(monkeypatch, junk, hashlib.sha256(junk.read_bytes()).hexdigest())
    with pytest.raises(EncoderUnavailable, match="onnxruntime cannot load the model file") as e:
        load_encoder()
    assert "\n" not in str(e.value)


@pytest.mark.fault_kind("encoder-tokenizer-damaged")
def test_a_damaged_tokenizer_file_is_refused(monkeypatch, tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{}")
    monkeypatch.setattr(encoder, "tokenizer_file", lambda: bad)
    with pytest.raises(EncoderUnavailable, match="tokenizer file is damaged"):
        load_encoder()


@pytest.mark.fault_kind("encoder-onnxruntime-missing")
def test_without_onnxruntime_the_message_says_what_to_install(monkeypatch):
    real_import = builtins.__import__

    def no_ort(name, *a, **k):
        if name.split(".")[0] == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ort)
    with pytest.raises(EncoderUnavailable, match="pip install onnxruntime tokenizers"):
        load_encoder()


@pytest.mark.fault_kind("encoder-model-missing")
def test_corpus_embed_with_a_damaged_model_exits_2_in_one_line(capsys, monkeypatch, tmp_path, tiny_corpus_dir):
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    cut = tmp_path / "model.onnx"
    cut.write_bytes(_real().read_bytes()[:4096])
    _use(monkeypatch, cut)
    line = one_error(crase(capsys, "corpus", "embed", folder))
    assert "damaged or not the pinned file" in line and "--base-url URL --model NAME" in line
    assert not (folder / "embeddings" / "embeddings.f16.npy").exists()
