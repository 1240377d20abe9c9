"""One self-contained HTML file of a run: the evidence graph, the ranked list, and every edge's evidence.

``to_html(trace)`` writes a page that opens from disk with no server and no network: vis-network
9.1.2 (dual-licensed Apache-2.0 / MIT, © Almende B.V. and the visjs contributors; its licence header
is kept) and the page's own script are inlined. Clicking an edge shows its score matrix (entailment, word-overlap support or claim similarity) with the
claims of both papers, Δ, the age factor, the weight and the prune decision; clicking a paper (in the
graph or the list) shows its abstract, link, seed fate and reason.

Safety: every string from the trace travels as JSON inside ``<script type="application/json">``
with ``<``, ``>``, ``&`` and U+2028/U+2029 written as ``\\u`` escapes (so no title can close the
script element) — for a large run that JSON gzip-compressed in base64 (:func:`data_block`; the page inflates it
with the browser's own ``DecompressionStream``, offline), and the page renders it with ``textContent`` only; links are built in Python from
validated identifiers (:func:`crase_core.retrieval.library.paper_link`) and re-checked to be http(s) in the page.
TeX in titles, authors, abstracts, claims and contexts is rendered by :mod:`crase_core.views.tex` (the renderer
the app and the CLI use): plain Unicode for labels, tooltips and the list's author lines, and for the panel
and the list its JSON tree (:func:`crase_core.views.tex.to_json`), which the page turns into ``sub``/``sup``/``b``/
``i``/``span`` elements holding ``textContent``; the static "why" section uses :func:`crase_core.views.tex.to_html`
(every input character escaped).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
import re
from typing import Any

from crase_core.gc_pause import gc_deferred
from crase_core.llm.cost_report import budget_summary, cost_summary
from crase_core.ranking.pruning import score_name
from crase_core.ranking.trails import origin_text
from crase_core.recall.estimate import summary_lines
from crase_core.records import SIMILARITY
from crase_core.resources import graph_component_dir
from crase_core.retrieval.library import paper_link
from crase_core.trace import RunTrace
from crase_core.views.graph_views import (
    DEFAULT_TOP_K,
    ROLE_COLOURS,
    ROLE_LABELS,
    SCORER_LABELS,
    RunView,
    communities,
    edge_id,
    node_labels,
    run_view,
    view_index,
)
from crase_core.views.score_words import why_line
from crase_core.views.tex import to_html as tex_html
from crase_core.views.tex import to_json, to_plain

MAX_WIDE_VIEW_NODES = 300  # the wide view: the highest-ranked kept papers (a readable, quick-to-lay-out graph)
MAX_WIDE_VIEW_EDGES = 3000
NODE_PLACEMENT = ("x", "y", "size", "pri", "group")  # what a paper's record holds per view (the rest is per run)


def script_json(data: object) -> str:
    """``data`` as JSON that is safe inside an HTML ``<script>`` element (no ``<``, ``>``, ``&``, U+2028/9).

    Written by pydantic's serializer (about twice as fast as ``json`` for a run's views); what it cannot write
    (a lone surrogate) and text holding ``NaN`` or ``Infinity`` go to ``json``, which refuses a number that is
    not finite (ValueError) and writes the rest."""
    from pydantic_core import PydanticSerializationError, to_json

    try:
        text: str | None = to_json(data, inf_nan_mode="constants").decode("utf-8")
    except PydanticSerializationError:
        text = None
    if text is None or "NaN" in text or "Infinity" in text:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(c, esc)
    return text


#: a run whose data takes more than this many bytes as JSON travels gzip-compressed (the browser inflates it)
COMPRESS_ABOVE = 256 * 1024
GZIP_TYPE = "application/x-crase-gzip-base64"


def data_block(data: object) -> tuple[str, str]:
    """(the data element's type, its text): :func:`script_json` for a small run; for one above
    :data:`COMPRESS_ABOVE` bytes the same JSON gzip-compressed in base64 (:data:`GZIP_TYPE`: the page inflates it
    with the browser's ``DecompressionStream``), a fifth of the size. Base64 holds no ``<``, ``>`` or ``&``."""
    text = script_json(data)
    if len(text) <= COMPRESS_ABOVE:
        return "application/json", text
    packed = gzip.compress(text.encode("utf-8"), compresslevel=4, mtime=0)
    return GZIP_TYPE, base64.b64encode(packed).decode("ascii")


def page_data(page: str) -> Any:
    """The data of a page :func:`to_html` wrote (inflated when compressed): what its script reads."""
    head, _, rest = page.partition('id="crase-data">')
    text = rest.split("</script>", 1)[0]
    if head.rsplit("<script", 1)[-1].strip().startswith(f'type="{GZIP_TYPE}"'):
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    return json.loads(text)


def _num(x: float) -> float:
    return float(x) if math.isfinite(x) else 0.0


def _views(trace: RunTrace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The views the page offers, drawn by the run view model (:func:`crase_core.views.graph_views.run_view`) as
    the app draws them: timeline and clusters of the top results with their trails (the default) and of the
    :data:`MAX_WIDE_VIEW_NODES` highest-ranked kept papers, and the focus view of every paper of the default
    view — each with and without the pruned edges. Returns (views, paper styles, edge styles): a view keeps
    each paper's placement (:data:`NODE_PLACEMENT`) and each edge's id and bend; what does not change from
    view to view (label, tooltip, colour, width …) is stored once."""
    groups = communities(trace)
    labels = node_labels(trace, [n.paper.id for n in trace.nodes])
    index = view_index(trace)  # every view's edges and tooltips from one pass over the run
    views: dict[str, Any] = {}
    layouts: dict[tuple[Any, ...], Any] = {}  # a view with and without its pruned edges: laid out once
    node_style: dict[str, Any] = {}
    edge_style: dict[str, Any] = {}

    def keep(key: str, rv: RunView) -> None:
        for n in rv.nodes:
            if n["id"] not in node_style:
                node_style[n["id"]] = {k: v for k, v in n.items() if k not in NODE_PLACEMENT}
        for e in rv.edges:
            if e["id"] not in edge_style:
                edge_style[e["id"]] = {k: v for k, v in e.items() if k != "bend"}
        d = rv.as_dict()
        views[key] = {**{k: d[k] for k in ("layout", "axis", "captions", "legend", "note", "hidden", "focus")},
                      "nodes": [[n["id"], *(n[k] for k in NODE_PLACEMENT)] for n in rv.nodes],
                      "edges": [[e["id"], e["bend"]] for e in rv.edges]}

    for pruned in (False, True):
        tail = "|pruned" if pruned else ""
        for layout in ("timeline", "clusters"):
            keep(f"{layout}|top{tail}", run_view(trace, layout, show_pruned=pruned, groups=groups, labels=labels,
                                                 layouts=layouts, index=index))
            keep(f"{layout}|wide{tail}", run_view(trace, layout, "kept graph", show_pruned=pruned, groups=groups,
                                                  labels=labels, max_nodes=MAX_WIDE_VIEW_NODES,
                                                  max_edges=MAX_WIDE_VIEW_EDGES, layouts=layouts, index=index))
    for pid in [p for p, *_ in views["timeline|top"]["nodes"]]:
        for pruned in (False, True):
            keep(f"focus|{pid}" + ("|pruned" if pruned else ""),
                 run_view(trace, "focus", focus=pid, show_pruned=pruned, labels=labels, layouts=layouts, index=index))
    return views, node_style, edge_style


def _intern_tips(*tables: dict[str, Any]) -> list[str]:
    """Tooltips as lists of line numbers into one table of distinct lines, in place: an edge's tooltip repeats
    both papers' titles, so a run's tooltips share most of their lines (the page joins them back)."""
    lines: dict[str, int] = {}
    for table in tables:
        for rec in table.values():
            rec["tip"] = [lines.setdefault(line, len(lines)) for line in str(rec.get("tip", "")).split("\n")]
    return list(lines)


def export_data(trace: RunTrace) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data (no markup): the views of :func:`_views`, the
    inspector's papers and edges (with their matrices and claims) and the ranked list."""
    views, node_style, edge_style = _views(trace)
    shown = set(node_style) | {r.paper_id for r in trace.results}
    seeds = {s.paper_id: s for s in trace.seeds}
    results = {r.paper_id: r for r in trace.results}
    nodes = {}
    for n in trace.nodes:
        if n.paper.id not in shown:
            continue
        p, s = n.paper, seeds.get(n.paper.id)
        r = results.get(p.id)
        nodes[p.id] = {
            "title": to_plain(p.title), "title_tex": to_json(p.title), "year": p.year,
            "authors": [to_plain(a) for a in p.authors[:12]], "more_authors": max(0, len(p.authors) - 12),
            "abstract": to_plain(p.abstract), "abstract_tex": to_json(p.abstract), "link": paper_link(p),
            "venue": to_plain(p.venue), "role": ROLE_LABELS[n.display_role], "colour": ROLE_COLOURS[n.display_role],
            "kept": n.kept, "prune_reason": to_plain(n.prune_reason), "score": _num(n.score), "rank": n.rank,
            "in_library": n.in_library,
            "seed": None if s is None else {
                "fate": s.fate, "reason": to_plain(s.fate_reason),
                "origins": [to_plain(origin_text(o)) for o in s.origins]},
            "reason": to_plain(r.reason) if r else "",
        }
    edges = [{"id": edge_id(e), "from": e.citing, "to": e.cited, "delta": _num(e.delta), "weight": _num(e.weight),
              "age_factor": _num(e.age_factor), "age_years": _num(e.age_years), "kept": e.kept,
              "decision": e.decision, "rule": e.rule, "error": e.error or "", "supported": list(e.supported),
              "score_name": score_name(e.scorer),
              "matrix": [[_num(x) for x in row] for row in e.matrix], "contexts": [to_json(x) for x in e.contexts],
              "scorer": e.scorer, "scorer_label": SCORER_LABELS.get(e.scorer, e.scorer),
              **dict(zip(("theta_name", "theta"), trace.threshold(e), strict=True))}
             for e in trace.edges if edge_id(e) in edge_style]
    claims = {pid: {"error": cs.error or "", "claims": [{"id": c.id, "type": c.type.lower(), "text": to_plain(c.text),
                                                         "tex": to_json(c.text)} for c in cs.claims]}
              for pid, cs in trace.claims.items() if pid in nodes}
    c = trace.stage_counts()
    model = trace.model_ran
    coverage = trace.coverage.notice if trace.coverage is not None and trace.coverage.weak else ""
    return {
        "query": trace.query, "run_id": trace.run_id, "created_at": trace.created_at,
        "source": trace.source, "backend": trace.backend.get("backend", "?"), "ranker": trace.ranking.ranker,
        "theta": trace.settings.theta, "theta_lexical": trace.settings.theta_lexical, "tau": trace.settings.tau,
        "tau_lexical": trace.settings.tau_lexical,
        # the claim-similarity scorer's θ and τ, named only when it decided an edge ("" otherwise)
        "similarity": (f"\u03b8_similarity = {trace.settings.theta_similarity:g}, \u03c4_similarity = "
                       f"{trace.settings.tau_similarity:g} (claim-similarity edges, MiniLM: not entailment), "
                       if any(e.scorer == SIMILARITY for e in trace.edges) else ""),
        "beta": trace.settings.beta,
        "reference_year": trace.reference_year, "top_k": DEFAULT_TOP_K, "wide_nodes": MAX_WIDE_VIEW_NODES,
        "counts": c, "budget": budget_summary(trace.budget, model, trace.backend), "cost": cost_summary(trace.counters, model),
        "elapsed": round(sum(trace.timings.values()), 2),
        "coverage": coverage, "warnings": [w for w in trace.warnings if w != coverage],
        "recall": summary_lines(trace.recall_estimate),  # the run's estimate of its own recall, in words
        "results": [{"rank": r.rank, "id": r.paper_id, "score": _num(r.score), "reason": to_plain(r.reason),
                     "in_library": r.in_library} for r in trace.results if r.paper_id in nodes],
        "nodes": nodes, "edges": edges, "claims": claims, "views": views,
        "styles": {"nodes": node_style, "edges": edge_style}, "lines": _intern_tips(node_style, edge_style),
    }


def why_html(trace: RunTrace) -> str:
    """"Why each paper has its rank": one ``<details>`` per result with its score's parts
    (:mod:`crase_core.ranking.score_parts`) — each fusion term with its formula, its parts with their values and
    shares of the score, the strongest paths of each walk part — as static HTML, every text escaped. ``""``
    when the trace records no parts."""
    if not any(r.score_parts for r in trace.results):
        return ""
    titles = {n.paper.id: to_plain(n.paper.title) for n in trace.nodes}
    ranked = {r.paper_id for r in trace.results}
    title_html = {n.paper.id: tex_html(n.paper.title) for n in trace.nodes if n.paper.id in ranked}  # escaped

    def esc(x: object) -> str:
        return html.escape(str(x), quote=True)

    def short(pid: str) -> str:
        t = titles.get(pid, pid)
        return t if len(t) <= 50 else t[:49] + "…"

    out = ['<section id="why"><h2>Why each paper has its rank</h2><p class="meta">Each score is the sum of its parts: '
           "the text search's share (BM25, term proximity, semantic feedback) and the walk's, split by the restart "
           "source it came from (exact: the walk is linear in where it restarts; a rank term is split in the walk "
           "score's proportions). → cites, ⇠ back along a citation to another paper citing the same one.</p>"]
    for r in trace.results:
        if not r.score_parts:
            continue
        out.append(f'<details data-paper="{esc(r.paper_id)}"><summary>{r.rank}. {title_html.get(r.paper_id) or esc(r.paper_id)}'
                   f' — {esc(why_line(trace, r))}</summary><table class="m why"><tr><th>part</th><th>value</th>'
                   "<th>share</th></tr>")
        term = None
        for part in r.score_parts:
            if part.term and part.term != term:
                term = part.term
                value = sum(x.value for x in r.score_parts if x.term == term)
                out.append(f'<tr class="term"><th class="rowh">{esc(part.part.split(" · ")[0])} — {esc(term)}</th>'
                           f"<th>{value:.5f}</th><th>{value / r.score:.1%}</th></tr>" if r.score else
                           f'<tr class="term"><th class="rowh">{esc(term)}</th><th>{value:.5f}</th><th>–</th></tr>')
            name = (f"{part.component.split(' from ')[0]} from restart at “{short(part.source)}”" if part.source
                    else f"text match: {part.component}" if part.signal == "text" else part.component)
            share = f"{part.value / r.score:.1%}" if r.score else "–"
            out.append(f'<tr><td class="rowh">{esc(name)}</td><td>{part.value:.5f}</td><td>{share}</td></tr>')
            for path in part.paths:
                steps = [f"“{short(path.nodes[0])}”"] + [("→ " if a else "⇠ ") + f"“{short(n)}”"
                                                        for n, a in zip(path.nodes[1:], path.along, strict=False)]
                out.append(f'<tr class="path"><td class="rowh">↳ path {esc(" ".join(steps))}</td>'
                           f"<td>{path.value:.5f}</td><td></td></tr>")
        total = sum(x.value for x in r.score_parts)
        out.append(f'<tr class="term"><th class="rowh">sum of the parts (the score is {r.score:.5f})</th>'
                   f"<th>{total:.5f}</th><th></th></tr></table></details>")
    out.append("</section>")
    return "".join(out)


@gc_deferred()
def to_html(trace: RunTrace) -> str:
    """The run as one HTML document (UTF-8 text), openable from disk with the network off. Without automatic
    garbage collection while it is built (its views allocate fast; a collection walks the whole run)."""
    comp = graph_component_dir()
    files = {name: (comp / name).read_text(encoding="utf-8")
             for name in ("vis-network.min.js", "vis-network.css", "graph_core.js", "graph_core.css")}
    for name, text in files.items():
        closing = "</style" if name.endswith(".css") else "</script"
        if closing in text.lower():  # never true for the shipped files; refuse rather than break the page
            raise ValueError(f"{name} contains {closing!r} and cannot be inlined")
    title = html.escape(f"Crase run — {trace.query[:120]}", quote=True)
    data_type, data = data_block(export_data(trace))
    parts = {"TITLE": title, "VIS_CSS": files["vis-network.css"], "GRAPH_CSS": files["graph_core.css"],
             "DATA_TYPE": data_type, "DATA": data, "APP_JS": _APP_JS, "VIS_JS": files["vis-network.min.js"],
             "GRAPH_JS": files["graph_core.js"], "WHY": why_html(trace)}
    # one pass over the template: text put in is never scanned for placeholders again
    return re.sub(r"@@(TITLE|VIS_CSS|GRAPH_CSS|DATA_TYPE|DATA|APP_JS|VIS_JS|GRAPH_JS|WHY)@@", lambda m: parts[m.group(1)], _PAGE)


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<title>@@TITLE@@</title>
<!-- vis-network 9.1.2 (https://github.com/visjs/vis-network), dual-licensed Apache-2.0 / MIT,
     (c) 2011-2017 Almende B.V., (c) 2017-2019 visjs contributors. Inlined so this file works offline. -->
<style>@@VIS_CSS@@</style>
<style>@@GRAPH_CSS@@</style>
<style>
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2933;background:#fff}
header{padding:12px 22px 6px;border-bottom:1px solid #e3e6ea}
h1{font-size:1.2rem;margin:0 0 4px;line-height:1.3}
.meta{color:#56616c;font-size:.84rem;margin:2px 0}
.recall{border-left:3px solid #6b8cc7;padding:4px 10px;margin:8px 0;font-size:.92rem}
.notice{background:#fff4e5;border:1px solid #f0b35a;border-radius:6px;padding:8px 12px;margin:8px 0;font-size:.92rem}
.warn{background:#f5f7fa;border-left:3px solid #b8bfca;padding:4px 10px;margin:4px 0;font-size:.85rem;color:#3e4a56}
main{display:grid;grid-template-columns:minmax(0,1.75fr) minmax(340px,1fr);gap:16px;padding:10px 22px}
#panel{border:1px solid #e3e6ea;border-radius:8px;padding:10px 14px;max-height:calc(68vh + 120px);overflow:auto;font-size:.9rem}
.controls{display:flex;gap:8px 16px;align-items:center;font-size:.88rem;margin-bottom:8px;flex-wrap:wrap}
.seg{display:inline-flex;border:1px solid #cfd6de;border-radius:7px;overflow:hidden}
.seg button{font:inherit;border:0;background:#fff;padding:4px 13px;cursor:pointer;color:#3d4852}
.seg button+button{border-left:1px solid #cfd6de}
.seg button.on{background:#e6f4f1;color:#1b6b5f;font-weight:600}
select{font:inherit;font-size:.86rem;padding:2px 4px;max-width:340px}
table.m{border-collapse:collapse;margin:6px 0;font-size:.82rem}
table.m td,table.m th{border:1px solid #d5dbe1;padding:3px 6px;text-align:center;vertical-align:top}
table.m th.rowh{text-align:left;max-width:260px;font-weight:normal}
td.hit{outline:2px solid #1d3557;outline-offset:-2px;font-weight:600}
.kept{color:#1b7f4b;font-weight:600}.pruned{color:#b23a2b;font-weight:600}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;font-size:.8rem;margin:2px 0}
.badge.model{background:#e3ebf7;color:#1d3557}.badge.offline{background:#fdf0e1;color:#8a4b08}
ol#results{padding-left:0;list-style:none;margin:0 22px 30px}
ol#results li{border:1px solid #e3e6ea;border-radius:8px;padding:8px 12px;margin:6px 0;cursor:pointer}
ol#results li:hover{background:#f7f9fb}
.lib{background:#e8f3ee;color:#1b6b4b;border-radius:10px;padding:1px 8px;font-size:.78rem;margin-left:6px}
.why{color:#56616c;font-size:.84rem}
.claim{margin:3px 0}
h2{font-size:1.05rem;margin:14px 22px 4px}
h3{font-size:.98rem;margin:8px 0 4px}
#why{margin:0 22px 30px}#why h2{margin:14px 0 4px}#why details{border:1px solid #e3e6ea;border-radius:8px;padding:6px 12px;margin:6px 0}
#why summary{cursor:pointer;font-size:.9rem}table.why td,table.why th{text-align:right}table.why .rowh{text-align:left;max-width:640px}
table.why tr.term th{background:#f5f7fa}table.why tr:first-child th:first-child{text-align:left}table.why tr.path td{color:#56616c;font-size:.78rem}
</style>
</head>
<body>
<header>
<h1 id="title"></h1>
<div class="meta" id="meta"></div>
<div class="meta" id="cost"></div>
<div id="notices"></div>
</header>
<main>
<section>
<div class="controls">
<span class="seg" role="group" aria-label="Layout"><button type="button" data-view="timeline" class="on">Timeline</button><button type="button" data-view="clusters">Clusters</button><button type="button" data-view="focus">Focus</button></span>
<label id="papersPick">Papers <select id="papers"></select></label>
<label id="focusPick" hidden>Focus on <select id="focus"></select></label>
<label><input type="checkbox" id="showPruned"> show pruned edges</label>
<span id="viewNote" class="meta"></span>
</div>
<div id="graph"></div>
</section>
<section id="panel"><p>Click an edge to see its score matrix (entailment by a model, or word-overlap support or claim similarity offline),
both papers' claims and the prune decision; click a paper (here or in the list) for its abstract, link and why it is
ranked. Double-click a paper for its focus view.</p></section>
</main>
<h2>Ranked papers</h2>
<ol id="results"></ol>
@@WHY@@
<script type="@@DATA_TYPE@@" id="crase-data">@@DATA@@</script>
<script>@@VIS_JS@@</script>
<script>@@GRAPH_JS@@</script>
<script>@@APP_JS@@</script>
</body>
</html>
"""

_APP_JS = r"""
(function () {
  "use strict";
  // the run's data: JSON, or for a large run gzip-compressed JSON in base64, inflated by the browser's own
  // DecompressionStream (no library, no network)
  var block = document.getElementById("crase-data");
  if (block.type === "application/json") { start(JSON.parse(block.textContent)); return; }
  var bytes = Uint8Array.from(atob(block.textContent.trim()), function (ch) { return ch.charCodeAt(0); });
  new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text()
    .then(function (text) { start(JSON.parse(text)); });
function start(D) {
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; }
  function add(parent, child) { parent.appendChild(child); return child; }
  function fmt(x, d) { return Number(x).toFixed(d); }
  // a matrix cell cut, not rounded, to 2 decimals (as the app shows it): a cell below θ never reads as θ
  function cell(x) { return (Math.floor(Number(x) * 100 + 1e-9) / 100).toFixed(2); }
  // a TeX tree of crase_core.views.tex.to_json: a string is text, [kind, part…] a mark drawn as an element of a fixed
  // tag (sup, sub, b, i, span); text only ever enters the page as a text node
  function tex(parent, tree) {
    (Array.isArray(tree) ? tree : [tree]).forEach(function (item) {
      if (item === null || item === undefined) return;
      if (!Array.isArray(item)) { parent.appendChild(document.createTextNode(String(item))); return; }
      var kind = item[0];
      if (kind === "sup" || kind === "sub" || kind === "b" || kind === "i") tex(add(parent, el(kind)), item[1]);
      else if (kind === "over") { var o = add(parent, el("span")); o.style.textDecoration = "overline"; tex(o, item[1]); }
      else if (kind === "frac") { tex(add(parent, el("sup")), item[1]); add(parent, document.createTextNode("\u2044")); tex(add(parent, el("sub")), item[2]); }
      else if (kind === "sqrt") {
        if (item[2] && item[2].length) tex(add(parent, el("sup")), item[2]);
        add(parent, document.createTextNode("\u221a"));
        var r = add(parent, el("span")); r.style.textDecoration = "overline"; tex(r, item[1]);
      } else item.slice(1).forEach(function (part) { tex(parent, part); });
    });
    return parent;
  }
  // <tag>before · the tree · after</tag>
  function texEl(tag, before, tree, after, cls) { var e = el(tag, before, cls); tex(e, tree); if (after) e.appendChild(document.createTextNode(after)); return e; }
  function safeLink(url) { return typeof url === "string" && /^https?:\/\/[^\s"'<>]+$/.test(url) ? url : null; }

  document.getElementById("title").textContent = "Crase run: " + D.query;
  var c = D.counts;
  document.getElementById("meta").textContent = c.seeds + " seeds (" + c.seeds_kept + " kept) \u00b7 |V| " + c.nodes +
    " (" + c.nodes_kept + " kept) \u00b7 |E| " + c.edges + " (" + c.edges_kept + " kept) \u00b7 ranker " + D.ranker +
    " \u00b7 \u03b8 = " + D.theta + " (model-scored edges), \u03b8_lexical = " + D.theta_lexical + " (word-overlap edges), \u03c4 = " + D.tau + " (model-scored edges), \u03c4_lexical = " + D.tau_lexical + " (word-overlap edges), " + D.similarity + "\u03b2 = " + D.beta + " \u00b7 source " + D.source +
    " \u00b7 backend " + D.backend + " \u00b7 run " + D.run_id + (D.created_at ? " \u00b7 " + D.created_at : "");
  document.getElementById("cost").textContent = "Work: " + D.budget + " \u00b7 done: " + D.cost + " \u00b7 pipeline time " + D.elapsed + " s";
  var notices = document.getElementById("notices");
  if (D.coverage) add(notices, el("div", D.coverage, "notice"));
  if (D.recall && D.recall.length) add(notices, el("div", "Recall: " + D.recall.join(" "), "recall"));
  D.warnings.forEach(function (w) { add(notices, el("div", w, "warn")); });

  var edgeInfo = {};
  D.edges.forEach(function (e) { edgeInfo[e.id] = e; });
  var state = { layout: "timeline", papers: "top", focus: D.results.length ? D.results[0].id : null };
  var focusable = D.views["timeline|top"].nodes.map(function (n) { return n[0]; });
  if (state.focus === null || focusable.indexOf(state.focus) < 0) state.focus = focusable[0] || null;

  function tipText(lines) { return lines.map(function (i) { return D.lines[i]; }).join("\n"); }
  // the view model's records for one view: placement from the view, the rest from the run's style tables
  function records(key) {
    var v = D.views[key];
    return {
      layout: v.layout, axis: v.axis, captions: v.captions, legend: v.legend, key: key,
      hint: "Hover: full text \u00b7 Click: inspect \u00b7 Double-click a paper: focus \u00b7 Scroll: zoom \u00b7 Drag: pan",
      nodes: v.nodes.map(function (n) {
        var s = D.styles.nodes[n[0]];
        return Object.assign({ id: n[0], x: n[1], y: n[2], size: n[3], pri: n[4], group: n[5] }, s, { tip: tipText(s.tip) });
      }),
      edges: v.edges.map(function (e) {
        var s = D.styles.edges[e[0]];
        return Object.assign({ id: e[0], bend: e[1] }, s, { tip: tipText(s.tip) });
      }),
      note: v.note, hidden: v.hidden
    };
  }
  var panel = document.getElementById("panel");
  var graph = CraseGraph.create(document.getElementById("graph"), {
    // the canvas fills the window below the controls and the legend (the page scrolled to its top)
    height: function () {
      var c = graph ? graph.canvas.getBoundingClientRect().top + window.scrollY : 260;
      return Math.max(380, Math.round(window.innerHeight - c - 48));
    },
    onClick: function (v) { if (v.kind === "edge") showEdge(v.id); else showNode(v.id); },
    onDblClick: function (v) { if (D.views["focus|" + v.id]) { state.focus = v.id; state.layout = "focus"; show(); } }
  });
  // what the browser tests read (README of assets/ui/graph_component); inspect opens a paper's or an edge's panel
  window.craseExport = { graph: graph, data: D, ready: false, state: state,
                         inspect: function (kind, id) { if (kind === "edge") showEdge(id); else showNode(id); } };

  var papers = document.getElementById("papers");
  [["top", "Top " + D.top_k + " and their evidence trails"], ["wide", "Wider: the " + D.wide_nodes + " highest-ranked kept papers"]].forEach(function (o) {
    var opt = add(papers, el("option", o[1])); opt.value = o[0];
  });
  var focusSel = document.getElementById("focus");
  focusable.forEach(function (id) {
    var s = D.styles.nodes[id], opt = add(focusSel, el("option", (s ? s.label : id) + " \u2014 " + (D.nodes[id] ? D.nodes[id].title : "").slice(0, 60)));
    opt.value = id;
  });
  function show() {
    var pruned = document.getElementById("showPruned").checked ? "|pruned" : "";
    var key = state.layout === "focus" ? "focus|" + state.focus + pruned : state.layout + "|" + state.papers + pruned;
    if (!D.views[key]) return;
    var r = records(key);
    graph.setData(r);
    document.querySelectorAll("[data-view]").forEach(function (b) { b.className = b.dataset.view === state.layout ? "on" : ""; });
    document.getElementById("papersPick").hidden = state.layout === "focus";
    document.getElementById("focusPick").hidden = state.layout !== "focus";
    papers.value = state.papers;
    if (state.focus) focusSel.value = state.focus;
    document.getElementById("viewNote").textContent = r.nodes.length + " papers \u00b7 " + r.edges.length + " edges" +
      (r.hidden ? " \u00b7 " + r.hidden + (r.hidden === 1 ? " pruned edge hidden" : " pruned edges hidden") : "") + (r.note ? " \u00b7 " + r.note : "");
    graph.select(current);
  }
  var current = null;
  document.querySelectorAll("[data-view]").forEach(function (b) { b.addEventListener("click", function () { state.layout = b.dataset.view; show(); }); });
  papers.addEventListener("change", function () { state.papers = papers.value; show(); });
  focusSel.addEventListener("change", function () { state.focus = focusSel.value; show(); });
  document.getElementById("showPruned").addEventListener("change", show);

  function clear() { while (panel.firstChild) panel.removeChild(panel.firstChild); delete panel.dataset.edge; delete panel.dataset.node; }
  function paperLine(label, id) { var n = D.nodes[id]; return n ? texEl("div", label, n.title_tex, " (" + (n.year || "n.d.") + ")") : el("div", label + id); }

  function showEdge(id) {
    var e = edgeInfo[id]; if (!e) return;
    var cu = D.claims[e.from] || { claims: [] }, cv = D.claims[e.to] || { claims: [] };
    clear();
    current = { kind: "edge", id: id };
    panel.dataset.edge = e.from + "->" + e.to;
    add(panel, el("h3", "Edge " + e.from + " \u2192 " + e.to));
    add(panel, paperLine("u (citing): ", e.from));
    add(panel, paperLine("v (cited): ", e.to));
    var dec = add(panel, el("p", "Decision \u2014 " + e.decision, e.kept ? "kept" : "pruned"));
    dec.id = "decision";
    if (e.scorer) add(panel, el("span", e.scorer_label, "badge " + (e.scorer === "model" ? "model" : "offline")));
    add(panel, el("div", "\u0394 (coverage) " + fmt(e.delta, 3) + " \u00b7 supported " + e.supported.filter(Boolean).length + " of " + e.supported.length + " at " + e.theta_name + " " + e.theta +
                  " \u00b7 age factor " + fmt(e.age_factor, 3) + " (" + e.age_years + " y, \u03b2 = " + D.beta + ") \u00b7 weight w " + fmt(e.weight, 3)));
    if (e.error) add(panel, el("div", "Scoring failed: " + e.error, "warn"));
    if (e.matrix.length) {
      add(panel, el("h3", (e.scorer === "model" ? "Entailment (model) M[i][j] = ent(claim i of u | claim j of v)"
        : "Word-overlap support M[i][j] = share of claim i of u's informative words that claim j of v uses (not entailment)") +
        "; outlined cells \u2265 " + e.theta_name + " = " + e.theta + " (\u2713 supported, counted in \u0394)"));
      var t = add(panel, el("table", null, "m")); t.id = "matrix";
      var head = add(t, el("tr")); add(head, el("th", "u \\ v"));
      e.matrix[0].forEach(function (_, j) { var cl = cv.claims[j]; var th = add(head, el("th", cl ? cl.id : "c" + (j + 1))); if (cl) th.title = cl.text; });
      e.matrix.forEach(function (row, i2) {
        var tr = add(t, el("tr")); var cl = cu.claims[i2];
        var mark = e.supported[i2] ? "\u2713 " : "\u2717 ";
        add(tr, cl ? texEl("th", mark + cl.id + ": ", cl.tex, "", "rowh") : el("th", mark + "c" + (i2 + 1), "rowh"));
        row.forEach(function (x) {
          var td = add(tr, el("td", cell(x)));
          if (x >= e.theta) td.className = "hit";
          td.style.background = "rgba(29,53,87," + (0.05 + 0.45 * Math.max(0, Math.min(1, x))).toFixed(3) + ")";
          if (x > 0.6) td.style.color = "#ffffff";
        });
      });
    } else add(panel, el("p", "No matrix: one of the papers has no claims."));
    if (e.contexts.length) { add(panel, el("h3", "Citation context")); e.contexts.forEach(function (x) { add(panel, texEl("blockquote", "", x)); }); }
    [["Claims of u", cu], ["Claims of v", cv]].forEach(function (pair) {
      add(panel, el("h3", pair[0]));
      if (pair[1].error) add(panel, el("div", "Claim extraction failed: " + pair[1].error, "warn"));
      pair[1].claims.forEach(function (cl) { add(panel, texEl("div", cl.id + " [" + cl.type + "] ", cl.tex, "", "claim")); });
    });
    graph.select(current);
  }

  function showNode(id) {
    var n = D.nodes[id]; if (!n) return;
    clear();
    current = { kind: "node", id: id };
    panel.dataset.node = id;
    add(panel, texEl("h3", "", n.title_tex));
    add(panel, el("div", (n.year || "n.d.") + " \u00b7 " + n.authors.join(", ") + (n.more_authors ? " et al. (+" + n.more_authors + ")" : "") + (n.venue ? " \u00b7 " + n.venue : "")));
    var link = safeLink(n.link);
    if (link) { var a = add(add(panel, el("div")), el("a", link)); a.href = link; a.rel = "noopener noreferrer"; a.target = "_blank"; }
    var role = add(panel, el("div", "\u25cf " + n.role + (n.in_library ? " \u00b7 already in your library" : "")));
    role.style.color = n.colour;
    add(panel, el("div", n.kept ? "score " + fmt(n.score, 4) + (n.rank ? " \u00b7 rank " + n.rank : "") : "pruned: " + n.prune_reason));
    if (n.seed) { add(panel, el("div", "Seed fate: " + (n.seed.fate === "kept" ? "\u2713 " : "\u2717 ") + n.seed.reason)); n.seed.origins.forEach(function (o) { add(panel, el("div", "\u2022 " + o)); }); }
    if (n.reason) add(panel, el("p", "Why it is here: " + n.reason));
    if (n.abstract) { add(panel, el("h3", "Abstract")); add(panel, texEl("p", "", n.abstract_tex)); }
    var cs = D.claims[id];
    if (cs && cs.claims.length) { add(panel, el("h3", "Claims")); cs.claims.forEach(function (cl) { add(panel, texEl("div", cl.id + " [" + cl.type + "] ", cl.tex, "", "claim")); }); }
    graph.select(current);
  }

  var list = document.getElementById("results");
  D.results.forEach(function (r) {
    var n = D.nodes[r.id], li = add(list, el("li"));
    var head = add(li, el("div")); add(head, texEl("strong", r.rank + ". ", n.title_tex)); add(head, document.createTextNode(" \u00b7 " + (n.year || "n.d.") + " \u00b7 score " + fmt(r.score, 4)));
    if (r.in_library) add(head, el("span", "already in your library", "lib"));
    add(li, el("div", n.authors.slice(0, 3).join(", ") + (n.authors.length > 3 ? " et al." : ""), "why"));
    add(li, el("div", "Why it is here: " + r.reason, "why"));
    li.addEventListener("click", function () { showNode(r.id); panel.scrollTop = 0; panel.scrollIntoView({ block: "start" }); });
  });

  show();
  var wait = setInterval(function () { if (graph.ready) { clearInterval(wait); window.craseExport.ready = true; } }, 30);
  window.addEventListener("resize", function () { graph.resize(); });
}
})();
"""
