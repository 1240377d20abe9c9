"""Offline claim extraction and the lexical support scorer."""

from __future__ import annotations

import math

import pytest

from crase_core.evidence.claims import (
    ExtractiveClaimExtractor,
    check_verbatim,
    classify_claim,
    split_sentences,
)
from crase_core.evidence.entailment import WORD_OVERLAP_SUPPORT_THETA, LexicalSupportScorer, validate_matrix
from crase_core.records import CLAIM_TYPES, Claim, Paper

EX = ExtractiveClaimExtractor()


def test_sentence_splitting_respects_abbreviations_and_math():
    text = "We use the method of Ref. 3 and e.g. dualities. The mass is $m = 1. 5$ here. Finally, J. Smith agrees."
    spans = [text[s:e] for s, e in split_sentences(text)]
    assert spans == ["We use the method of Ref. 3 and e.g. dualities.", "The mass is $m = 1. 5$ here.",
                     "Finally, J. Smith agrees."]


def test_claims_are_verbatim_typed_and_four_to_five(hepth_source):
    p = hepth_source.get(["9711200"])["9711200"]
    cs = EX.extract(p)
    assert 4 <= len(cs.claims) <= 5
    assert [c.id for c in cs.claims] == [f"c{i}" for i in range(1, len(cs.claims) + 1)]
    for c in cs.claims:
        assert c.type in CLAIM_TYPES
        assert c.verbatim and c.source_phrase in p.abstract
    assert cs.claims[0].source_phrase.startswith("We show that the large $N$ limit")
    assert cs.claims[0].type == "THEORETICAL"


def test_every_embedded_paper_gets_claims(hepth_source):
    papers = hepth_source.corpus.papers[:3000]
    sets = EX.extract_many(papers)
    counts = [len(cs.claims) for cs in sets]
    assert min(counts) >= 1 and max(counts) <= 5
    pairs = [(cs, p) for cs, p in zip(sets, papers, strict=True) if p.has_abstract]
    # every claim is one whole sentence of the abstract (never a clause cut from one); 4–5 whenever the abstract
    # has that many sentences of three words or more, else all of them
    for cs, p in pairs:
        sentences = [p.abstract[s:e] for s, e in split_sentences(p.abstract)]
        long = [x for x in sentences if len(x.split()) >= 3] or sentences
        assert all(c.source_phrase in sentences for c in cs.claims), p.id
        assert len(cs.claims) == min(len(long), 5), p.id
    assert sum(4 <= len(cs.claims) <= 5 for cs, _ in pairs) / len(pairs) > 0.5
    assert all(c.verbatim for cs in sets for c in cs.claims)
    # a claim is a piece of the abstract, never the paper's title
    for cs, p in pairs:
        assert all(c.source_phrase in p.abstract for c in cs.claims), p.id
        assert " ".join(p.title.split()) not in [c.text for c in cs.claims] or p.title in p.abstract, p.id


def test_short_abstract_gives_whole_sentences_never_clauses_or_the_title():
    """A claim is never cut mid-sentence (issue 32): a short abstract gives fewer claims, each a whole sentence."""
    p = Paper("x", "A title about strings", "We compute the spectrum of strings on a circle; the result agrees with "
              "the known duality, and we show that the tachyon is absent. The D-string of type I string theory "
              "is a topological soliton of the heterotic string.")
    cs = EX.extract(p)
    assert [c.text for c in cs.claims] == [
        "We compute the spectrum of strings on a circle; the result agrees with the known duality, and we show "
        "that the tachyon is absent.",
        "The D-string of type I string theory is a topological soliton of the heterotic string."]
    assert all(c.verbatim for c in cs.claims) and "short abstract: 2 claim(s)" in cs.notes
    assert EX.identity == "extractive-claims/v3"  # the cache key names the version: v2's clauses are not reused
    one = EX.extract(Paper("z", "The title", "A single short sentence here."))
    assert [c.text for c in one.claims] == ["A single short sentence here."] and not one.title_only


def test_title_only_paper():
    cs = EX.extract(Paper("y", "Only a title here"))
    assert cs.title_only and [c.text for c in cs.claims] == ["Only a title here"]
    assert "no abstract" in cs.notes[0]


def test_classify_rules():
    assert classify_claim("The spectrum is measured numerically on the lattice.", 2) == "EMPIRICAL"
    assert classify_claim("We show that the two theories are dual.", 1) == "THEORETICAL"
    assert classify_claim("We construct a new formalism for branes.", 1) == "METHODOLOGICAL"
    assert classify_claim("It is well known that anomalies cancel.", 0) == "CONTEXTUAL"


