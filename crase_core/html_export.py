"""One self-contained HTML file of a run: the evidence graph, the ranked list, and every edge's evidence.

``to_html(trace)`` writes a page that opens from disk with no server and no network: vis-network
9.1.2 (dual-licensed Apache-2.0 / MIT, © Almende B.V. and the visjs contributors; its licence header
is kept) and the page's own script are inlined. Clicking an edge shows its entailment matrix with the
claims of both papers, Δ, the age factor, the weight and the prune decision; clicking a paper (in the
graph or the list) shows its abstract, link, seed fate and reason.

Safety: every string from the trace travels as JSON inside ``<script type="application/json">``
with ``<``, ``>``, ``&`` and U+2028/U+2029 written as ``\\u`` escapes (so no title can close the
script element), and the page renders it with ``textContent`` only; links are built in Python from
validated identifiers (:func:`crase_core.library.paper_link`) and re-checked to be http(s) in the page.
TeX in titles, authors, abstracts, claims and contexts is rendered by :mod:`crase_core.tex` (the renderer
the app and the CLI use): plain Unicode for labels and tooltips, and for the panel and the list its JSON
tree, which the page turns into ``sub``/``sup``/``b``/``i``/``span`` elements holding ``textContent``.
"""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

from .cost_report import budget_summary, cost_summary
from .library import paper_link
from .records import EdgeRecord
from .resources import graph_component_dir
from .tex import to_json, to_plain
from .trace import RunTrace
from .trails import origin_text

ROLE_COLOURS = {"seed_kept": "#2a9d8f", "seed_pruned": "#e76f51", "expanded": "#4f6d9a",
                "expanded_pruned": "#b8bfca", "text": "#9b6bb5"}
ROLE_LABELS = {"seed_kept": "seed, kept", "seed_pruned": "seed, pruned", "expanded": "expanded (neighbour)",
               "expanded_pruned": "expanded, pruned", "text": "text match (outside the citation graph)"}
MAX_WIDE_VIEW_NODES = 300  # the wide view: the highest-ranked kept papers (a readable, quick-to-lay-out graph)
MAX_WIDE_VIEW_EDGES = 3000
KAMADA_KAWAI_MAX = 150  # components up to this size get the Kamada–Kawai layout (spring layout above)


