"""Stage 1 planning: query → up to L keyword sub-queries.

The ``Planner`` interface is shared by the offline planners here and the model
planner (``crase_core.llm``). Two offline planners:

* :class:`PhrasePlanner` (corpus-aware): finds the query's aspects as phrases of
  the field and adds the field's own terms for them, from corpus statistics
  (:class:`FieldVocabulary`; see its docstring);
* :class:`KeywordPlanner` (word deletion), described below.

The :class:`KeywordPlanner` is deterministic and only ever *removes* words from
the query, so it cannot add tasks, methods, data sets or domains (the paper's
planning rule):

1. ρ₁ = the query's content words — stop words removed, and the words of how a question is put
   (:data:`QUESTION_WORDS`: "looking for", "an analysis of", "is proven", "an explanation of") —
   capped at the ``max_terms`` rarest (corpus IDF; a word the corpus never uses retrieves nothing and
   comes last), in query order;
2. one sub-query per clause of the query (split at punctuation and at
   connectives such as "via", "using", "with", "and"), clauses with the most
   IDF mass first;
3. if fewer than L remain, the rarest 4, then 3, then 2 content words.
Duplicates (same set of stems) are dropped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from crase_core.records import PlanResult
from crase_core.text import content_words, stem

if TYPE_CHECKING:
    import scipy.sparse as sp

_CLAUSE_SPLIT = re.compile(
    r"[,;:?!()\[\]]|\.\s|\s(?:via|using|through|with|and|or|by|whether|where|while|versus|vs\.?|without|"
    r"such as|including|rather than)\s",
    re.IGNORECASE,
)


#: how a literature question is put, not what it asks about: the request ("looking for", "we need"), the kind of
#: text wanted ("an analysis", "a description", "an explanation", "an overview") and the asker's framing ("is it
#: proven", "is it known", "does someone demonstrate"). Matched by stem, so every inflection goes (no word here
#: shares its stem with a term of the field: "related" is not here, its stem is relativity's).
QUESTION_WORDS: frozenset[str] = frozenset(str.split(
    "looking look seeking seek searching want wanted wish need needed needs interested curious recommend "
    "suggest suggestion analysis analyses analyze analyzed analyzing analyse analysed analysing investigation "
    "investigate investigated investigating examine examined examining examination explain explained "
    "explaining explanation explanations describe described describing description descriptions discussion "
    "discussions overview treatment treat treated account understand understanding insight insights known "
    "proven prove proves proved proving demonstrate demonstrated demonstrating demonstration argue argued "
    "arguing establish established establishing possible possibly particular specific specifically "
    "regarding concerning address addressed addressing"))
QUESTION_STEMS: frozenset[str] = frozenset(stem(w) for w in QUESTION_WORDS)


def planning_words(text: str) -> list[str]:
    """The content words of ``text`` that say what it asks about: :func:`~crase_core.text.content_words`
    without the words of how it is asked (:data:`QUESTION_WORDS`, by stem)."""
    return [w for w in content_words(text) if stem(w) not in QUESTION_STEMS]


class Planner(Protocol):
    """Turns a query into keyword sub-queries. A planner with a true ``offline`` attribute (the keyword and
    phrase planners) plans with ``PipelineSettings.L_offline`` sub-queries, any other (a model) with ``L``."""

    identity: str

    def plan(self, query: str, max_subqueries: int) -> PlanResult: ...


class KeywordPlanner:
    """Deterministic offline planner (see module docstring)."""

    identity = "keyword-planner/v2"
    offline = True

    def __init__(self, idf: Callable[[str], float] | None = None, max_terms: int = 10,
                 known: Callable[[str], bool] | None = None):
        """``idf``: of a stem (default: the stem's length); ``known``: whether the corpus has the stem (default:
        every stem is known)."""
        self._idf = idf or (lambda term: float(len(term)))
        self._known = known or (lambda term: True)
        self.max_terms = max_terms

    def _weight(self, word: str) -> float:
        st = stem(word)
        return self._idf(st) if self._known(st) else -1.0  # an unknown word retrieves nothing: rarest last

    def _dedupe_words(self, words: list[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for w in words:
            s = stem(w)
            if s not in seen:
                seen.add(s)
                out.append(w)
        return out

    def _rarest(self, words: list[str], n: int) -> list[str]:
        keep = set(sorted(words, key=lambda w: (-self._weight(w), w))[:n])
        return [w for w in words if w in keep]

    def plan(self, query: str, max_subqueries: int) -> PlanResult:
        words = self._dedupe_words(planning_words(query))
        if not words:
            return PlanResult(query=query, subqueries=[], planner=self.identity,
                              notes=["the query has no content words to search for"])
        candidates: list[list[str]] = [self._rarest(words, self.max_terms)]
        clauses = []
        for part in _CLAUSE_SPLIT.split(query):
            cw = self._dedupe_words(planning_words(part or ""))
            if cw:
                clauses.append(self._rarest(cw, self.max_terms))
        clauses.sort(key=lambda c: -sum(self._weight(w) for w in c))
        candidates.extend(c for c in clauses if len(c) >= 2 or (len(c) == 1 and len(words) == 1))
        for n in (4, 3, 2):
            if len(words) > n:
                candidates.append(self._rarest(words, n))
        subqueries: list[str] = []
        seen: set[frozenset[str]] = set()
        for cand in candidates:
            key = frozenset(stem(w) for w in cand)
            if key and key not in seen:
                seen.add(key)
                subqueries.append(" ".join(cand))
            if len(subqueries) >= max_subqueries:
                break
        return PlanResult(query=query, subqueries=subqueries, planner=self.identity)


# ---- the corpus-aware planner ---------------------------------------------------------------------------
@dataclass
class FieldVocabulary:
    """What the :class:`PhrasePlanner` knows about the field: aggregate corpus statistics only.

    ``indptr``/``indices``: the BM25 index's postings (stem id → ids of the documents holding it),
    ``title_bigrams``: how often two content stems stand next to each other in a title (``title_terms``:
    how often each stem occurs in titles),
    ``surface``: the most frequent title spelling of each stem (a sub-query shows words, not stems).
    No paper id is kept, so a plan cannot point at a particular (e.g. hidden) paper; document
    frequencies count every paper of the corpus, as the BM25 index's IDF does.
    """

    n_docs: int
    vocab: dict[str, int]
    indptr: np.ndarray
    indices: np.ndarray
    title_bigrams: Counter[tuple[str, str]]
    title_terms: Counter[str]
    surface: dict[str, str]
    _doc_terms: sp.csr_matrix | None = field(default=None, repr=False)

    @classmethod
    def build(cls, index: Any, titles: Iterable[str]) -> FieldVocabulary:
        """From a :class:`~crase_core.store.textindex.TextIndex` (its postings) and the corpus's titles."""
        scores = index.retriever.scores
        bigrams: Counter[tuple[str, str]] = Counter()
        unigrams: Counter[str] = Counter()
        spellings: Counter[tuple[str, str]] = Counter()
        for title in titles:
            ws = content_words(title)
            stems = [stem(w) for w in ws]
            spellings.update(zip(stems, ws, strict=True))
            unigrams.update(stems)
            bigrams.update(zip(stems, stems[1:], strict=False))
        surface: dict[str, str] = {}
        for (st, w), _ in sorted(spellings.items(), key=lambda kv: (-kv[1], kv[0])):
            surface.setdefault(st, w)
        return cls(int(scores["num_docs"]), dict(index.vocab), np.asarray(scores["indptr"]),
                   np.asarray(scores["indices"]), bigrams, unigrams, surface)

    @classmethod
    def from_source(cls, source: Any) -> FieldVocabulary:
        """From a :class:`~crase_core.sources.local.LocalSource` (its text index and corpus titles)."""
        papers = source.corpus.papers
        texts = getattr(papers, "texts", None)  # a store-backed corpus: titles read from the mapped column
        return cls.build(source.text_index, texts("title") if texts is not None else (p.title for p in papers))

    def docs(self, st: str) -> np.ndarray:
        tid = self.vocab.get(st)
        if tid is None or tid + 1 >= len(self.indptr):
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.indices[self.indptr[tid]:self.indptr[tid + 1]])

    def df(self, st: str) -> int:
        return int(self.docs(st).size)

    def idf(self, st: str) -> float:
        """BM25's IDF, ln(1 + (N − df + 0.5)/(df + 0.5)); an unknown stem counts as seen once."""
        df = self.df(st) or 1
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def title_share(self, st: str) -> float:
        """Title occurrences per document holding the stem: near 0 for words the field never titles with."""
        return self.title_terms.get(st, 0) / max(1, self.df(st))

    def docs_with_all(self, stems: Sequence[str]) -> np.ndarray:
        out: np.ndarray | None = None
        for st in stems:
            d = self.docs(st)
            out = d if out is None else np.intersect1d(out, d, assume_unique=True)
        return out if out is not None else np.zeros(0, dtype=np.int64)

    def npmi(self, a: str, b: str) -> float:
        """Normalised pointwise mutual information of two stems' document occurrence, in [−1, 1]."""
        na, nb, nab = self.df(a), self.df(b), int(self.docs_with_all([a, b]).size)
        if not na or not nb or not nab:
            return -1.0
        p_ab = nab / self.n_docs
        if p_ab >= 1.0:
            return 1.0
        return math.log(p_ab / ((na / self.n_docs) * (nb / self.n_docs))) / -math.log(p_ab)

    def associated_terms(self, stems: Sequence[str], n: int, exclude: set[str]) -> list[str]:
        """Up to ``n`` stems most over-represented in the documents holding all ``stems`` (corpus co-occurrence).

        Score c·ln(c·N / (|D|·df)) (a term's contribution to the KL divergence of D from the corpus),
        for stems with a title spelling, in ≥ 3 documents of D and ≥ 3× their corpus rate.
        """
        d = self.docs_with_all(stems)
        if d.size < 3:
            return []
        if self._doc_terms is None:
            import scipy.sparse as sp

            nnz = self.indices.size
            self._doc_terms = sp.csc_matrix((np.ones(nnz, dtype=np.float32), self.indices, self.indptr),
                                            shape=(self.n_docs, len(self.indptr) - 1)).tocsr()
        counts = np.asarray(self._doc_terms[d].sum(axis=0)).ravel()
        df = np.diff(self.indptr).astype(float)
        terms = {tid: st for st, tid in self.vocab.items()}
        scored = []
        for tid in np.flatnonzero(counts >= 3):
            st = terms.get(int(tid))
            if st is None or st in exclude or st not in self.surface or st.isdigit():
                continue
            lift = counts[tid] * self.n_docs / (d.size * df[tid])
            if lift >= 3.0:
                scored.append((float(counts[tid] * math.log(lift)), st))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [st for _, st in scored[:n]]


