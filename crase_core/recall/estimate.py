"""A run's estimate of its own recall@k, and the words it is shown in.

:func:`estimate_recall` turns a trace and the calibration found for its corpus
(:func:`~crase_core.recall.calibration.find_calibration`) into a :class:`~crase_core.records.RecallEstimate`:
the features (:mod:`.features`), the estimate and its interval (:mod:`.model`), the two features that moved
it most, and — where it is low — what would raise it. Without a calibration for the corpus, or with one for
another list length, the record holds no number, only the reason. :func:`summary_lines` is what the command
line, the explorer and the export print.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from crase_core.recall.calibration import Calibration, Lookup
from crase_core.recall.features import recall_features
from crase_core.recall.model import ambiguous, group_of
from crase_core.records import RecallEstimate

if TYPE_CHECKING:
    from crase_core.trace import RunTrace

#: each feature in words: (what it is, the run's value in words)
FEATURE_WORDS: dict[str, str] = {
    "query_words": "the question's length",
    "question_form": "the question's form",
    "title_form": "the question's form",
    "rare_term_share": "how rare the question's words are",
    "best_match_share": "how much of the question the best match holds",
    "mean_term_idf": "how rare the question's words are",
    "text_gap_10": "how sharply the search's scores fall",
    "text_gap_50": "how sharply the search's scores fall",
    "strong_matches": "how many papers match the question strongly",
    "top_score": "how strong the best text match is",
    "top_bm25": "how strong the best word match is",
    "semantic_share": "how much of the search is meaning, not words",
    "text_walk_overlap": "how far the text search and the citation walk agree",
    "list_text_overlap": "how much of the list the text search ranks high",
    "list_walk_overlap": "how much of the list the walk ranks high",
    "multi_list_share": "how many of the list two searches found",
    "chao_completeness": "how often the searches re-found the same papers",
    "graph_nodes": "the size of the citation graph",
    "graph_edges": "the size of the citation graph",
    "kept_edge_share": "the share of citations kept",
    "seed_kept_share": "how many seeds survived pruning",
    "list_in_graph": "how much of the list is in the citation graph",
    "list_link_density": "how densely the list cites itself",
    "list_linked_share": "how densely the list cites itself",
    "list_seed_share": "how much of the list is seeds",
    "score_tail": "how the last place scores against the first",
    "walk_mass": "how concentrated the walk is",
    "list_age": "how recent the list is",
    "seed_ref_recall": "how much of the seeds' references the list holds",
    "reference_coverage": "how much the closest papers' reference lists overlap",
    "reference_mass": "how much of the closest papers' references the list holds",
    "best_match_age": "how recent the best text match is",
    "best_match_refs": "how many references the best text match has",
    "best_match_list_share": "how much of the best text match's references the list holds",
    "seed_agreement": "how many seeds two searches agreed on",
}
#: below this estimate the words say what would raise it
LOW = 0.5
#: settings that do not change what a run finds (not reported as a difference from the calibration's runs)
_IGNORED = frozenset({"age_reference_year", "llm_budget", "llm_token_budget", "max_model_calls", "retry_failures",
                      "tol", "max_iter"})


def _drivers(cal: Calibration, features: dict[str, float]) -> list[str]:
    """The two features that moved the estimate most, as ``words (raises it)`` / ``(lowers it)``, distinct."""
    out: list[str] = []
    terms = sorted(cal.model.contributions(features).items(), key=lambda kv: -abs(kv[1]))
    for name, value in terms:
        words = FEATURE_WORDS.get(name, name)
        if any(o.startswith(words) for o in out) or abs(value) < 1e-6:
            continue
        out.append(f"{words} ({'raises' if value > 0 else 'lowers'} it)")
        if len(out) == 2:
            break
    return out


def _advice(trace: RunTrace) -> list[str]:
    """What would raise a low recall: more sub-queries, a wider radius, the user's library as seeds."""
    s = trace.settings
    out = []
    if len(trace.plan.subqueries) <= 1:
        out.append("more sub-queries (--L-offline 3, or a model endpoint that plans)")
    if s.hops < 2:
        out.append("a wider radius (--hops 2)")
    if trace.library is None or not trace.library.found_ids:
        out.append("your own papers as seeds (--library refs.bib)")
    return out


def _setting_differences(trace: RunTrace, cal: Calibration) -> list[str]:
    fitted = cal.fitted_on.get("settings")
    if not isinstance(fitted, dict):
        return []
    now = asdict(trace.settings)
    return sorted(k for k, v in now.items() if k in fitted and k not in _IGNORED and fitted[k] != v)


