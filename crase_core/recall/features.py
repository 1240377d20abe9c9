"""What a run knows about its own completeness: the features of the recall estimate, from a trace alone.

:func:`recall_features` reads a :class:`~crase_core.trace.RunTrace` (nothing else: no corpus, no network) and
returns one number per name of :data:`FEATURES`. Each is a fact of the run a reader can check in the trace:

* how the question met the corpus — its length and form, how rare its words are, how much of it the best
  matching paper holds (``QueryCoverage``), how sharply the full-question search's scores fall off;
* how far the independent lists agree — the text search, the citation walk, each sub-query's search and the
  walk's restart list: the share of the returned list that both the search and the walk put in their top k,
  the share that two or more lists found (capture–recapture: a list that many searches re-find is closer to
  complete), and Chao's lower bound of the share of all findable papers the lists found;
* the evidence graph — its size, the share of edges kept, how tightly the returned papers cite each other,
  how many seeds survived pruning;
* the score shape of the returned list — how much the last place scores against the first;
* the question's best text match, a stand-in for the paper the question is about (its references are the graph's
  in full): how old it is against the graph's newest paper, how many references it has, how many of them the
  list holds; and how many seeds two searches agreed on.

Pure functions; the features' order is fixed by :data:`FEATURES` (a calibration names them).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crase_core.trace import RunTrace

#: the features of the estimate, in the order a calibration's coefficients follow
FEATURES: tuple[str, ...] = (
    "query_words", "question_form", "title_form", "rare_term_share", "best_match_share", "mean_term_idf",
    "text_gap_10", "text_gap_50", "strong_matches", "top_score", "top_bm25", "semantic_share",
    "text_walk_overlap", "list_text_overlap", "list_walk_overlap", "multi_list_share", "chao_completeness",
    "graph_nodes", "graph_edges", "kept_edge_share", "seed_kept_share",
    "list_in_graph", "list_link_density", "list_linked_share", "list_seed_share", "score_tail",
    "walk_mass", "list_age", "seed_ref_recall", "reference_coverage", "reference_mass",
    "best_match_age", "best_match_refs", "best_match_list_share", "seed_agreement",
)
#: words that open a question or a request rather than a title
_QUESTION_OPENERS = frozenset({
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "which", "what", "how", "why", "where", "when",
    "who", "looking", "find", "i", "papers", "paper", "work", "studies", "study", "any", "has", "have", "show",
})
_WORD = re.compile(r"\w+", re.UNICODE)


def question_form(query: str) -> bool:
    """Whether ``query`` reads as a question or a request (ends with "?", or opens with a question word or
    "looking for", "papers on" …) rather than a title or a bag of keywords."""
    q = query.strip()
    words = _WORD.findall(q.lower())
    return q.endswith("?") or bool(words and words[0] in _QUESTION_OPENERS)


def title_form(query: str) -> bool:
    """Whether ``query`` reads as a paper title: under 20 words, not a question, its first letter a capital
    (a typed phrase or a question is the other form)."""
    letters = [c for c in query if c.isalpha()]
    return bool(letters) and letters[0].isupper() and not question_form(query) and len(_WORD.findall(query)) < 20


def symbol_start(query: str) -> bool:
    """Whether ``query`` opens with a term that is capitalised wherever it stands ("D-branes", "N=4", "SL(2,Z)",
    "M2-branes", "QCD/String": a capital followed by anything but a lower-case letter), so that its first capital
    does not tell a title from a typed phrase."""
    words = query.split()
    first = words[0] if words else ""
    return len(first) > 1 and first[0].isupper() and not first[1].islower()


def form_value(query: str) -> float:
    """The ``title_form`` feature: 1 for a title-like query, 0 for a question or typed phrase, 0.5 for one that
    reads as a title only by a symbol's capital (:func:`symbol_start`: either form)."""
    if not title_form(query):
        return 0.0
    return 0.5 if symbol_start(query) else 1.0


def _overlap(a: Sequence[str], b: Iterable[str], k: int) -> float:
    """|a[:k] ∩ b| / k (0 for k = 0)."""
    if k <= 0:
        return 0.0
    top = set(a[:k])
    return len(top & set(b)) / k