def script_json(data: object) -> str:
    """``data`` as JSON that is safe inside an HTML ``<script>`` element (no ``<``, ``>``, ``&``, U+2028/9)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(c, esc)
    return text


def _num(x: float) -> float:
    return float(x) if math.isfinite(x) else 0.0


def _layout(nodes: list[str], edges: list[EdgeRecord], scale: float = 70.0) -> dict[str, list[float]]:
    """Deterministic layout in vis pixels: a spring layout (networkx, fixed seed) per connected component,
    each sized by the square root of its paper count, packed in rows (largest first), so small islands
    do not push the main cluster into a corner."""
    import networkx as nx

    if not nodes:
        return {}
    g = nx.Graph()
    g.add_nodes_from(nodes)
    for e in edges:
        if e.citing != e.cited and e.citing in g and e.cited in g:
            g.add_edge(e.citing, e.cited, weight=max(e.delta, 0.05) if e.kept else 0.02)
    order = {n: i for i, n in enumerate(nodes)}
    comps = sorted((sorted(c, key=order.__getitem__) for c in nx.connected_components(g)),
                   key=lambda c: (-len(c), order[c[0]]))
    out: dict[str, list[float]] = {}
    row_width = 2.6 * scale * math.sqrt(len(nodes))
    x = y = row_h = 0.0
    for comp in comps:
        radius = scale * math.sqrt(len(comp))
        if len(comp) == 1:
            local = {comp[0]: (0.0, 0.0)}
        elif len(comp) <= KAMADA_KAWAI_MAX:  # evenly spread distances: readable for the top results' graph
            local = nx.rescale_layout_dict(nx.kamada_kawai_layout(g.subgraph(comp), weight=None), 1.0)
        else:
            sub = g.subgraph(comp)
            local = nx.spring_layout(sub, k=2.0 / math.sqrt(len(comp)), seed=7, iterations=80, weight="weight")
        if x > 0 and x + 2 * radius > row_width:
            x, y, row_h = 0.0, y + row_h + scale * 0.6, 0.0
        for n, (px, py) in local.items():
            out[n] = [round(x + radius + float(px) * radius, 1), round(y + radius + float(py) * radius, 1)]
        x += 2 * radius + scale * 0.6
        row_h = max(row_h, 2 * radius)
    return out


def _views(trace: RunTrace) -> tuple[dict[str, Any], list[EdgeRecord]]:
    """Two views and the edges they use: the top results with their evidence trails (default), and the
    ``MAX_WIDE_VIEW_NODES`` highest-scored kept papers with the kept edges among them (the wide view)."""
    node_ids = {n.paper.id for n in trace.nodes}
    top: set[str] = set()
    trail_edges: set[tuple[str, str]] = set()
    for r in trace.results:
        top.add(r.paper_id)
        for s in r.trail:
            top.update((s.source, s.target))
            trail_edges.add((s.source, s.target) if s.along_citation else (s.target, s.source))
    top &= node_ids
    top_edges = [e for e in trace.edges if e.citing in top and e.cited in top
                 and (e.kept or (e.citing, e.cited) in trail_edges)]
    top_pruned = [e for e in trace.edges if e.citing in top and e.cited in top and not e.kept]
    kept_sorted = sorted((n for n in trace.nodes if n.kept), key=lambda n: (n.rank is None, n.rank or 0))
    wide = {n.paper.id for n in kept_sorted[:MAX_WIDE_VIEW_NODES]} | top
    wide_edges = sorted((e for e in trace.edges if e.kept and e.citing in wide and e.cited in wide),
                        key=lambda e: -e.delta)[:MAX_WIDE_VIEW_EDGES]
    used: dict[tuple[str, str], int] = {}
    edges: list[EdgeRecord] = []
    for e in top_edges + top_pruned + wide_edges:
        if (e.citing, e.cited) not in used:
            used[(e.citing, e.cited)] = len(edges)
            edges.append(e)
    top_list = [n.paper.id for n in trace.nodes if n.paper.id in top]
    wide_list = [n.paper.id for n in trace.nodes if n.paper.id in wide]
    views = {
        "top": {"nodes": top_list, "edges": [used[(e.citing, e.cited)] for e in top_edges],
                "pruned": [used[(e.citing, e.cited)] for e in top_pruned],
                "pos": _layout(top_list, top_edges + top_pruned)},
        "kept": {"nodes": wide_list, "edges": [used[(e.citing, e.cited)] for e in wide_edges], "pruned": [],
                 "pos": _layout(wide_list, wide_edges),
                 "note": f"the {len(wide_list):,} highest-ranked of {len(kept_sorted):,} kept papers"
                         if len(kept_sorted) > len(wide_list) else ""},
    }
    return views, edges


def export_data(trace: RunTrace) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data (no markup): the papers and edges of its two
    views (with their matrices and claims) and the ranked list."""
    views, view_edges = _views(trace)
    shown = {pid for v in views.values() for pid in v["nodes"]} | {r.paper_id for r in trace.results}
    seeds = {s.paper_id: s for s in trace.seeds}
    results = {r.paper_id: r for r in trace.results}
    max_score = max((n.score for n in trace.nodes), default=0.0) or 1.0
    nodes = {}
    for n in trace.nodes:
        if n.paper.id not in shown:
            continue
        p, role, s = n.paper, n.display_role, seeds.get(n.paper.id)
        r = results.get(p.id)
        nodes[p.id] = {
            "title": to_plain(p.title), "title_tex": to_json(p.title), "year": p.year,
            "authors": [to_plain(a) for a in p.authors[:12]], "more_authors": max(0, len(p.authors) - 12),
            "abstract": to_plain(p.abstract), "abstract_tex": to_json(p.abstract), "link": paper_link(p),
            "venue": p.venue, "role": ROLE_LABELS[role], "colour": ROLE_COLOURS[role], "kept": n.kept,
            "prune_reason": to_plain(n.prune_reason),
            "score": _num(n.score), "rank": n.rank, "size": 8 + 28 * math.sqrt(max(n.score, 0.0) / max_score),
            "in_library": n.in_library,
            "seed": None if s is None else {
                "fate": s.fate, "reason": to_plain(s.fate_reason),
                "origins": [to_plain(origin_text(o)) for o in s.origins]},
            "reason": to_plain(r.reason) if r else "",
        }
    edges = [{"from": e.citing, "to": e.cited, "delta": _num(e.delta), "weight": _num(e.weight),
              "age_factor": _num(e.age_factor), "age_years": _num(e.age_years), "kept": e.kept,
              "decision": e.decision, "error": e.error or "", "supported": list(e.supported),
              "matrix": [[_num(x) for x in row] for row in e.matrix], "contexts": [to_json(x) for x in e.contexts],
              "scorer": e.scorer, **dict(zip(("theta_name", "theta"), trace.threshold(e), strict=True))}
             for e in view_edges]
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
        "beta": trace.settings.beta,
        "reference_year": trace.reference_year,
        "counts": c, "budget": budget_summary(trace.budget, model), "cost": cost_summary(trace.counters, model),
        "elapsed": round(sum(trace.timings.values()), 2),
        "coverage": coverage, "warnings": [w for w in trace.warnings if w != coverage],
        "results": [{"rank": r.rank, "id": r.paper_id, "score": _num(r.score), "reason": to_plain(r.reason),
                     "in_library": r.in_library} for r in trace.results if r.paper_id in nodes],
        "nodes": nodes, "edges": edges, "claims": claims, "views": views,
    }


