"""Why a paper has its rank: its score as additive parts that sum to it (``RankedPaper.score_parts``).

A ranked paper's score is the fusion's sum of terms (:func:`crase_core.stages.ranking.final_terms`), by
fusion mode (π the ranker's walk score, t the full-query search score, r a 1-based rank, k = ``rrf_k``):

* ``none``: π(v) — one term, all walk;
* ``linear``: (1−λ)·π/max π  [walk]  +  λ·t/max t  [text];
* ``restart``: (1−λ)·π/max π  [walk]  +  λ·t^γ/max t^γ  [text];
* ``rrf``: (1−λ)/(k + r_π)  [the walk's rank]  +  λ/(k + r_t)  [the text's rank];
* ``restart-rrf``: (1−μ)/(k + r_g), r_g the rank by g = the two terms of ``restart``  [split between walk
  and text in proportion to their shares of g]  +  μ(q)/(k + s), s the search's own rank  [text];

plus, when the text floor moved the paper up, a ``floor`` part: its score after the move (the displaced
paper's) less its fused score. The parts of a paper sum to its ``score`` (to float rounding).

Inside each term, the walk's portion is split by restart source, and the text's by the search score's
ingredients (:mod:`crase_core.retrieval.text_parts`):

* the walk score splits exactly over restart sources: the walk is linear in its restart vector up to
  normalisation (:func:`crase_core.ranking.walks.ppr_attribution`, :func:`~crase_core.ranking.walks.salsa_attribution`;
  a CEP score comes whole from its strongest path's seed). A walk term that is π itself or a multiple of it
  (``none``, ``linear``, ``restart``) is split exactly. A rank term is not linear in π: its walk portion is
  split in the same proportions as π — the walk score's exact split, applied to the term that π's rank
  earned — and that is what its parts state;
* the top :data:`SOURCES` sources each get a part, the rest one part, "other restart sources"; each source
  part carries the strongest paths from that source (:class:`~crase_core.records.PathShare`: one exact term
  of the walk's sum over paths, in the part's units);
* the text portion splits over BM25, proximity, semantic feedback, … in proportion to their shares of t
  (exact for ``linear``; for t^γ and for rank terms, t's proportions applied to the term).

Pure functions; :func:`crase_core.stages.ranking.rank_graph` computes the inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from crase_core.ranking.walks import Attribution
from crase_core.records import FusionTerm, PathShare, ScorePart, SearchHit
from crase_core.retrieval.text_parts import shares

#: restart sources with a part of their own (the rest share one part)
SOURCES = 5
OTHER_SOURCES = "other restart sources"


def walk_name(ranker: str) -> str:
    return f"walk ({ranker.upper()})"


def _split_exact(total: float, fractions: Sequence[float]) -> list[float]:
    """``total`` split by ``fractions`` (summing to 1): the last piece is the remainder, so the pieces sum
    to ``total`` to float rounding."""
    pieces = [total * f for f in fractions[:-1]]
    return pieces + [total - sum(pieces)] if fractions else []


def walk_parts(term: FusionTerm, value: float, attribution: Attribution | None, ranker: str,
               n_sources: int = SOURCES) -> list[ScorePart]:
    """The walk's portion ``value`` of ``term``, split by restart source (module docstring)."""
    name = walk_name(ranker)
    if attribution is None or not attribution.shares:
        why = "no split: the ranker does not say" if attribution is None else "no restart source reaches it"
        return [ScorePart(f"{term.short} · {name}", value, term.label, "walk", f"{name} ({why})")]
    ranked = sorted(attribution.shares.items(), key=lambda kv: (-kv[1], kv[0]))
    top, rest = ranked[:n_sources], ranked[n_sources:]
    fractions = [f for _, f in top] + ([sum(f for _, f in rest)] if rest else [])
    pieces = _split_exact(value, fractions)
    parts = []
    for (source, _), piece in zip(top, pieces, strict=False):
        found = attribution.paths.get(source)
        paths = [PathShare(list(found[0]), list(found[1]), float(value * found[2]))] if found else []
        parts.append(ScorePart(f"{term.short} · {name} from restart at {source}", float(piece), term.label, "walk",
                               f"{name} from restart at {source}", source, paths))
    if rest:
        component = f"{name} from {len(rest)} {OTHER_SOURCES}"
        parts.append(ScorePart(f"{term.short} · {component}", pieces[-1], term.label, "walk", component))
    return parts


def text_parts(term: FusionTerm, value: float, ingredients: Sequence[tuple[str, float]]) -> list[ScorePart]:
    """The text's portion ``value`` of ``term``, split by the search score's ingredients (name, fraction)."""
    pieces = _split_exact(value, [f for _, f in ingredients])
    return [ScorePart(f"{term.short} · text: {name}", piece, term.label, "text", name)
            for (name, _), piece in zip(ingredients, pieces, strict=True)]


def term_parts(term: FusionTerm, attribution: Attribution | None, ingredients: Sequence[tuple[str, float]],
               ranker: str, n_sources: int = SOURCES) -> list[ScorePart]:
    """One fusion term as parts: its walk portion by restart source, its text portion by ingredient, or
    one ``tie`` part for a rank term that neither signal scored."""
    v = term.value
    if term.walk == 0.0 and term.text == 0.0:
        return [ScorePart(f"{term.short} · tie order", v, term.label, "tie",
                          "neither the walk nor the text search scored it: its rank is the tie order")]
    if v == 0.0:
        signal = "walk" if term.walk > 0.0 else "text"
        name = walk_name(ranker) if signal == "walk" else "text"
        return [ScorePart(f"{term.short} · {name}", 0.0, term.label, signal, f"{name} (0)")]
    walk = v if term.text == 0.0 else v * term.walk
    text = v - walk if term.text > 0.0 else 0.0
    out = walk_parts(term, walk, attribution, ranker, n_sources) if walk != 0.0 else []
    return out + (text_parts(term, text, ingredients) if text != 0.0 else [])


FLOOR = "text floor"


def explain_scores(terms: Mapping[str, Sequence[FusionTerm]], final: Mapping[str, float], targets: Sequence[str],
                   attributions: Mapping[str, Attribution] | None, query_hits: Sequence[SearchHit], ranker: str,
                   floor_label: str = "", n_sources: int = SOURCES) -> dict[str, list[ScorePart]]:
    """The score parts of every paper of ``targets``: its fusion ``terms`` as parts (:func:`term_parts`),
    and a ``floor`` part for the difference between its ``final`` score and their sum (the text floor's
    move). ``attributions``: each target's walk split (None: the ranker has none). Pure."""
    hits = {h.paper_id: h for h in query_hits}
    out: dict[str, list[ScorePart]] = {}
    for v in targets:
        hit = hits.get(v)
        ingredients = shares(hit.parts, hit.score) if hit is not None else shares({}, 0.0)
        attribution = attributions.get(v) if attributions is not None else None
        parts: list[ScorePart] = []
        for term in terms.get(v, ()):
            parts += term_parts(term, attribution, ingredients, ranker, n_sources)
        fused = sum(x.value for x in terms.get(v, ()))
        moved = final[v] - fused
        if moved != 0.0:
            parts.append(ScorePart(FLOOR, moved, floor_label, "floor", FLOOR))
        out[v] = parts
    return out


def parts_total(parts: Sequence[ScorePart]) -> float:
    """The sum of ``parts``' values."""
    return sum(p.value for p in parts)
