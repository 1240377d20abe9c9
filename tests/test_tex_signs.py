"""A sign before a TeX command survives every renderer (issue 32): ``$-\\frac{1}{2}$`` is −½, not ½.

The data: every abstract of the embedded hep-th corpus with a math span that opens with a minus or plus
right before a command (``$-\\infty$``, ``$-\\frac{1}{2}$``, ``$+\\frac{1}{2}$``) — 19 of them. Each such span
must keep its sign in the plain text (terminal, tables, the HTML export's text), the HTML and its JSON tree
(the HTML export), and the markdown the app's result cards and inspectors draw.
"""

from __future__ import annotations

import dataclasses
import gzip
import html
import json
import re
from pathlib import Path

import pytest

from crase_core.views import tex

ROOT = Path(__file__).resolve().parents[1]
SIGNED_SPAN = re.compile(r"(?<!\$)\$([-+])\\[A-Za-z][^$]*\$")


def _signed_abstracts() -> dict[str, str]:
    out: dict[str, str] = {}
    with gzip.open(ROOT / "assets" / "corpora" / "hepth" / "papers.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            abstract = p.get("abstract") or ""
            # spans that open with the sign: split on $ so a closing dollar followed by "-\" is not counted
            pieces = abstract.split("$")
            if any(pieces[i][:1] in "-+" and pieces[i][1:2] == "\\" for i in range(1, len(pieces), 2)):
                out[p["id"]] = abstract
    return out


SIGNED = _signed_abstracts()
SIGN = {"-": "−", "+": "+"}


def _spans(abstract: str) -> list[tuple[str, str]]:
    """(span source, its sign as rendered) for every math span of ``abstract`` that opens with a sign."""
    pieces = abstract.split("$")
    return [(f"${pieces[i]}$", SIGN[pieces[i][0]]) for i in range(1, len(pieces), 2)
            if pieces[i][:1] in "-+" and pieces[i][1:2] == "\\"]


def _visible_html(markup: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markup)).split())


def _visible_markdown(markup: str) -> str:
    """What Streamlit shows for the renderer's markdown: backslash escapes read as the character."""
    return _visible_html(re.sub(r"\\(.)", r"\1", markup))


def _json_text(tree: list) -> str:
    return "".join(x if isinstance(x, str) else _json_text([y for part in x[1:] for y in part]) for x in tree)


def test_the_embedded_corpus_has_19_such_abstracts():
    assert len(SIGNED) == 19
    assert "9305061" in SIGNED and "9512052" in SIGNED  # −½ (string susceptibility), +½


def test_known_strings():
    assert tex.to_plain("$-\\frac{1}{2}$") == "−½"
    assert tex.to_plain("from $-\\infty$ to $+\\infty$") == "from −∞ to +∞"
    assert tex.to_plain("$-\\alpha$") == "−α"
    assert tex.to_plain("$-{1\\over 2}$") == "−½"
    assert tex.to_plain("$\\pm\\sqrt{2}$, $=\\alpha$, $<\\beta$, $x^-$") == "±√2, =α, <β, x⁻"
    assert tex.to_html("$-\\frac{1}{2}$") == "−½"
    assert tex.to_json("$-\\alpha$") == ["−α"]
    assert tex.to_plain("a - b, e-mail, x-") == "a - b, e-mail, x-"  # text hyphens stay hyphens


@pytest.mark.parametrize("pid", sorted(SIGNED))
def test_every_renderer_keeps_the_sign(pid):
    abstract = SIGNED[pid]
    spans = _spans(abstract)
    assert spans
    renderers = {
        "plain (terminal, tables, export text)": tex.to_plain,
        "HTML": lambda t: _visible_html(tex.to_html(t)),
        "markdown (result cards, inspectors)": lambda t: _visible_markdown(tex.to_markdown(t)),
        "JSON tree (HTML export)": lambda t: " ".join(_json_text(tex.to_json(t)).split()),
    }
    for where, render in renderers.items():
        text = render(abstract)
        for span, sign in spans:
            alone = render(span)
            assert alone.startswith(sign), (pid, where, span, alone)
            assert alone in text, (pid, where, span, alone)


def test_the_html_export_keeps_the_sign(tmp_path):
    """The export's own payload: the abstracts as text and as the tree its script draws."""
    from crase_core.backends import offline_backend
    from crase_core.pipeline import Engine, run_query
    from crase_core.sources.local import LocalSource
    from crase_core.store.termstats import TermStats
    from crase_core.views.html_export import export_data

    source = LocalSource.open(ROOT / "tests" / "fixtures" / "hostile_corpus")
    engine = Engine(source, offline_backend(TermStats.from_index(source.text_index)))
    trace = run_query("holographic entanglement entropy of BTZ black holes", engine)
    abstracts = [SIGNED[p] for p in sorted(SIGNED)]
    nodes = [dataclasses.replace(n, paper=dataclasses.replace(n.paper, abstract=abstracts[i % len(abstracts)]))
             for i, n in enumerate(trace.nodes)]
    data = export_data(dataclasses.replace(trace, nodes=nodes))
    checked = 0
    for n in nodes:
        shown = data["nodes"].get(n.paper.id)
        if shown is None:
            continue
        for span, _ in _spans(n.paper.abstract):
            assert tex.to_plain(span)[:1] in "−+" and tex.to_plain(span) in shown["abstract"]
            drawn = " ".join(_json_text(tex.to_json(span)).split())
            assert drawn[:1] in "−+" and drawn in " ".join(_json_text(shown["abstract_tex"]).split())
            checked += 1
    assert checked >= 5