def test_verbatim_check_flags_invented_phrases():
    claims = [Claim("c1", "CONTEXTUAL", "t", "black holes radiate"), Claim("c2", "CONTEXTUAL", "t", "never said")]
    out = check_verbatim(claims, "Black  holes\nradiate thermally.")
    assert [c.verbatim for c in out] == [True, False]


def test_lexical_scorer_exact_values():
    s = LexicalSupportScorer(idf=lambda t: 1.0, r0=0.35, k=12.0)
    citing = [Claim("c1", "THEORETICAL", "black hole entropy", "x"), Claim("c2", "THEORETICAL", "black holes and gauge theory", "x")]
    cited = [Claim("c1", "THEORETICAL", "the entropy of black holes", "x"), Claim("c2", "THEORETICAL", "gauge theory", "x")]
    [m] = s.score_many([(citing, cited)])
    f = lambda r: round(1 / (1 + math.exp(-12 * (r - 0.35))), 4)  # noqa: E731
    # c1 terms {black, hole, entropi}; c2 terms {black, hole, gaug, theori}
    assert m.matrix == [[f(1.0), f(0.0)], [f(0.5), f(0.5)]]
    assert m.error is None and len(m.matrix) == 2 and len(m.matrix[0]) == 2


def test_lexical_scorer_uses_idf_and_is_asymmetric():
    idf = {"black": 1.0, "hole": 1.0, "entropi": 6.0}.get
    s = LexicalSupportScorer(idf=lambda t: idf(t) or 1.0)
    a = [Claim("c1", "THEORETICAL", "black hole entropy", "x")]
    b = [Claim("c1", "THEORETICAL", "entropy", "x")]
    [ab], [ba] = s.raw_recall([(a, b)]), s.raw_recall([(b, a)])
    assert ab[0][0] == pytest.approx(6 / 8) and ba[0][0] == pytest.approx(1.0)


def test_validate_matrix():
    assert validate_matrix([[0, 1.0], [0.5, 0.25]], 2, 2) == [[0.0, 1.0], [0.5, 0.25]]
    for bad, why in [([[0.5]], "expected 2 rows"), ([[0.5], [0.5]], "expected 2 values"),
                     ([[1.5, 0], [0, 0]], "outside"), ([["x", 0], [0, 0]], "not a number"),
                     ([[float("nan"), 0], [0, 0]], "outside"), ([[True, 0], [0, 0]], "not a number")]:
        with pytest.raises(ValueError, match=why):
            validate_matrix(bad, 2, 2)


def test_default_scorer_is_the_word_overlap_share_itself():
    # M_ij = the IDF-weighted share of citing claim i's terms in cited claim j: with equal IDF, 1 of 5 terms
    # shared reads 0.2, 1 of 10 reads 0.1, none reads 0; supported at the calibrated 0.32 needs a third of them
    s = LexicalSupportScorer(idf=lambda t: 1.0)
    cited = [Claim("c1", "THEORETICAL", "anomaly", "x"), Claim("c2", "THEORETICAL", "anomaly brane", "x")]
    five = [Claim("c1", "THEORETICAL", "anomaly brane orientifold tadpole flux", "x")]
    ten = [Claim("c1", "THEORETICAL", "anomaly brane orientifold tadpole flux axion dilaton modulus quiver instanton", "x")]
    [a], [b] = s.score_many([(five, cited)]), s.score_many([(ten, cited)])
    assert a.matrix == [[0.2, 0.4]] and b.matrix == [[0.1, 0.2]]
    assert max(a.matrix[0]) >= WORD_OVERLAP_SUPPORT_THETA > max(b.matrix[0])
    assert s.identity == "word-overlap/v2"
    unrelated = s.score_many([([Claim("c1", "THEORETICAL", "glueball lattice spectrum", "x")], cited)])[0]
    assert unrelated.matrix == [[0.0, 0.0]]


def test_logistic_scale_of_earlier_measurements_is_still_available():
    s = LexicalSupportScorer(idf=lambda t: 1.0, r0=0.11338)
    assert s.identity == "lexical-support/v1(r0=0.11338,k=30)"
    five = [Claim("c1", "THEORETICAL", "anomaly brane orientifold tadpole flux", "x")]
    [m] = s.score_many([(five, [Claim("c1", "THEORETICAL", "anomaly", "x")])])
    assert m.matrix == [[round(1 / (1 + math.exp(-30 * (0.2 - 0.11338))), 4)]]
