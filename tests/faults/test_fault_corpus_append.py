"""``crase corpus add`` is all or nothing: a full disk, a read-only corpus, a kill at any point, a planted
journal, a batch that adds nothing. After each, the corpus files are byte for byte what they were (or,
for an append killed after its segment was published, exactly the grown corpus), and a query answers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_tools import REPO, cli_env, query, ranked, run_cli, shared_tmp
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.errors import CorpusError
from crase_core.sources.local import open_corpus
from crase_core.store import corpus_folder

JOURNAL = ".crase-append.json"  # crase_core.store.append_journal.JOURNAL


def _digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every regular file of ``folder`` (a planted FIFO is named, never opened)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else "not a file"
            for p in sorted(folder.iterdir())}


def _big_batch(folder: Path, n: int = 10_000) -> Path:
    """``n`` new papers (≈ 3.5 MB for 10,000) in a chain of citations."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "papers.jsonl", "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"b{i:06d}", "year": 2001, "title": f"Paper {i} on black holes",
                                "abstract": "We study black hole entropy in string theory. " * 5}) + "\n")
    with open(folder / "citations.tsv", "w", encoding="utf-8") as f:
        f.writelines(f"b{i:06d}\tb{i - 1:06d}\n" for i in range(1, n))
    return folder


@contextlib.contextmanager
def _tmpfs(size: str):
    """A fresh tmpfs of ``size`` (a small disk that fills up); skips where mounting is not allowed."""
    mnt = shared_tmp("tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        with contextlib.suppress(OSError):
            mnt.rmdir()


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if not ln.startswith("crase corpus:")]
    assert len(lines) == 1 and lines[0].startswith("crase: error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0].removeprefix("crase: error: ")


@pytest.mark.fault_kind("corpus-add-disk-full")
@pytest.mark.parametrize("cache_on_the_small_disk", [False, True], ids=["corpus-files-fill-it", "segment-fills-it"])
def test_disk_full_during_an_append_leaves_the_corpus_as_it_was(tmp_path, cache_on_the_small_disk):
    batch = _big_batch(tmp_path / "batch")
    with _tmpfs("2m" if not cache_on_the_small_disk else "4m") as disk:
        corpus = write_corpus(disk / "tiny")
        cache = disk / "cache" if cache_on_the_small_disk else tmp_path / "cache"
        before = query(corpus, cache)
        assert before.returncode == 0, before.stderr
        files = _digests(corpus)
        r = run_cli("corpus", "add", str(corpus), str(batch), cache_dir=cache)
        msg = _one_line(r)
        assert msg.startswith(f"cannot append to the corpus {corpus}: ") and msg.endswith("; its files are unchanged")
        assert "No space left on device" in msg or "is the disk full?" in msg
        assert _digests(corpus) == files  # byte for byte, and no journal left
        after = query(corpus, cache)
        assert after.returncode == 0 and "damaged" not in after.stderr, after.stderr
        assert ranked(after.stdout) == ranked(before.stdout)


@pytest.mark.fault_kind("corpus-add-disk-full")
def test_a_write_that_fails_half_way_is_cut_back(tmp_path, monkeypatch):
    """The same at a chosen point, on any machine: the write of ``citations.tsv`` fails after
    ``papers.jsonl`` grew and half of the citations were written (ENOSPC)."""
    from crase_core.store import append_journal

    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    open_corpus(corpus)
    files = _digests(corpus)

    def write(self):
        first, second = self.planned
        for p, share in ((first, 1.0), (second, 0.5)):
            f = self.files[p.name]
            f.seek(p.before)
            f.write(p.data[: int(len(p.data) * share)])
            f.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(append_journal.Append, "write", write)
    with pytest.raises(CorpusError, match=r"No space left on device; its files are unchanged$"):
        corpus_folder.add_papers(corpus, batch)
    assert _digests(corpus) == files
    assert len(open_corpus(corpus)) == 4


@pytest.mark.fault_kind("corpus-add-read-only")
@pytest.mark.parametrize("what", ["files", "folder"])
def test_read_only_corpus_is_one_line_and_untouched(tmp_path, what):
    base = shared_tmp("ro")
    corpus = write_corpus(base / "tiny")
    batch = _big_batch(base / "batch", 3)
    cache = base / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    cache.chmod(0o777)
    for p in cache.rglob("*"):
        p.chmod(0o777)
    files = _digests(corpus)
    if what == "files":
        for p in corpus.iterdir():
            p.chmod(0o444)
    corpus.chmod(0o555)
    try:
        msg = _one_line(run_cli("corpus", "add", str(corpus), str(batch), cache_dir=cache, unprivileged=True))
    finally:
        corpus.chmod(0o755)
    assert msg.startswith(f"cannot append to the corpus {corpus}: Permission denied"), msg
    assert msg.endswith("; its files are unchanged")
    if what == "files":
        assert f"({corpus / 'papers.jsonl'})" in msg
    else:
        assert f"its folder must be writable (an append keeps its journal {JOURNAL} there)" in msg
    assert _digests(corpus) == files


# ---- killed mid-append: a subprocess that SIGKILLs itself at a chosen point ------------------------------
_KILLER = """
import os, signal, sys
from pathlib import Path
from crase_core import atomic
from crase_core.store import append_journal, corpus_folder

point = sys.argv[3]
def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "journal-written":
    append_journal.Append.write = die
elif point == "mid-write":
    def write(self):
        p = self.planned[0]
        f = self.files[p.name]
        f.seek(p.before)
        f.write(p.data[: len(p.data) // 2])  # papers.jsonl ends in a cut-off line
        f.flush()
        os.fsync(f.fileno())
        die()
    append_journal.Append.write = write
elif point == "files-grown":
    atomic.publish_dir = die
elif point == "segment-published":
    append_journal.Append.commit = die
corpus_folder.add_papers(Path(sys.argv[1]), Path(sys.argv[2]), merge_policy=False)
"""


def _killed_append(corpus: Path, batch: Path, cache: Path, point: str) -> None:
    r = subprocess.run([sys.executable, "-c", _KILLER, str(corpus), str(batch), point], cwd=str(REPO),
                       env=cli_env(cache), capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    assert (corpus / JOURNAL).is_file()


@pytest.mark.fault_kind("corpus-add-killed-before-publish")
@pytest.mark.parametrize("point", ["journal-written", "mid-write", "files-grown"])
def test_append_killed_before_its_segment_is_published_is_rolled_back(tmp_path, point):
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    clean = query(corpus, cache)
    assert clean.returncode == 0
    files = _digests(corpus)
    _killed_append(corpus, batch, cache, point)
    if point == "mid-write":
        assert _digests(corpus) != files  # papers.jsonl really holds half a batch now
    r = query(corpus, cache)
    assert r.returncode == 0, r.stderr
    assert "an interrupted `crase corpus add` to" in r.stderr and "was rolled back: the corpus files are exactly " \
        "as they were before it" in r.stderr
    assert _digests(corpus) == files and ranked(r.stdout) == ranked(clean.stdout)
    again = run_cli("corpus", "add", str(corpus), str(batch), cache_dir=cache)  # the append, run again, works
    assert again.returncode == 0 and "added 2 papers and 4 citations" in again.stdout, again.stderr
    assert len(open_corpus_in(corpus, cache)) == 6


def open_corpus_in(corpus: Path, cache: Path):
    old = os.environ.get("CRASE_CACHE_DIR")
    os.environ["CRASE_CACHE_DIR"] = str(cache)
    try:
        return open_corpus(corpus)
    finally:
        os.environ["CRASE_CACHE_DIR"] = old or ""


@pytest.mark.fault_kind("corpus-add-killed-after-publish")
def test_append_killed_after_its_segment_was_published_is_completed(tmp_path):
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    _killed_append(corpus, batch, cache, "segment-published")
    r = query(corpus, cache)
    assert r.returncode == 0 and "was completed: the corpus holds its papers" in r.stderr, r.stderr
    assert not (corpus / JOURNAL).exists()
    whole = query(write_corpus(tmp_path / "whole"), tmp_path / "other-cache")  # the grown corpus, built in one go
    assert ranked(r.stdout) == ranked(whole.stdout)
    grown = open_corpus_in(corpus, cache)
    assert len(grown) == 6 and grown.n_citations == 7 and len(grown.segments) == 1  # no rebuild: the segment is used


@pytest.mark.fault_kind("corpus-query-during-append")
def test_a_query_during_an_append_waits_for_it(tmp_path):
    """A reader that opens the corpus while an append is writing waits for it (the journal's lock), then
    reads the grown corpus; it never rolls back a live append."""
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    slow = _KILLER.replace('corpus_folder.add_papers(', 'import time\nreal = atomic.publish_dir\n'
                           'def slow(*a):\n    time.sleep(3)\n    return real(*a)\natomic.publish_dir = slow\n'
                           'corpus_folder.add_papers(')
    appender = subprocess.Popen([sys.executable, "-c", slow, str(corpus), str(batch), "none"], cwd=str(REPO),
                                env=cli_env(cache), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (corpus / JOURNAL).exists():
            assert appender.poll() is None and time.monotonic() < deadline, appender.stderr
            time.sleep(0.02)
        r = query(corpus, cache)
        finished = appender.wait(60)
    finally:
        if appender.poll() is None:
            appender.kill()
            appender.wait()
    assert finished == 0
    assert r.returncode == 0 and "interrupted" not in r.stderr, r.stderr
    whole = query(write_corpus(tmp_path / "whole"), tmp_path / "other-cache")
    assert ranked(r.stdout) == ranked(whole.stdout)


@pytest.mark.fault_kind("corpus-planted-journal")
@pytest.mark.parametrize("journal", ["outside", "absolute", "fifo", "huge", "garbage"])
def test_a_planted_journal_never_cuts_a_file(tmp_path, journal):
    from crase_core.store import append_journal

    corpus = write_corpus(tmp_path / "tiny")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n" * 100)
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    files = _digests(corpus)
    record = {"name": "../victim.txt", "before": 0, "tail_sha256": "", "after": 5, "sha256": ""}
    path = corpus / JOURNAL
    if journal == "fifo":
        os.mkfifo(path)
    elif journal == "huge":
        path.write_bytes(b" " * (append_journal.MAX_JOURNAL_BYTES + 1))
    elif journal == "garbage":
        path.write_bytes(b"\x00\xff{not json")
    else:
        if journal == "absolute":
            record["name"] = str(victim)
        path.write_text(json.dumps({"format": append_journal.FORMAT, "version": 1, "segment": "x", "files": [record]}))
    t = time.monotonic()
    r = query(corpus, cache, timeout=30)
    assert time.monotonic() - t < 20  # a FIFO never blocks the open
    msg = _one_line(r)
    assert msg.startswith(f"{path} is not a journal Crase can settle (") and msg.endswith(
        f"the corpus files were not touched: check them, then delete {JOURNAL}"), msg
    assert victim.read_text() == "keep me\n" * 100
    assert {k: v for k, v in _digests(corpus).items() if k != JOURNAL} == files


@pytest.mark.fault_kind("corpus-file-edited-after-interrupted-append")
def test_a_file_changed_after_an_interrupted_append_is_not_cut(tmp_path):
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", TINY_PAPERS[4:], TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    assert run_cli("corpus", "build", str(corpus), cache_dir=cache).returncode == 0
    _killed_append(corpus, batch, cache, "files-grown")
    papers = corpus / "papers.jsonl"
    edited = papers.read_bytes().replace(b"Black hole entropy from D-branes", b"Black hole entropy from D-BRANES")
    papers.write_bytes(edited)  # someone edited an old line since
    msg = _one_line(query(corpus, cache))
    assert msg == (f"an interrupted `crase corpus add` left {corpus / JOURNAL}, but {papers} changed since (its "
                   "bytes before the append are not what they were), so it is not cut back: check the file, "
                   f"then delete {JOURNAL}")
    assert papers.read_bytes() == edited


@pytest.mark.fault_kind("corpus-add-nothing-new")
@pytest.mark.parametrize("batch_kind", ["itself", "copy", "known-ids"])
def test_a_batch_that_adds_nothing_appends_nothing(tmp_path, batch_kind):
    corpus = write_corpus(tmp_path / "tiny")
    cache = tmp_path / "cache"
    clean = query(corpus, cache)
    files = _digests(corpus)
    batch = {"itself": corpus, "copy": write_corpus(tmp_path / "copy"),
             "known-ids": write_corpus(tmp_path / "known", [(p[0], 2020, "Another record", "x") for p in TINY_PAPERS],
                                       TINY_CITATIONS[:2])}[batch_kind]
    r = run_cli("corpus", "add", str(corpus), str(batch), cache_dir=cache)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"nothing added to tiny: every paper and citation of {batch} is in it already; "
                                "its files are unchanged (6 papers)")
    assert _digests(corpus) == files
    again = query(corpus, cache)
    assert ranked(again.stdout) == ranked(clean.stdout)


@pytest.mark.fault_kind("corpus-add-known-ids")
def test_only_the_new_papers_of_a_mixed_batch_are_appended(tmp_path):
    corpus = write_corpus(tmp_path / "tiny", TINY_PAPERS[:4], TINY_CITATIONS[:3])
    batch = write_corpus(tmp_path / "batch", [*TINY_PAPERS[:4], TINY_PAPERS[4], TINY_PAPERS[4], TINY_PAPERS[5]],
                         TINY_CITATIONS[3:])
    cache = tmp_path / "cache"
    old = (corpus / "papers.jsonl").read_bytes()
    r = run_cli("corpus", "add", str(corpus), str(batch), cache_dir=cache)
    assert r.returncode == 0 and "added 2 papers and 4 citations" in r.stdout, r.stderr
    grown = (corpus / "papers.jsonl").read_bytes()
    assert grown.startswith(old)
    assert [json.loads(line)["id"] for line in grown[len(old):].splitlines()] == ["0001001", "0002001"]
    whole = query(write_corpus(tmp_path / "whole"), tmp_path / "other-cache")
    assert ranked(query(corpus, cache).stdout) == ranked(whole.stdout)
