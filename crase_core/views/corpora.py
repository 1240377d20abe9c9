"""The corpora a front end can offer: the embedded one, the operator's, and every corpus folder imported into
the cache's ``corpora`` folder; names for new imports; demo queries taken from a corpus's own papers.

A visitor never types a path that is used as given: a typed folder is opened only when it resolves (links
followed) inside the corpora folder or is the operator's corpus (:func:`resolve_choice`), and an import's
folder name is a short slug checked by :func:`import_folder` (no separator, no dot first).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crase_core.errors import InputError
from crase_core.settings import environment
from crase_core.store.corpus import DEFAULT_CORPUS_DIR, Corpus
from crase_core.views.paper_text import shorten_words
from crase_core.views.tex import to_plain

#: the folders one listing looks into below the corpora folder (``corpora/NAME`` and ``corpora/GROUP/NAME``)
MAX_DEPTH = 2
#: the most entries one listing reads (a huge folder is cut, never walked whole)
MAX_ENTRIES = 2000
EMBEDDED = "embedded"
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,59}")


@dataclass(frozen=True)
class CorpusChoice:
    """One corpus a visitor may pick: ``key`` is :data:`EMBEDDED` or the folder's resolved path (as text)."""

    key: str
    name: str
    folder: Path
    embedded: bool = False

    @property
    def corpus_dir(self) -> str:
        """The ``runtime.corpus_dir`` setting that opens it (the embedded corpus by its folder too, so that
        ``$CRASE_CORPUS`` does not stand in for it)."""
        return str(self.folder)


def corpora_folder(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where imported corpora live: ``<cache dir>/corpora``."""
    return Path(cache_dir or environment.cache_folder()) / "corpora"


def is_corpus_folder(folder: Path) -> bool:
    """A folder holding ``papers.jsonl`` and ``citations.tsv`` (either may be gzipped)."""
    return all(any((folder / f"{stem}{ext}").is_file() for ext in ("", ".gz"))
               for stem in ("papers.jsonl", "citations.tsv"))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def find_corpora(root: Path) -> list[Path]:
    """The corpus folders under ``root`` (at most :data:`MAX_DEPTH` deep, links leading outside it skipped,
    at most :data:`MAX_ENTRIES` entries read), sorted by name."""
    try:
        base = root.resolve(strict=True)
    except OSError:
        return []
    found: list[Path] = []
    seen = 0
    level = [base]
    for _ in range(MAX_DEPTH):
        below: list[Path] = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return sorted(found, key=lambda p: p.name.lower())
                if entry.name.startswith("."):
                    continue
                try:
                    path = Path(entry.path).resolve(strict=True)
                    if not _inside(path, base) or not path.is_dir():
                        continue
                except OSError:
                    continue
                if is_corpus_folder(path):
                    found.append(path)
                else:
                    below.append(path)
        level = below
    return sorted(found, key=lambda p: p.name.lower())


def embedded_choice() -> CorpusChoice:
    return CorpusChoice(EMBEDDED, "hep-th (embedded)", DEFAULT_CORPUS_DIR, embedded=True)


def available(cache_dir: str | os.PathLike[str] | None = None, operator_corpus: str | None = None) -> list[CorpusChoice]:
    """The corpora to offer: the operator's corpus (when set), the embedded one, then every corpus folder
    under :func:`corpora_folder`; each folder once."""
    out: list[CorpusChoice] = []
    keys: set[str] = set()

    def add(choice: CorpusChoice) -> None:
        if choice.key not in keys:
            keys.add(choice.key)
            out.append(choice)

    if operator_corpus:
        try:
            folder = Path(operator_corpus).resolve(strict=True)
            add(CorpusChoice(str(folder), folder.name, folder))
        except OSError:
            pass
    add(embedded_choice())
    for folder in find_corpora(corpora_folder(cache_dir)):
        add(CorpusChoice(str(folder), folder.name, folder))
    return out


def resolve_choice(text: str, cache_dir: str | os.PathLike[str] | None = None,
                   operator_corpus: str | None = None) -> CorpusChoice:
    """The corpus folder a visitor typed, when it is one they may open: inside :func:`corpora_folder` (a
    path relative to it, or absolute) or the operator's corpus. InputError (one line) otherwise."""
    typed = text.strip()
    if not typed:
        raise InputError("type a corpus folder")
    root = corpora_folder(cache_dir)
    allowed = [root.resolve()] if root.exists() else []
    path = Path(typed).expanduser()
    candidate = path if path.is_absolute() else root / path
    try:
        folder = candidate.resolve(strict=True)
    except OSError:
        raise InputError(f"no such folder: {typed}") from None
    operator = Path(operator_corpus).resolve() if operator_corpus else None
    if folder != operator and not any(_inside(folder, a) for a in allowed):
        raise InputError(f"only corpus folders inside {root} open here (import one there first)")
    if not folder.is_dir() or not is_corpus_folder(folder):
        raise InputError(f"{typed} is not a corpus folder (it needs papers.jsonl and citations.tsv)")
    return CorpusChoice(str(folder), folder.name, folder)


def import_folder(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The new folder an import named ``name`` goes to (``<corpora folder>/name``): a short name of letters,
    digits, ``-``, ``_`` and ``.`` (not first), not taken yet. InputError otherwise."""
    slug = name.strip()
    if not _SLUG.fullmatch(slug):
        raise InputError("name the corpus with letters, digits, '-', '_' or '.' (at most 60, not starting "
                         "with '.' or '-')")
    dest = corpora_folder(cache_dir) / slug
    if dest.exists():
        raise InputError(f"a corpus named {slug} exists already; choose another name")
    return dest


@dataclass(frozen=True)
class DemoQuery:
    label: str
    query: str
    paper_id: str  # the paper whose title it is


def demo_queries(corpus: Corpus, n: int = 4, label_words: int = 38) -> list[DemoQuery]:
    """``n`` questions from the corpus's own papers: the titles (TeX rendered) of its most-cited papers, most
    cited first; without citations, of its first papers. A title of fewer than three words is passed over."""
    papers: Sequence = corpus.papers
    if not len(papers):
        return []
    degree = corpus.in_degree()
    order = np.argsort(-np.asarray(degree), kind="stable") if degree.size and degree.max() > 0 else np.arange(len(papers))
    out: list[DemoQuery] = []
    seen: set[str] = set()
    for i in order[: max(50, 10 * n)]:
        title = " ".join(to_plain(papers[int(i)].title).split())
        if len(title.split()) < 3 or title.lower() in seen:
            continue
        seen.add(title.lower())
        out.append(DemoQuery(shorten_words(title, label_words), title, papers[int(i)].id))
        if len(out) == n:
            break
    return out
