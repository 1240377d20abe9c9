"""Fault injection: an embeddings file that is broken, lies, was reordered or belongs elsewhere turns semantic
feedback off with one line saying which file and why — the run goes on by its words, nothing is unpickled,
nothing is allocated from a lying header, nothing crashes — and ``crase corpus check`` reports it (exit 2).

The first three are issue 25's reproductions on the built-in corpus's shipped file (a copy, in a folder that
stands in for ``assets/embeddings``): ``: > file`` used to be ``internal error (EOFError)``, a header claiming
29,555 × 10⁹ ``internal error (MemoryError)``, rows shuffled were used silently (another ranking, exit 0).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_tools import QUERY, crase, ranked

from crase_core.retrieval import semantic
from crase_core.retrieval.semantic import (
    embeddings_file,
    find_embeddings,
    folder_embeddings_file,
    load_embeddings,
)
from crase_core.sources.local import LocalSource
from crase_core.store.embedding_files import (
    Manifest,
    copy_paths,
    manifest_path,
    normalised_f16,
    texts_digest,
    write_embeddings,
)

HEP_QUERY = "noncommutative solitons and tachyon condensation"


@pytest.fixture
def shipped(tmp_path, monkeypatch, hepth_source):
    """A copy of the shipped hep-th embeddings (file and manifest) where the product looks for shipped ones."""
    c = hepth_source.corpus
    real = embeddings_file(c.name, c.fingerprint)
    folder = tmp_path / "embeddings"
    folder.mkdir()
    shutil.copy(real, folder / real.name)
    shutil.copy(manifest_path(real), folder / manifest_path(real).name)
    monkeypatch.setattr(semantic, "embeddings_dir", lambda: folder)
    return folder / real.name


def _lying_header(path: Path, rows: int, cols: int) -> None:
    """Rewrite ``path``'s .npy header to claim ``rows × cols`` (same header length, data untouched)."""
    data = bytearray(path.read_bytes())
    head_len = int.from_bytes(data[8:10], "little")
    old = bytes(data[10 : 10 + head_len]).decode("latin1")
    new = old.replace(old[old.index("(") : old.index(")") + 1], f"({rows}, {cols})")
    new = new.rstrip(" \n").ljust(head_len - 1) + "\n"
    assert len(new) == head_len
    data[10 : 10 + head_len] = new.encode("latin1")
    path.write_bytes(bytes(data))