@dataclass(frozen=True)
class Aspect:
    """One aspect of a query: a phrase of the field (one or more of the query's words, in order)."""

    words: tuple[str, ...]
    weight: float  # Σ IDF · title-share factor of its stems (see PhrasePlanner)

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def stems(self) -> tuple[str, ...]:
        return tuple(stem(w) for w in self.words)


class PhrasePlanner:
    """Deterministic, corpus-aware offline planner: aspects as field phrases, plus the field's terms.

    1. The query's content words are split into clauses (as :class:`KeywordPlanner` does) and, inside a
       clause, neighbouring words a b are joined into one phrase when the field uses them together: "a b"
       stands in ≥ ``min_bigram`` titles and makes up ≥ ``min_share`` of the title occurrences of a or
       of b, or their document co-occurrence has NPMI ≥ ``min_npmi``. Each phrase (≤ 4 words) is an
       aspect, except a single word in more than ``max_df_share`` of the documents ("theory", "model") or
       one the field hardly ever puts in a title (title share < ``min_title_share``: "finding",
       "treating"). An aspect weighs Σ IDF·min(1, title share / 0.15) over its words: the field's terms
       stand in titles, the words of a question's framing do not.
    2. Sub-queries, each with its purpose recorded in the plan's ``notes``:
       the whole question (its ``max_terms`` rarest content words); pairs of the strongest aspects
       (what the question combines); each multi-word aspect alone; then, up to L, the strongest aspect
       with the two next terms the corpus associates with it (:meth:`FieldVocabulary.associated_terms`).
    3. A candidate is dropped when its stems repeat an earlier one's, or when the papers holding all its
       stems are (≥ 90%) the same set as an earlier candidate's (it would retrieve the same papers).
    """

    identity = "phrase-planner/v1"
    offline = True

    def __init__(self, vocabulary: FieldVocabulary, max_terms: int = 10, min_bigram: int = 3,
                 min_share: float = 0.05, min_npmi: float = 0.35, max_df_share: float = 0.05, max_aspects: int = 4,
                 min_title_share: float = 0.02):
        self.min_title_share = min_title_share
        self.vocabulary = vocabulary
        self.min_share = min_share
        self.max_terms = max_terms
        self.min_bigram = min_bigram
        self.min_npmi = min_npmi
        self.max_df_share = max_df_share
        self.max_aspects = max_aspects

    def _joined(self, a: str, b: str) -> bool:
        v = self.vocabulary
        sa, sb = stem(a), stem(b)
        n = v.title_bigrams.get((sa, sb), 0)
        if n >= self.min_bigram and n >= self.min_share * min(v.title_terms[sa], v.title_terms[sb]):
            return True
        return v.npmi(sa, sb) >= self.min_npmi

    def aspects(self, query: str) -> list[Aspect]:
        """The query's aspects, strongest first (ties: query order)."""
        v = self.vocabulary
        seen: set[str] = set()
        phrases: list[list[str]] = []
        for part in _CLAUSE_SPLIT.split(query):
            current: list[str] = []
            for w in content_words(part or ""):
                st = stem(w)
                if st in seen or not v.df(st):
                    continue  # a repeated word, or one the corpus never uses (it retrieves nothing)
                seen.add(st)
                if current and len(current) < 4 and self._joined(current[-1], w):
                    current.append(w)
                else:
                    if current:
                        phrases.append(current)
                    current = [w]
            if current:
                phrases.append(current)
        out = []
        for i, ph in enumerate(phrases):
            if len(ph) == 1 and (v.df(stem(ph[0])) > self.max_df_share * v.n_docs
                                 or v.title_share(stem(ph[0])) < self.min_title_share):
                continue
            weight = sum(v.idf(stem(w)) * min(1.0, v.title_share(stem(w)) / 0.15) for w in ph)
            out.append((i, Aspect(tuple(ph), weight)))
        out.sort(key=lambda x: (-x[1].weight, x[0]))
        return [a for _, a in out]

    def plan(self, query: str, max_subqueries: int) -> PlanResult:
        words = KeywordPlanner(idf=self.vocabulary.idf)._dedupe_words(content_words(query))
        if not words:
            return PlanResult(query=query, subqueries=[], planner=self.identity,
                              notes=["the query has no content words to search for"])
        aspects = self.aspects(query)
        rarest = KeywordPlanner(idf=self.vocabulary.idf, max_terms=self.max_terms)._rarest(words, self.max_terms)
        candidates: list[tuple[list[str], str]] = [(rarest, "the whole question (its rarest content words)")]
        top = aspects[: self.max_aspects]
        pairs = [(a, b) for i, a in enumerate(top) for b in top[i + 1:]]
        pairs.sort(key=lambda ab: -(ab[0].weight + ab[1].weight))
        for a, b in pairs:
            first, second = (a, b) if query.lower().find(a.words[0]) <= query.lower().find(b.words[0]) else (b, a)
            candidates.append(([*first.words, *second.words], f"aspects “{a.text}” and “{b.text}” together"))
        for a in top:
            if len(a.words) > 1:
                candidates.append((list(a.words), f"the aspect “{a.text}” alone"))
        if top:
            base = top[0]
            exclude = {stem(w) for w in words}
            terms = self.vocabulary.associated_terms(base.stems, 2 * max_subqueries, exclude)
            for i in range(0, len(terms) - 1, 2):
                extra = [self.vocabulary.surface[t] for t in terms[i:i + 2]]
                candidates.append(([*base.words, *extra], f"“{base.text}” with the field's terms the corpus "
                                   f"associates with it: {', '.join(extra)}"))
        return self._select(query, candidates, max_subqueries, aspects)

    def _select(self, query: str, candidates: list[tuple[list[str], str]], max_subqueries: int,
                aspects: list[Aspect]) -> PlanResult:
        subqueries: list[str] = []
        notes = ["aspects: " + "; ".join(f"“{a.text}”" for a in aspects) if aspects else
                 "no aspect found: the question's words are either unknown to the corpus or very common"]
        seen: set[frozenset[str]] = set()
        doc_sets: list[np.ndarray] = []
        for words, purpose in candidates:
            key = frozenset(stem(w) for w in words)
            if not key or key in seen:
                continue
            d = self.vocabulary.docs_with_all(sorted(key))
            if d.size and any(_jaccard(d, e) >= 0.9 for e in doc_sets if e.size):
                continue
            seen.add(key)
            doc_sets.append(d)
            subqueries.append(" ".join(words))
            notes.append(f"sub-query {len(subqueries)} “{subqueries[-1]}”: {purpose}")
            if len(subqueries) >= max_subqueries:
                break
        return PlanResult(query=query, subqueries=subqueries, planner=self.identity, notes=notes)


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0