def estimate_recall(trace: RunTrace, lookup: Lookup) -> RecallEstimate:
    """The recall estimate of ``trace`` with the calibration ``lookup`` found (or the reason there is none)."""
    k = int(trace.settings.k)
    features = recall_features(trace)
    cal = lookup.calibration
    if cal is None:
        return RecallEstimate(k=k, features=features, group=group_of(features),
                              note=lookup.why_not or "no recall calibration for this corpus")
    base: dict[str, Any] = {"k": k, "features": features, "group": group_of(features), "calibration": cal.label(),
                            "calibration_source": cal.source, "level": cal.model.level}
    if cal.source != trace.source:
        return RecallEstimate(**base, note=f"the recall calibration is for the corpus {cal.source}, not this run's "
                              f"{trace.source}")
    if k != cal.k:
        return RecallEstimate(**base, note=f"the recall calibration estimates recall@{cal.k}; this run returns "
                              f"{k} papers (run with --k {cal.k} for an estimate)")
    got = cal.model.interval(features)
    if got is None:
        return RecallEstimate(**base, note="the recall calibration has no queries of this form")
    mu, lo, hi = got
    group = cal.model.group(features)
    notes = []
    diff = _setting_differences(trace, cal)
    if diff:
        notes.append("calibrated on runs with other settings of " + ", ".join(diff[:6])
                     + (" …" if len(diff) > 6 else "") + ": read it with care")
    fitted_backend = cal.fitted_on.get("backend")
    if isinstance(fitted_backend, dict) and fitted_backend.get("backend") not in (None, trace.backend.get("backend")):
        notes.append(f"calibrated on {fitted_backend.get('backend')} runs; this run used "
                     f"{trace.backend.get('backend')}")
    base["group"] = group[0] if group else base["group"]
    return RecallEstimate(**base, estimate=round(mu, 4), low=round(lo, 4), high=round(hi, 4), drivers=_drivers(cal, features),
                          advice=_advice(trace) if mu < LOW else [], note="; ".join(notes))


def reestimate(trace: RunTrace, parent: RecallEstimate) -> RecallEstimate:
    """The estimate of ``trace``, re-ranked by auditors' verdicts from a run whose estimate was ``parent``: with
    the calibration shipped for its corpus where there is one (a note says the calibration's runs had no
    verdicts), else no number and why (the parent's interval named)."""
    from crase_core.recall.calibration import find_calibration

    found = find_calibration(trace.source)
    was = (f"the parent run's was {_pct(parent.low)}–{_pct(parent.high)} %"
           if parent.low is not None and parent.high is not None else "the parent run had none")
    if found.calibration is None:
        return RecallEstimate(k=int(trace.settings.k), features=recall_features(trace), group=parent.group,
                              note=f"a re-ranked run is estimated only with a calibration shipped for its corpus; "
                              f"{was}")
    est = estimate_recall(trace, found)
    if est.estimate is not None:
        est.note = "; ".join(x for x in (est.note, f"re-ranked by auditors' verdicts, which the calibration's runs "
                                         f"had none of ({was})") if x)
    return est


def _pct(x: float) -> str:
    return f"{100 * x:.0f}"


def headline(est: RecallEstimate) -> str:
    """One sentence: "This list likely holds 35–60 % of the relevant papers in this corpus (80 % interval;
    estimate 47 %)." — or why there is no estimate."""
    if est.estimate is None or est.low is None or est.high is None:
        return f"not estimated — {est.note}."
    # the mean estimate beside the interval, unless it lies outside it (a one-sided interval of questions, whose
    # recall is mostly exactly 1: "likely all" with a mean of 96 %)
    inside = est.low - 0.005 <= est.estimate <= est.high + 0.005
    tail = f"{_pct(est.level)} % interval" + (f"; estimate {_pct(est.estimate)} %" if inside else "")
    if est.high - est.low < 0.005:  # an interval of one value: for questions, "all of them" (recall 1)
        share = "all" if est.low >= 0.995 else f"{_pct(est.low)} %"
        return f"This list likely holds {share} of the relevant papers in this corpus ({tail})."
    return f"This list likely holds {_pct(est.low)}–{_pct(est.high)} % of the relevant papers in this corpus ({tail})."


def summary_lines(est: RecallEstimate | None) -> list[str]:
    """The headline, what it rests on, and (where low) what would raise it; [] for a trace without a record."""
    if est is None:
        return []
    lines = [headline(est)]
    if est.estimate is None:
        return lines
    rests = "; ".join(est.drivers) if est.drivers else "the run's own agreement and score shape"
    form = {"title": "title-like", "question": "question-like"}.get(est.group, "all")
    if form == "title-like" and ambiguous(est.features):
        form = "title-like and of question-like"  # its interval spans both forms
    lines.append(f"It rests on {rests}; calibrated on {est.calibration} so that such intervals hold the measured "
                 f"recall@{est.k} for {_pct(est.level)} % of {form} queries.")
    if est.advice:
        lines.append("To find more: " + "; ".join(est.advice) + ".")
    if est.note:
        lines.append(f"Note: {est.note}.")
    return lines