def to_html(trace: RunTrace) -> str:
    """The run as one HTML document (UTF-8 text), openable from disk with the network off."""
    comp = graph_component_dir()
    vis_js = (comp / "vis-network.min.js").read_text(encoding="utf-8")
    vis_css = (comp / "vis-network.css").read_text(encoding="utf-8")
    for name, text, closing in (("vis-network.min.js", vis_js, "</script"), ("vis-network.css", vis_css, "</style")):
        if closing in text.lower():  # never true for the shipped files; refuse rather than break the page
            raise ValueError(f"{name} contains {closing!r} and cannot be inlined")
    title = html.escape(f"Crase run — {trace.query[:120]}", quote=True)
    parts = {"TITLE": title, "VIS_CSS": vis_css, "DATA": script_json(export_data(trace)), "APP_JS": _APP_JS,
             "VIS_JS": vis_js}
    # one pass over the template: text put in is never scanned for placeholders again
    return re.sub(r"@@(TITLE|VIS_CSS|DATA|APP_JS|VIS_JS)@@", lambda m: parts[m.group(1)], _PAGE)


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
<style>
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2933;background:#fff}
header{padding:14px 22px 6px;border-bottom:1px solid #e3e6ea}
h1{font-size:1.25rem;margin:0 0 4px}
.meta{color:#56616c;font-size:.86rem;margin:2px 0}
.notice{background:#fff4e5;border:1px solid #f0b35a;border-radius:6px;padding:8px 12px;margin:8px 0;font-size:.92rem}
.warn{background:#f5f7fa;border-left:3px solid #b8bfca;padding:4px 10px;margin:4px 0;font-size:.85rem;color:#3e4a56}
main{display:grid;grid-template-columns:minmax(0,1.6fr) minmax(340px,1fr);gap:16px;padding:12px 22px}
#graph{height:72vh;border:1px solid #e3e6ea;border-radius:8px;background:#fbfcfd}
#panel{border:1px solid #e3e6ea;border-radius:8px;padding:10px 14px;max-height:72vh;overflow:auto;font-size:.9rem}
.controls{display:flex;gap:14px;align-items:center;font-size:.88rem;margin-bottom:6px;flex-wrap:wrap}
.legend span.dot{display:inline-block;width:.75rem;height:.75rem;border-radius:50%;margin:0 4px 0 10px;vertical-align:-1px}
table.m{border-collapse:collapse;margin:6px 0;font-size:.82rem}
table.m td,table.m th{border:1px solid #d5dbe1;padding:3px 6px;text-align:center;vertical-align:top}
table.m th.rowh{text-align:left;max-width:260px;font-weight:normal}
td.hit{outline:2px solid #1d3557;outline-offset:-2px;font-weight:600}
.kept{color:#1b7f4b;font-weight:600}.pruned{color:#b23a2b;font-weight:600}
ol#results{padding-left:0;list-style:none;margin:0 22px 30px}
ol#results li{border:1px solid #e3e6ea;border-radius:8px;padding:8px 12px;margin:6px 0;cursor:pointer}
ol#results li:hover{background:#f7f9fb}
.lib{background:#e8f3ee;color:#1b6b4b;border-radius:10px;padding:1px 8px;font-size:.78rem;margin-left:6px}
.why{color:#56616c;font-size:.84rem}
.claim{margin:3px 0}
h2{font-size:1.05rem;margin:14px 22px 4px}
h3{font-size:.98rem;margin:8px 0 4px}
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
<label><input type="radio" name="view" value="top" checked> Top results and their evidence trails</label>
<label><input type="radio" name="view" value="kept"> Wider: the highest-ranked kept papers</label>
<span id="viewNote" class="meta"></span>
<label><input type="checkbox" id="showPruned"> show pruned edges (dashed)</label>
</div>
<div class="controls legend" id="legend"></div>
<div id="graph"></div>
</section>
<section id="panel"><p>Click an edge to see its entailment matrix, both papers' claims and the prune decision;
click a paper (here or in the list) for its abstract, link and why it is ranked.</p></section>
</main>
<h2>Ranked papers</h2>
<ol id="results"></ol>
<script type="application/json" id="crase-data">@@DATA@@</script>
<script>@@VIS_JS@@</script>
<script>@@APP_JS@@</script>
</body>
</html>
"""

_APP_JS = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("crase-data").textContent);
  function el(tag, text, cls) { var e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; }
  function add(parent, child) { parent.appendChild(child); return child; }
  function fmt(x, d) { return Number(x).toFixed(d); }
  function short(t, n) { t = String(t); return t.length <= n ? t : t.slice(0, n - 1) + "\u2026"; }
  // a TeX tree of crase_core.tex.to_json: strings are text, [kind, part…] a mark drawn as an element
  function tex(parent, tree) {
    (tree || []).forEach(function (item) {
      if (typeof item === "string") { parent.appendChild(document.createTextNode(item)); return; }
      var kind = item[0];
      if (kind === "sup" || kind === "sub" || kind === "b" || kind === "i") { tex(add(parent, el(kind)), item[1]); }
      else if (kind === "over") { var o = add(parent, el("span")); o.style.textDecoration = "overline"; tex(o, item[1]); }
      else if (kind === "frac") { tex(add(parent, el("sup")), item[1]); add(parent, document.createTextNode("\u2044")); tex(add(parent, el("sub")), item[2]); }
      else if (kind === "sqrt") { if (item[2] && item[2].length) tex(add(parent, el("sup")), item[2]); add(parent, document.createTextNode("\u221a")); var r = add(parent, el("span")); r.style.textDecoration = "overline"; tex(r, item[1]); }
      else item.slice(1).forEach(function (part) { tex(parent, part); });
    });
    return parent;
  }
  function texEl(tag, before, tree, after, cls) { var e = el(tag, before, cls); tex(e, tree); if (after) e.appendChild(document.createTextNode(after)); return e; }
  function safeLink(url) { return typeof url === "string" && /^https?:\/\/[^\s"'<>]+$/.test(url) ? url : null; }

  document.getElementById("title").textContent = "Crase run: " + D.query;
  var c = D.counts;
  document.getElementById("meta").textContent = c.seeds + " seeds (" + c.seeds_kept + " kept) \u00b7 |V| " + c.nodes +
    " (" + c.nodes_kept + " kept) \u00b7 |E| " + c.edges + " (" + c.edges_kept + " kept) \u00b7 ranker " + D.ranker +
    " \u00b7 \u03b8 = " + D.theta + " (model-scored edges), \u03b8_lexical = " + D.theta_lexical + " (lexically scored edges), \u03c4 = " + D.tau + ", \u03b2 = " + D.beta + " \u00b7 source " + D.source +
    " \u00b7 backend " + D.backend + " \u00b7 run " + D.run_id + (D.created_at ? " \u00b7 " + D.created_at : "");
  document.getElementById("cost").textContent = "Work: " + D.budget + " \u00b7 done: " + D.cost + " \u00b7 pipeline time " + D.elapsed + " s";
  var notices = document.getElementById("notices");
  if (D.coverage) add(notices, el("div", D.coverage, "notice"));
  D.warnings.forEach(function (w) { add(notices, el("div", w, "warn")); });
  var legend = document.getElementById("legend");
  [["seed, kept", "#2a9d8f"], ["seed, pruned", "#e76f51"], ["expanded (neighbour)", "#4f6d9a"], ["text match", "#9b6bb5"]].forEach(function (r) {
    var s = add(legend, el("span")); var d = add(s, el("span", "", "dot")); d.style.background = r[1]; add(s, document.createTextNode(r[0]));
  });
  add(legend, el("span", " \u00b7 node size = score \u00b7 edge darkness/width = \u0394 \u00b7 \u2605 = in your library"));

  function deltaColour(d) {
    var t = Math.max(0, Math.min(1, d)), lo = [0xA9, 0xB8, 0xCC], hi = [0x1D, 0x35, 0x57];
    return "rgb(" + lo.map(function (a, i) { return Math.round(a + (hi[i] - a) * t); }).join(",") + ")";
  }
  function tip(text) { var d = el("div", text); d.style.whiteSpace = "pre-line"; d.style.maxWidth = "420px"; return d; }

  var nodesDS = new vis.DataSet(), edgesDS = new vis.DataSet();
  var network = new vis.Network(document.getElementById("graph"), { nodes: nodesDS, edges: edgesDS }, {
    physics: false, layout: { improvedLayout: false },
    interaction: { hover: true, tooltipDelay: 150, selectConnectedEdges: false, multiselect: false },
    nodes: { shape: "dot", borderWidth: 1, borderWidthSelected: 3, font: { size: 14, color: "#27313b", strokeWidth: 3, strokeColor: "#ffffff" },
             scaling: { label: { drawThreshold: 4 } } },
    edges: { arrows: { to: { enabled: true, scaleFactor: 0.5 } }, smooth: false, selectionWidth: 3, color: { inherit: false } }
  });
  window.craseExport = { network: network, nodes: nodesDS, edges: edgesDS, data: D, ready: false };

  function show(viewName) {
    var v = D.views[viewName], withPruned = document.getElementById("showPruned").checked;
    var labelled = {};
    D.results.slice(0, 10).forEach(function (r) { labelled[r.id] = true; });
    nodesDS.clear(); edgesDS.clear();
    nodesDS.add(v.nodes.map(function (id) {
      var n = D.nodes[id], p = v.pos[id] || [0, 0];
      var label = labelled[id] ? (n.in_library ? "\u2605 " : "") + short(n.title, 28) + (n.year ? " (" + n.year + ")" : "") : (n.in_library ? "\u2605" : undefined);
      return { id: id, x: p[0], y: p[1], label: label, color: n.colour, size: n.size, borderWidth: n.in_library ? 3 : 1,
               title: tip(n.title + "\n" + (n.year || "n.d.") + " \u00b7 " + n.role + (n.in_library ? " \u00b7 already in your library" : "") +
                          (n.kept ? "\nscore " + fmt(n.score, 4) + (n.rank ? " \u00b7 rank " + n.rank : "") : "\n" + n.prune_reason)) };
    }));
    var ids = v.edges.concat(withPruned ? v.pruned.filter(function (i) { return v.edges.indexOf(i) < 0; }) : []);
    edgesDS.add(ids.map(function (i) {
      var e = D.edges[i];
      return { id: "e" + i, from: e.from, to: e.to, color: e.kept ? deltaColour(e.delta) : "#d08c7f", width: e.kept ? 1 + 5 * e.delta : 1,
               dashes: !e.kept, title: tip(short(D.nodes[e.from].title, 50) + " \u2192 " + short(D.nodes[e.to].title, 50) + "\n\u0394 = " + fmt(e.delta, 3) + " \u00b7 weight " + fmt(e.weight, 3) + "\n" + e.decision) };
    }));
    document.getElementById("viewNote").textContent = v.note ? "(" + v.note + ")" : "";
    network.fit({ animation: false });
  }
  function currentView() { return document.querySelector("input[name=view]:checked").value; }
  document.querySelectorAll("input[name=view]").forEach(function (r) { r.addEventListener("change", function () { show(currentView()); }); });
  document.getElementById("showPruned").addEventListener("change", function () { show(currentView()); });

  var panel = document.getElementById("panel");
  function clear() { while (panel.firstChild) panel.removeChild(panel.firstChild); }
  function paperLine(label, id) { var n = D.nodes[id]; return texEl("div", label, n.title_tex, " (" + (n.year || "n.d.") + ")"); }

  function showEdge(i) {
    var e = D.edges[i], cu = D.claims[e.from] || { claims: [] }, cv = D.claims[e.to] || { claims: [] };
    clear();
    panel.dataset.edge = e.from + "->" + e.to;
    add(panel, el("h3", "Edge " + e.from + " \u2192 " + e.to));
    add(panel, paperLine("u (citing): ", e.from));
    add(panel, paperLine("v (cited): ", e.to));
    var dec = add(panel, el("p", "Decision \u2014 " + e.decision, e.kept ? "kept" : "pruned"));
    dec.id = "decision";
    add(panel, el("div", "\u0394 (coverage) " + fmt(e.delta, 3) + " \u00b7 supported " + e.supported.filter(Boolean).length + " of " + e.supported.length +
                  " \u00b7 age factor " + fmt(e.age_factor, 3) + " (" + e.age_years + " y, \u03b2 = " + D.beta + ") \u00b7 weight w " + fmt(e.weight, 3)));
    if (e.error) add(panel, el("div", "Scoring failed: " + e.error, "warn"));
    if (e.matrix.length) {
      add(panel, el("h3", "Entailment matrix M[i][j] = ent(claim i of u | claim j of v); outlined cells \u2265 " + e.theta_name + " = " + e.theta));
      var t = add(panel, el("table", null, "m")); t.id = "matrix";
      var head = add(t, el("tr")); add(head, el("th", "u \\ v"));
      e.matrix[0].forEach(function (_, j) { var cl = cv.claims[j]; var th = add(head, el("th", cl ? cl.id : "c" + (j + 1))); if (cl) th.title = cl.text; });
      e.matrix.forEach(function (row, i2) {
        var tr = add(t, el("tr")); var cl = cu.claims[i2];
        add(tr, cl ? texEl("th", (e.supported[i2] ? "\u2713 " : "\u2717 ") + cl.id + ": ", cl.tex, "", "rowh")
                   : el("th", (e.supported[i2] ? "\u2713 " : "\u2717 ") + "c" + (i2 + 1), "rowh"));
        row.forEach(function (x) { var td = add(tr, el("td", fmt(x, 2))); if (x >= e.theta) td.className = "hit"; });
      });
    } else add(panel, el("p", "No matrix: one of the papers has no claims."));
    if (e.contexts.length) { add(panel, el("h3", "Citation context")); e.contexts.forEach(function (x) { add(panel, texEl("blockquote", "", x)); }); }
    [["Claims of u", cu], ["Claims of v", cv]].forEach(function (pair) {
      add(panel, el("h3", pair[0]));
      if (pair[1].error) add(panel, el("div", "Claim extraction failed: " + pair[1].error, "warn"));
      pair[1].claims.forEach(function (cl) { add(panel, texEl("div", cl.id + " [" + cl.type + "] ", cl.tex, "", "claim")); });
    });
  }

  function showNode(id) {
    var n = D.nodes[id]; if (!n) return;
    clear();
    panel.dataset.node = id;
    add(panel, texEl("h3", "", n.title_tex));
    add(panel, el("div", (n.year || "n.d.") + " \u00b7 " + n.authors.join(", ") + (n.more_authors ? " et al. (+" + n.more_authors + ")" : "") + (n.venue ? " \u00b7 " + n.venue : "")));
    var link = safeLink(n.link);
    if (link) { var a = add(add(panel, el("div")), el("a", link)); a.href = link; a.rel = "noopener noreferrer"; a.target = "_blank"; }
    add(panel, el("div", n.role + (n.in_library ? " \u00b7 already in your library" : "")));
    add(panel, el("div", n.kept ? "score " + fmt(n.score, 4) + (n.rank ? " \u00b7 rank " + n.rank : "") : "pruned: " + n.prune_reason));
    if (n.seed) { add(panel, el("div", "Seed fate: " + (n.seed.fate === "kept" ? "\u2713 " : "\u2717 ") + n.seed.reason)); n.seed.origins.forEach(function (o) { add(panel, el("div", "\u2022 " + o)); }); }
    if (n.reason) add(panel, el("p", "Why it is here: " + n.reason));
    if (n.abstract) { add(panel, el("h3", "Abstract")); add(panel, texEl("p", "", n.abstract_tex)); }
    var cs = D.claims[id];
    if (cs && cs.claims.length) { add(panel, el("h3", "Claims")); cs.claims.forEach(function (cl) { add(panel, texEl("div", cl.id + " [" + cl.type + "] ", cl.tex, "", "claim")); }); }
  }

  network.on("click", function (params) {
    if (params.nodes && params.nodes.length) showNode(String(params.nodes[0]));
    else if (params.edges && params.edges.length) showEdge(Number(String(params.edges[0]).slice(1)));
  });

  var list = document.getElementById("results");
  D.results.forEach(function (r) {
    var n = D.nodes[r.id], li = add(list, el("li"));
    var head = add(li, el("div")); add(head, texEl("strong", r.rank + ". ", n.title_tex)); add(head, document.createTextNode(" \u00b7 " + (n.year || "n.d.") + " \u00b7 score " + fmt(r.score, 4)));
    if (r.in_library) add(head, el("span", "already in your library", "lib"));
    add(li, el("div", n.authors.slice(0, 3).join(", ") + (n.authors.length > 3 ? " et al." : ""), "why"));
    add(li, el("div", "Why it is here: " + r.reason, "why"));
    li.addEventListener("click", function () { showNode(r.id); panel.scrollTop = 0; panel.scrollIntoView({ block: "start" }); if (nodesDS.get(r.id)) { network.selectNodes([r.id]); network.focus(r.id, { scale: 1.2, animation: false }); } });
  });

  show("top");
  network.once("afterDrawing", function () { window.craseExport.ready = true; });
  network.redraw();
})();
"""