def check_error(capsys, *folder: Path) -> str:
    """The one error line of ``crase corpus check`` (exit 2) after the store's own "sound" line."""
    r = crase(capsys, "corpus", "check", *folder)
    assert r.code == 2 and ": sound (" in r.out and "embeddings" not in r.out, (r.code, r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("crase: error: "), r.err
    return lines[0].removeprefix("crase: error: ")


def _query_without_feedback(capsys, why: str) -> None:
    r = crase(capsys, "query", HEP_QUERY, "--quiet", "--no-cache")
    assert r.code == 0, r.err
    notes = [line for line in r.out.splitlines() if "semantic feedback off" in line]
    assert len(notes) == 1 and why in notes[0], r.out
    off = crase(capsys, "query", HEP_QUERY, "--quiet", "--no-cache", "--semantic-feedback-weight", "0")
    assert ranked(r.out).replace(notes[0] + "\n", "") == ranked(off.out)  # exactly the run without the feedback


@pytest.mark.fault_kind("embeddings-empty-file")
def test_an_empty_shipped_embeddings_file_turns_the_feedback_off(capsys, shipped):
    shipped.write_bytes(b"")
    _query_without_feedback(capsys, "the file has 0 bytes, its manifest says 22,698,368: truncated or replaced")


@pytest.mark.fault_kind("embeddings-lying-header")
def test_a_header_claiming_a_billion_columns_allocates_nothing(capsys, shipped):
    _lying_header(shipped, 29555, 10**9)
    _query_without_feedback(capsys, "its header says 29,555 × 1,000,000,000 float16")


@pytest.mark.fault_kind("embeddings-shuffled-rows")
def test_shuffled_rows_are_never_used(capsys, shipped, hepth_source):
    with open(shipped, "rb") as f:
        head = f.read(128)
    rows = np.load(shipped, allow_pickle=False)
    rng = np.random.default_rng(0)
    shipped.write_bytes(head + rows[rng.permutation(len(rows))].tobytes())
    _query_without_feedback(capsys, "its bytes do not match the SHA-256 its manifest records")
    error = check_error(capsys)
    assert error.startswith(f"semantic feedback off: the embeddings {shipped} cannot be used: its bytes do not match")
    assert error.endswith("reinstall Crase to restore the shipped file, or write new ones with "
                          "`crase corpus embed --minilm`")


@pytest.mark.parametrize("damage, why", [
    pytest.param("truncate", "the file has 11,349,184 bytes, its manifest says 22,698,368: truncated or replaced",
                 marks=pytest.mark.fault_kind("embeddings-truncated-file")),
    pytest.param("no manifest", "its manifest hepth-fca14e40e654ab16-all-MiniLM-L6-v2.f16.json is missing",
                 marks=pytest.mark.fault_kind("embeddings-manifest-missing")),
    pytest.param("manifest not json", "is not valid JSON", marks=pytest.mark.fault_kind("embeddings-manifest-garbage")),
    pytest.param("manifest huge", "is larger than 64 KiB", marks=pytest.mark.fault_kind("embeddings-manifest-over-cap")),
    pytest.param("manifest fifo", "is not a regular file", marks=pytest.mark.fault_kind("embeddings-manifest-fifo")),
    pytest.param("manifest other corpus", "they were written for corpus other with fingerprint 0123456789abcdef",
                 marks=pytest.mark.fault_kind("embeddings-other-corpus")),
    pytest.param("flipped byte", "its bytes do not match the SHA-256",
                 marks=pytest.mark.fault_kind("embeddings-flipped-byte")),
])
def test_every_damaged_shipped_file_is_refused_with_its_reason(shipped, hepth_source, damage, why):
    c = hepth_source.corpus
    m = manifest_path(shipped)
    if damage == "truncate":
        os.truncate(shipped, shipped.stat().st_size // 2)
    elif damage == "no manifest":
        m.unlink()
    elif damage == "manifest not json":
        m.write_text("{not json")
    elif damage == "manifest huge":
        m.write_bytes(b" " * (1 << 20))
    elif damage == "manifest fifo":
        m.unlink()
        os.mkfifo(m)
    elif damage == "manifest other corpus":
        data = json.loads(m.read_text())
        m.write_text(json.dumps({**data, "corpus_name": "other", "corpus_fingerprint": "0123456789abcdef"}))
    else:
        data = bytearray(shipped.read_bytes())
        data[5000] ^= 0x40
        shipped.write_bytes(bytes(data))
    lookup = find_embeddings(None, c.name, c.fingerprint, len(c))
    assert lookup.embeddings is None and lookup.problem is not None and why in lookup.problem, lookup.problem
    assert lookup.problem.startswith(f"semantic feedback off: the embeddings {shipped} cannot be used: ")
    assert "\n" not in lookup.problem


@pytest.mark.fault_support
def test_the_intact_copy_is_used_and_check_says_it_is_sound(capsys, shipped, hepth_source):
    c = hepth_source.corpus
    assert find_embeddings(None, c.name, c.fingerprint, len(c)).embeddings is not None
    r = crase(capsys, "corpus", "check")
    assert r.code == 0 and f"{shipped}: sound (all-MiniLM-L6-v2 (384 dimensions, the bundled model), 29,555 " \
                             "papers; size, header, SHA-256 and unit rows checked)" in r.out


@pytest.mark.fault_support
def test_a_verified_file_is_mapped_from_its_copy_in_the_next_lookups(shipped, hepth_source):
    """Issue 31: the first lookup verifies the file and keeps a float32 copy; the next ones map the copy (read-only
    memory, no hashing), with the same rows."""
    c = hepth_source.corpus
    first = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
    again = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
    assert first is not None and again is not None
    assert first.matrix.flags.writeable and not again.matrix.flags.writeable  # read, then mapped
    assert np.array_equal(first.matrix, again.matrix) and again.matrix.dtype == np.float32


@pytest.mark.fault_kind("embeddings-changed-after-copy")
def test_a_file_changed_after_its_copy_was_made_is_verified_again(shipped, hepth_source):
    """A byte flipped in place after the copy was made — same inode, same size, the modification time set back —
    is caught: the file is verified again (its change time moved) and refused."""
    c = hepth_source.corpus
    assert find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings is not None
    st = shipped.stat()
    with open(shipped, "r+b") as f:
        f.seek(5000)
        byte = f.read(1)
        f.seek(5000)
        f.write(bytes([byte[0] ^ 0x40]))
    os.utime(shipped, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert shipped.stat().st_size == st.st_size and shipped.stat().st_mtime_ns == st.st_mtime_ns
    lookup = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True)
    assert lookup.embeddings is None and lookup.problem is not None
    assert "its bytes do not match the SHA-256" in lookup.problem


@pytest.mark.parametrize("damage", ["truncated copy", "garbage stamp", "copy of another shape"])
@pytest.mark.fault_kind("embeddings-copy-damaged")
def test_a_damaged_copy_is_never_used_and_is_rebuilt(shipped, hepth_source, damage):
    c = hepth_source.corpus
    rows = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
    assert rows is not None
    assert rows.manifest is not None
    copy, stamp = copy_paths(rows.manifest, semantic.verified_copies())
    if damage == "truncated copy":
        os.truncate(copy, copy.stat().st_size // 3)
    elif damage == "garbage stamp":
        stamp.write_text("{not json")
    else:
        np.save(copy, np.zeros((3, 384), dtype=np.float32))
    again = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
    assert again is not None and again.matrix.flags.writeable  # verified from the file again, not mapped
    assert np.array_equal(again.matrix, rows.matrix)
    mapped = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
    assert mapped is not None and not mapped.matrix.flags.writeable and np.array_equal(mapped.matrix, rows.matrix)


@pytest.mark.fault_kind("embeddings-copies-read-only")
def test_no_copy_where_the_cache_cannot_be_written(shipped, hepth_source, tmp_path, monkeypatch):
    """A copies folder that cannot be written: the file is verified every time, and used."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the copies folder would be")
    monkeypatch.setattr(semantic, "verified_copies", lambda: blocked / "verified")
    c = hepth_source.corpus
    for _ in range(2):
        got = find_embeddings(None, c.name, c.fingerprint, len(c), fresh=True).embeddings
        assert got is not None and got.matrix.flags.writeable


def _write(folder: Path, source: LocalSource, matrix: np.ndarray, dtype: str = "<f2") -> Path:
    c = source.corpus
    path = folder_embeddings_file(folder)
    manifest = Manifest(model="m", dimension=matrix.shape[1], count=len(c), corpus_name=c.name,
                        corpus_fingerprint=c.fingerprint, texts_sha256=texts_digest(c.papers), source="endpoint",
                        base_url="http://127.0.0.1:1/v1")
    write_embeddings(path, [matrix.astype(dtype)], manifest)
    return path


@pytest.mark.fault_kind("embeddings-rows-not-unit", "embeddings-rows-not-finite")
def test_rows_that_are_not_unit_vectors_or_not_finite_are_refused_even_with_a_matching_checksum(tmp_path,
                                                                                                 tiny_corpus_dir):
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    source = LocalSource.open(folder)
    n = len(source.corpus)
    good = normalised_f16(np.random.default_rng(1).normal(size=(n, 8)))
    _write(folder, source, good)
    assert source.embeddings is not None and source.embeddings.matrix.shape == (n, 8)
    for bad, why in ((np.full((n, 8), 3.0), "not unit vectors"), (np.full((n, 8), np.nan), "not finite")):
        _write(folder, source, bad)
        lookup = source.semantic
        assert lookup.embeddings is None and why in str(lookup.problem)


@pytest.mark.fault_kind("embeddings-pickled-array")
def test_a_pickled_object_array_is_never_unpickled(tmp_path, tiny_corpus_dir):
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    source = LocalSource.open(folder)
    path = _write(folder, source, normalised_f16(np.ones((len(source.corpus), 4))))
    manifest = json.loads(manifest_path(path).read_text())
    np.save(path, np.array([{"a": 1}] * len(source.corpus), dtype=object), allow_pickle=True)
    manifest["size"] = path.stat().st_size
    manifest_path(path).write_text(json.dumps(manifest))
    lookup = source.semantic
    assert lookup.embeddings is None and "not float16/float32 rows" in str(lookup.problem)
    assert load_embeddings(path, len(source.corpus), source.corpus.fingerprint) is None


@pytest.mark.fault_kind("embeddings-corpus-grew")
def test_embeddings_of_a_corpus_that_grew_are_refused_until_embedded_again(capsys, tmp_path, tiny_corpus_dir):
    """After ``corpus add`` the fingerprint changes: the old rows are not used for the new corpus (a query says
    how to embed the new papers) and ``corpus check`` says the same."""
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_corpus_dir, folder)
    source = LocalSource.open(folder)
    _write(folder, source, normalised_f16(np.random.default_rng(2).normal(size=(len(source.corpus), 8))))
    new = tmp_path / "new"
    new.mkdir()
    (new / "papers.jsonl").write_text(json.dumps({"id": "0101001", "title": "A new paper on black holes",
                                                  "abstract": "Entropy.", "year": 2001}) + "\n")
    assert crase(capsys, "corpus", "add", folder, new).code == 0
    r = crase(capsys, "query", QUERY, "--corpus", folder, "--quiet")
    assert r.code == 0
    assert "they were written for corpus tiny with fingerprint" in r.out and "(6 papers), this corpus's is" in r.out
    assert "(7 papers): it changed or grew since" in r.out
    assert check_error(capsys, folder).endswith(f"write them again with `crase corpus embed {folder} --base-url "
                                                "http://127.0.0.1:1/v1 --model m`")