def walk_order(trace: RunTrace) -> list[str]:
    """The graph's papers by their walk score alone, best first (ties by id)."""
    return [n for n, _ in sorted(trace.ranking.scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def found_lists(trace: RunTrace, depth: int) -> list[list[str]]:
    """The run's independent-ish lists of candidates, each cut at ``depth``: every sub-query's search, the
    full-question search, the walk's restart list when it differs, and the walk's own order."""
    lists = [[h.paper_id for h in sq.hits[:depth]] for sq in trace.subquery_results]
    lists.append([h.paper_id for h in trace.query_hits[:depth]])
    if trace.restart_hits is not None:
        lists.append([h.paper_id for h in trace.restart_hits[:depth]])
    lists.append(walk_order(trace)[:depth])
    return [lst for lst in lists if lst]


def chao_completeness(lists: Sequence[Sequence[str]]) -> float:
    """S_obs / Ŝ with Chao's bias-corrected lower bound Ŝ = S_obs + f1(f1 − 1) / (2(f2 + 1)), where f1 (f2)
    is the number of papers exactly one (two) lists found (Chao 1987); 1 when nothing was found."""
    counts = Counter(p for lst in lists for p in set(lst))
    s_obs = len(counts)
    if not s_obs:
        return 1.0
    f1 = sum(1 for c in counts.values() if c == 1)
    f2 = sum(1 for c in counts.values() if c == 2)
    return s_obs / (s_obs + f1 * (f1 - 1) / (2.0 * (f2 + 1)))


def reference_coverage(papers: Sequence[str], refs: dict[str, set[str]], in_list: set[str]) -> tuple[float, float]:
    """(C, M·C): capture–recapture over the reference lists of ``papers`` (the question's closest seeds, whose
    references the graph holds in full). Each list is a sample of the papers this topic cites; C = 1 − f1/n is
    Good–Turing's estimate of the share of a further such paper's references that some list already holds
    (n references counted, f1 papers cited by exactly one list), and M the share of the n that the returned
    list holds. (0, 0) without references."""
    counts = Counter(p for s in papers for p in refs.get(s, ()))
    n = sum(counts.values())
    if not n:
        return 0.0, 0.0
    cov = 1.0 - sum(1 for c in counts.values() if c == 1) / n
    return cov, cov * sum(c for p, c in counts.items() if p in in_list) / n


def best_match(trace: RunTrace, refs: dict[str, set[str]]) -> str | None:
    """The question's best text match among the seeds whose references the graph holds (at least 3): the first
    of the full-question search's top 10 hits that is one; else the first such seed; None without one."""
    seeds = [s.paper_id for s in trace.seeds if len(refs.get(s.paper_id, ())) >= 3]
    ids = set(seeds)
    return next((h.paper_id for h in trace.query_hits[:10] if h.paper_id in ids), seeds[0] if seeds else None)


def recall_features(trace: RunTrace) -> dict[str, float]:
    """:data:`FEATURES` of ``trace`` (every value finite): the question's words, the text search's scores, how far
    the lists agree, and the graph and the references around the list."""
    k = max(1, int(trace.settings.k))
    feats = {**_query_features(trace), **_search_features(trace, k), **_agreement_features(trace, k),
             **_graph_features(trace, k)}
    return {name: float(feats[name]) if math.isfinite(feats[name]) else 0.0 for name in FEATURES}


def _query_features(trace: RunTrace) -> dict[str, float]:
    """How the question reads and how rare its words are in the corpus."""
    cov = trace.coverage
    terms = cov.terms if cov is not None else []
    n_papers = max(1, cov.n_papers) if cov is not None else 1
    idf = [math.log((n_papers + 1) / (t.papers + 1)) for t in terms]
    return {
        "query_words": math.log1p(len(_WORD.findall(trace.query))),
        "question_form": float(question_form(trace.query)),
        "title_form": form_value(trace.query),
        "rare_term_share": len(cov.rare_terms) / len(terms) if cov is not None and terms else 0.0,
        "best_match_share": float(cov.best_match_share) if cov is not None else 0.0,
        "mean_term_idf": sum(idf) / len(idf) if idf else 0.0,
    }


def _search_features(trace: RunTrace, k: int) -> dict[str, float]:
    """How sharply the full question's search scores fall, and how much of them semantic feedback gave."""
    scores = [h.score for h in trace.query_hits]
    top = scores[0] if scores and scores[0] > 0 else 0.0

    def gap(i: int) -> float:
        if top <= 0:
            return 0.0
        below = scores[i - 1] if len(scores) >= i else 0.0
        return max(0.0, min(1.0, 1.0 - below / top))

    sem = [h.parts.get("semantic feedback", 0.0) / h.score for h in trace.query_hits[:k] if h.score > 0]
    return {
        "text_gap_10": gap(10),
        "text_gap_50": gap(k),
        "strong_matches": math.log1p(sum(1 for x in scores if top > 0 and x > 0.5 * top)),
        "top_score": math.log1p(top),
        "top_bm25": math.log1p(max(0.0, trace.query_hits[0].parts.get("BM25", top))) if trace.query_hits else 0.0,
        "semantic_share": sum(sem) / len(sem) if sem else 0.0,
    }


def _agreement_features(trace: RunTrace, k: int) -> dict[str, float]:
    """How far the text search, the walk, the list and each sub-query's search agree (capture–recapture)."""
    results = [r.paper_id for r in trace.results]
    text = [h.paper_id for h in trace.query_hits]
    walk = walk_order(trace)
    lists = found_lists(trace, k)
    counts = Counter(p for lst in lists for p in set(lst))
    return {
        "text_walk_overlap": _overlap(text, walk[:k], k),
        "list_text_overlap": _overlap(results, text[:k], k),
        "list_walk_overlap": _overlap(results, walk[:k], k),
        "multi_list_share": sum(1 for p in results if counts.get(p, 0) >= 2) / k,
        "chao_completeness": chao_completeness(lists),
        "seed_agreement": sum(1 for s in trace.seeds if len(s.origins) > 1) / len(trace.seeds) if trace.seeds else 0.0,
    }


def _graph_features(trace: RunTrace, k: int) -> dict[str, float]:
    """The graph's size and what survived pruning, how densely the list cites itself, its scores and ages, and how
    much of the closest seeds' and the best match's references it holds."""
    results = [r.paper_id for r in trace.results]
    n_res = len(results)
    in_list = set(results)
    roles = {n.paper.id: n.role for n in trace.nodes}
    links: Counter[str] = Counter()
    n_links = 0
    refs: dict[str, set[str]] = {}
    for e in trace.edges:
        refs.setdefault(e.citing, set()).add(e.cited)
        if e.citing in in_list and e.cited in in_list and e.citing != e.cited:
            n_links += 1
            links[e.citing] += 1
            links[e.cited] += 1
    seed_order = list(dict.fromkeys(s.paper_id for s in trace.seeds))  # sums in a fixed order: the same bits every run
    seeds = set(seed_order)
    kept_edges = sum(1 for e in trace.edges if e.kept)
    r_scores = [r.score for r in trace.results]
    seed_recall = [len(refs[s] & in_list) / len(refs[s]) for s in seed_order if len(refs.get(s, ())) >= 3]
    close = [h.paper_id for h in trace.query_hits[:10] if h.paper_id in seeds and h.paper_id in refs] or \
        [s for s in seed_order if s in refs]
    coverage, mass = reference_coverage(close, refs, in_list)
    walk_scores = sorted(trace.ranking.scores.values(), reverse=True)
    years = {n.paper.id: n.paper.year for n in trace.nodes if n.paper.year}
    newest = max(years.values(), default=0)
    list_years = sorted(years[p] for p in results if p in years)
    top_hit = trace.query_hits[0].paper_id if trace.query_hits else None
    best = best_match(trace, refs)
    best_refs = refs.get(best, set()) if best is not None else set()
    return {
        "graph_nodes": math.log1p(len(trace.nodes)),
        "graph_edges": math.log1p(len(trace.edges)),
        "kept_edge_share": kept_edges / len(trace.edges) if trace.edges else 0.0,
        "seed_kept_share": sum(1 for s in trace.seeds if s.fate == "kept") / len(trace.seeds) if trace.seeds else 0.0,
        "list_in_graph": sum(1 for p in results if roles.get(p) != "text") / k,
        "list_link_density": math.log1p(n_links / k),
        "list_linked_share": sum(1 for p in results if links[p]) / k,
        "list_seed_share": sum(1 for p in results if p in seeds) / k,
        "score_tail": (r_scores[-1] / r_scores[0]) if n_res and r_scores[0] > 0 else 0.0,
        "walk_mass": sum(walk_scores[:k]) / sum(walk_scores) if walk_scores and sum(walk_scores) > 0 else 0.0,
        "list_age": newest - list_years[len(list_years) // 2] if list_years else 0.0,
        "reference_coverage": coverage,
        "reference_mass": mass,
        "seed_ref_recall": sum(seed_recall) / len(seed_recall) if seed_recall else 0.0,
        "best_match_age": newest - years[top_hit] if top_hit in years else 0.0,
        "best_match_refs": math.log1p(len(best_refs)),
        "best_match_list_share": len(best_refs & in_list) / len(best_refs) if best_refs else 0.0,
    }
