"""Each demo button of the Search page lands: its question, run with the default settings on the embedded
hep-th corpus (what the button does), has the paper it is about among the first five results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crase_core.pipeline import run_query
from crase_core.settings.pipeline import PipelineSettings

ROOT = Path(__file__).resolve().parents[1]
DEMOS = {d["label"]: d for d in json.loads((ROOT / "assets" / "ui" / "demo_queries.json").read_text("utf-8"))}

#: demo label → the canonical answer: (arXiv id in the corpus, who and what)
CANONICAL = {
    "Strings on AdS₃ and spectral flow": ("0001053", "Maldacena–Ooguri, Strings in AdS₃ and the SL(2,R) WZW model I: "
                                                      "the spectrum (hep-th/0001053)"),
    "Eternal AdS black hole as entangled CFTs": ("0106112", "Maldacena, Eternal black holes in AdS (hep-th/0106112)"),
    "de Sitter vacua in string theory": ("0301240", "Kachru–Kallosh–Linde–Trivedi, de Sitter vacua in string theory "
                                                    "(hep-th/0301240)"),
    "Chern–Simons and topological strings": ("0205297", "Ooguri–Vafa, Worldsheet derivation of a large N duality "
                                                        "(hep-th/0205297)"),
}


def test_every_demo_button_has_its_canonical_paper_named():
    assert set(DEMOS) == set(CANONICAL)


@pytest.mark.parametrize("label", list(CANONICAL))
def test_demo_query_has_its_canonical_paper_in_the_top_5(label, hepth_engine):
    pid, who = CANONICAL[label]
    trace = run_query(DEMOS[label]["query"], hepth_engine, PipelineSettings())
    ranked = [r.paper_id for r in trace.results]
    assert pid in ranked[:5], (who, ranked.index(pid) + 1 if pid in ranked else None, trace.plan.subqueries)
    # the plan searches for what the question asks about, never for how it is asked
    plan = " ".join(trace.plan.subqueries).split()
    assert not {"looking", "analysis", "proven", "explanation", "description", "papers", "which"} & set(plan)
