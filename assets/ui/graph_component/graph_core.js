// The evidence graph of a Crase run: one drawing and one hit test, shared by the explorer's Streamlit
// component (main.js) and the HTML export (inlined by crase_core/views/html_export.py, so it works offline).
//
// vis-network 9.1.2 draws the papers and handles zoom, pan and dragging; this script draws everything else
// on the same canvas — the edges (quadratic curves with the view model's `bend`, from rim to rim, arrow at
// the cited paper), the timeline's axis, the clusters' discs and captions, the labels, the highlights —
// and answers "what is under the pointer" for hover, tooltip and click alike:
//
//   hitTest(p): a paper whose drawn disc holds p wins; otherwise the nearest item within TOL px — an edge
//   by its distance to the drawn curve (minus half its width), a paper by its distance to its rim; on equal
//   distance the item drawn on top.
//
// Hover, tooltip, click and double-click all call hitTest with the pointer position computed by one
// function (pointer(ev)), and a click also sets the hover, so the highlighted item is what a click opens.
// Labels are placed in priority order where they overlap no label, no paper and no edge (hovered and
// selected papers are always labelled, on the side crossing the fewest edges; in the focus view labels
// face away from the focus paper). Text reaches the page through textContent and the canvas through
// fillText only — never as HTML.
(function (root) {
  "use strict";
  var TOL = 8, LABEL_FONT = 12, LABEL_H = 16, MAX_LABELS = 45, SAMPLES = 24, CELL = 40;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function same(a, b) { return (!a && !b) || (!!a && !!b && a.kind === b.kind && a.id === b.id); }
  function clamp(x, lo, hi) { return Math.max(lo, Math.min(hi, x)); }
  function safeColour(c, fallback) { return typeof c === "string" && /^#[0-9a-fA-F]{3,8}$/.test(c) ? c : fallback; }

  // ---- geometry (canvas units): the quadratic Bézier of crase_core.views.graph_views.curve_points ----
  function control(p, q, bend) {
    var dx = q.x - p.x, dy = q.y - p.y;
    return { x: (p.x + q.x) / 2 + bend * dy, y: (p.y + q.y) / 2 - bend * dx };
  }
  function bez(p, c, q, t) {
    var a = (1 - t) * (1 - t), b = 2 * (1 - t) * t, d = t * t;
    return { x: a * p.x + b * c.x + d * q.x, y: a * p.y + b * c.y + d * q.y };
  }
  function dist(a, b) { return Math.hypot(a.x - b.x, a.y - b.y); }
  // the t where the curve crosses the circle of radius r around `centre` (inside at t=lo, outside at t=hi)
  function crossing(p, c, q, centre, r, lo, hi) {
    for (var i = 0; i < 30; i++) {
      var mid = (lo + hi) / 2;
      if (dist(bez(p, c, q, mid), centre) < r) lo = mid; else hi = mid;
    }
    return (lo + hi) / 2;
  }
  function segDist(pt, a, b) {
    var dx = b.x - a.x, dy = b.y - a.y, L = dx * dx + dy * dy;
    var t = L ? ((pt.x - a.x) * dx + (pt.y - a.y) * dy) / L : 0;
    t = clamp(t, 0, 1);
    return Math.hypot(pt.x - (a.x + t * dx), pt.y - (a.y + t * dy));
  }
  // Liang–Barsky: does segment a-b cross the box?
  function segHitsBox(a, b, box) {
    var t0 = 0, t1 = 1, dx = b.x - a.x, dy = b.y - a.y;
    var p = [-dx, dx, -dy, dy], q = [a.x - box.x, box.x + box.w - a.x, a.y - box.y, box.y + box.h - a.y];
    for (var i = 0; i < 4; i++) {
      if (p[i] === 0) { if (q[i] < 0) return false; continue; }
      var r = q[i] / p[i];
      if (p[i] < 0) { if (r > t1) return false; if (r > t0) t0 = r; }
      else { if (r < t0) return false; if (r < t1) t1 = r; }
    }
    return true;
  }
  function boxesOverlap(a, b) { return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h; }

  function create(host, opts) {
    opts = opts || {};
    var wrap = el("div", "cg-wrap");
    var legend = el("div", "cg-legend");
    var chips = el("div", "cg-clusters");
    var canvasBox = el("div", "cg-canvas");
    var tip = el("div", "cg-tip");
    tip.setAttribute("role", "tooltip");
    var empty = el("div", "cg-empty", "Nothing to show with these filters.");
    var bar = el("div", "cg-bar");
    var hint = el("span", "cg-hint");
    var fitBtn = el("button", "cg-fit", "Fit");
    fitBtn.type = "button";
    fitBtn.title = "Zoom to fit the whole view";
    bar.appendChild(hint);
    bar.appendChild(fitBtn);
    if (opts.ids) { canvasBox.id = "graph"; tip.id = "tip"; legend.id = "legend"; fitBtn.id = "fit"; }  // a page of its own
    [legend, chips, canvasBox, tip, empty, bar].forEach(function (x) { wrap.appendChild(x); });
    host.appendChild(wrap);

    var network = null, nodesDS = null;
    var nodeRec = {}, edges = [], edgeById = {}, axis = [], captions = [], layout = "";
    var geo = null;  // canvas-space geometry of the edges, rebuilt when positions change
    var hovered = null, selected = null;
    var G = { ready: false, labels: [], clicks: [], hovered: null, selected: null, key: "", network: null };

    // ---- geometry cache ----
    function positions() { return network.getPositions(); }  // where vis-network draws the papers (whole pixels)
    function buildGeometry() {
      var pos = positions();
      var out = [];
      edges.forEach(function (e, index) {
        var p = pos[e.from], q = pos[e.to];
        if (!p || !q || e.from === e.to) return;
        var a = nodeRec[e.from], b = nodeRec[e.to];
        var ra = (a.size || 10) + (a.bw || 1) / 2, rb = (b.size || 10) + (b.bw || 1) / 2;
        var c = control(p, q, e.bend || 0);
        if (dist(p, q) <= ra + rb) return;  // touching papers: no visible edge
        var t0 = dist(bez(p, c, q, 0.5), p) > ra ? crossing(p, c, q, p, ra, 0, 0.5) : 0.5;
        var t1 = dist(bez(p, c, q, 0.5), q) > rb ? crossing(p, c, q, q, rb, 1, 0.5) : 0.5;
        if (t1 <= t0) return;
        var pts = [];
        for (var i = 0; i <= SAMPLES; i++) pts.push(bez(p, c, q, t0 + (t1 - t0) * i / SAMPLES));
        out.push({ e: e, index: index, p: p, c: c, q: q, t0: t0, t1: t1, pts: pts });
      });
      geo = out;
      return out;
    }
    function geometry() { return geo || buildGeometry(); }
    function view() {
      var s = network.getScale(), o = network.canvasToDOM({ x: 0, y: 0 });
      return { s: s, ox: o.x, oy: o.y };
    }
    function toDOM(v, p) { return { x: v.ox + v.s * p.x, y: v.oy + v.s * p.y }; }

    // ---- the one hit test ----
    function hitTest(dom) {
      if (!network) return null;
      var v = view(), pos = positions();
      var ids = nodesDS.getIds(), inside = null, best = null;
      for (var i = 0; i < ids.length; i++) {
        var n = nodeRec[ids[i]], p = pos[ids[i]];
        if (!p) continue;
        var d = dist(toDOM(v, p), dom) - ((n.size || 10) + (n.bw || 1) / 2) * v.s;
        if (d <= 0) inside = { kind: "node", id: String(ids[i]), d: d };  // later papers are drawn on top
        else if (d <= TOL && (!best || d < best.d)) best = { kind: "node", id: String(ids[i]), d: d, z: 1e9 + i };
      }
      if (inside) return { kind: "node", id: inside.id };
      geometry().forEach(function (g) {
        var prev = toDOM(v, g.pts[0]), dmin = Infinity;
        for (var k = 1; k < g.pts.length; k++) {
          var cur = toDOM(v, g.pts[k]);
          dmin = Math.min(dmin, segDist(dom, prev, cur));
          prev = cur;
        }
        var d = Math.max(0, dmin - Math.max(g.e.width * v.s, 0.8) / 2);
        if (d <= TOL && (!best || d < best.d || (d === best.d && g.index > best.z && best.kind === "edge")))
          best = { kind: "edge", id: String(g.e.id), d: d, z: g.index };
      });
      return best ? { kind: best.kind, id: best.id } : null;
    }

    // ---- drawing ----
    function faded() {
      // papers and edges not touching the hovered paper are drawn faint: what is under the pointer stands out
      if (!hovered || hovered.kind !== "node") return null;
      var keep = {};
      keep[hovered.id] = true;
      edges.forEach(function (e) {
        if (e.from === hovered.id) keep[e.to] = true;
        if (e.to === hovered.id) keep[e.from] = true;
      });
      return keep;
    }
    function strokeEdge(ctx, g, s, width, colour, alpha, dash, arrow) {
      var e = g.e, headLen = Math.max(7 / s, 2.4 * width + 3), headW = headLen * 0.55;
      var tip0 = bez(g.p, g.c, g.q, g.t1);
      // where the line stops: the arrow's base
      var tb = g.t1;
      if (arrow) {
        var lo = g.t0, hi = g.t1;
        for (var i = 0; i < 25; i++) { var mid = (lo + hi) / 2; if (dist(bez(g.p, g.c, g.q, mid), tip0) > headLen) lo = mid; else hi = mid; }
        tb = lo;
      }
      var a = bez(g.p, g.c, g.q, g.t0), b = bez(g.p, g.c, g.q, tb);
      // control point of the sub-curve [t0, tb] (blossom of the quadratic)
      var t0 = g.t0, t1 = tb;
      var w0 = (1 - t0) * (1 - t1), w1 = (1 - t0) * t1 + t0 * (1 - t1), w2 = t0 * t1;
      var sc = { x: w0 * g.p.x + w1 * g.c.x + w2 * g.q.x, y: w0 * g.p.y + w1 * g.c.y + w2 * g.q.y };
      ctx.globalAlpha = alpha;
      ctx.strokeStyle = colour;
      ctx.lineWidth = Math.max(width, 0.8 / s);
      ctx.setLineDash((dash || []).map(function (d) { return d / s; }));
      ctx.beginPath();
      ctx.moveTo(a.x, a.y);
      if (e.bend) ctx.quadraticCurveTo(sc.x, sc.y, b.x, b.y); else ctx.lineTo(b.x, b.y);
      ctx.stroke();
      ctx.setLineDash([]);
      if (arrow && tb < g.t1) {
        var ux = tip0.x - b.x, uy = tip0.y - b.y, L = Math.hypot(ux, uy) || 1;
        ux /= L; uy /= L;
        ctx.fillStyle = colour;
        ctx.beginPath();
        ctx.moveTo(tip0.x, tip0.y);
        ctx.lineTo(tip0.x - ux * headLen - uy * headW / 2, tip0.y - uy * headLen + ux * headW / 2);
        ctx.lineTo(tip0.x - ux * headLen + uy * headW / 2, tip0.y - uy * headLen - ux * headW / 2);
        ctx.closePath();
        ctx.fill();
      }
      ctx.globalAlpha = 1;
    }
    function drawBackground(ctx) {
      var s = network.getScale(), box = canvasBox.getBoundingClientRect();
      var tl = network.DOMtoCanvas({ x: 0, y: 0 }), br = network.DOMtoCanvas({ x: box.width, y: box.height });
      ctx.save();
      captions.forEach(function (c) {  // the clusters' discs
        if (c.r === undefined) return;
        ctx.beginPath();
        ctx.arc(c.cx, c.cy, c.r + 22, 0, 2 * Math.PI);
        ctx.fillStyle = "rgba(226,232,240,0.45)";
        ctx.fill();
        ctx.strokeStyle = "#dde3ea";
        ctx.lineWidth = 1 / s;
        ctx.stroke();
      });
      axis.forEach(function (t) {
        ctx.beginPath();
        ctx.strokeStyle = t.fold ? "#c7cfd8" : "#e6eaef";
        ctx.lineWidth = 1 / s;
        ctx.setLineDash(t.fold ? [3 / s, 5 / s] : []);
        ctx.moveTo(t.x, tl.y);
        ctx.lineTo(t.x, br.y);
        ctx.stroke();
      });
      ctx.setLineDash([]);
      var keep = faded();
      var ordered = geometry().slice();
      var hl = [hovered, selected].filter(function (h) { return h && h.kind === "edge"; });
      ordered.forEach(function (g) {
        if (hl.some(function (h) { return h.id === String(g.e.id); })) {
          var isSel = selected && selected.kind === "edge" && selected.id === String(g.e.id);
          strokeEdge(ctx, g, s, g.e.width + 9 / s, isSel ? "#e76f51" : "#2a9d8f", isSel ? 0.35 : 0.3, [], false);
        }
      });
      ordered.forEach(function (g) {
        var e = g.e, touches = keep && (e.from === hovered.id || e.to === hovered.id);
        var dim = keep && !touches, st = touches && e.strong ? e.strong : e;
        strokeEdge(ctx, g, s, st.width, safeColour(e.colour, "#3f5873"), (st.opacity || 0.8) * (dim ? 0.18 : 1), e.dash, true);
      });
      ctx.restore();
    }
    function drawAxisLabels(ctx) {
      if (!axis.length) return;
      var s = network.getScale(), tl = network.DOMtoCanvas({ x: 0, y: 0 });
      var box = canvasBox.getBoundingClientRect();
      ctx.save();
      ctx.fillStyle = "rgba(251,252,253,0.92)";
      ctx.fillRect(tl.x, tl.y, box.width / s, 22 / s);
      ctx.font = (11 / s) + "px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      var lastRight = -Infinity, ticks = axis.slice().sort(function (a, b) { return a.x - b.x; });
      ticks.forEach(function (t, i) {
        var d = network.canvasToDOM({ x: t.x, y: 0 });
        var text = String(t.label), w = ctx.measureText(text).width * s;
        if (t.fold) {  // a fold names its years when they fit between the neighbouring ticks, else "≈"
          var prev = i ? network.canvasToDOM({ x: ticks[i - 1].x, y: 0 }).x : -Infinity;
          var next = i + 1 < ticks.length ? network.canvasToDOM({ x: ticks[i + 1].x, y: 0 }).x : Infinity;
          if (!text || Math.min(d.x - prev, next - d.x) < w / 2 + 22) { text = "\u2248"; w = ctx.measureText(text).width * s; }
        }
        if (d.x - w / 2 < lastRight + 6 || d.x < 0 || d.x > box.width) return;  // keep ticks readable when zoomed out
        lastRight = d.x + w / 2;
        ctx.fillStyle = t.fold ? "#9aa5b1" : "#6b7785";
        ctx.fillText(text, t.x, tl.y + 5 / s);
      });
      ctx.restore();
    }
    function drawHighlights(ctx) {
      var s = network.getScale(), pos = positions();
      function ring(id, colour, width) {
        var n = nodeRec[id], p = pos[id];
        if (!n || !p) return;
        ctx.beginPath();
        ctx.arc(p.x, p.y, (n.size || 10) + 4 / s, 0, 2 * Math.PI);
        ctx.strokeStyle = colour;
        ctx.lineWidth = width / s;
        ctx.stroke();
      }
      ctx.save();
      var keep = faded();
      if (keep) {  // a veil over the papers not touching the hovered one
        ctx.fillStyle = "rgba(251,252,253,0.72)";
        nodesDS.getIds().forEach(function (id) {
          if (keep[id]) return;
          var p = pos[id], n = nodeRec[id];
          ctx.beginPath();
          ctx.arc(p.x, p.y, (n.size || 10) + 1.5, 0, 2 * Math.PI);
          ctx.fill();
        });
      }
      if (layout === "focus") {  // the paper the heading names
        nodesDS.getIds().forEach(function (id) { if (nodeRec[id].pri === 0) ring(id, "rgba(231,111,81,0.55)", 1.5); });
      }
      if (hovered && !same(hovered, selected) && hovered.kind === "node") ring(hovered.id, "rgba(42,157,143,0.95)", 2.5);
      if (hovered && hovered.kind === "edge") {
        var he = edgeById[hovered.id];
        if (he) { ring(he.from, "rgba(42,157,143,0.8)", 1.5); ring(he.to, "rgba(42,157,143,0.8)", 1.5); }
      }
      if (selected) {
        if (selected.kind === "edge") {
          var se = edgeById[selected.id];
          if (se) { ring(se.from, "#e76f51", 2.5); ring(se.to, "#e76f51", 2.5); }
        } else ring(selected.id, "#e76f51", 3.5);
      }
      ctx.restore();
    }

    // ---- labels ----
    function edgeGrid(v) {
      var grid = {};
      geometry().forEach(function (g) {
        var prev = toDOM(v, g.pts[0]);
        for (var k = 1; k < g.pts.length; k++) {
          var cur = toDOM(v, g.pts[k]), seg = { a: prev, b: cur, id: String(g.e.id), pale: g.e.context };
          var x0 = Math.floor(Math.min(prev.x, cur.x) / CELL), x1 = Math.floor(Math.max(prev.x, cur.x) / CELL);
          var y0 = Math.floor(Math.min(prev.y, cur.y) / CELL), y1 = Math.floor(Math.max(prev.y, cur.y) / CELL);
          for (var gx = x0; gx <= x1; gx++) for (var gy = y0; gy <= y1; gy++) {
            var key = gx + "," + gy;
            (grid[key] = grid[key] || []).push(seg);
          }
          prev = cur;
        }
      });
      return grid;
    }
    // edges passing under a label box: {strong, pale} counts (pale: context edges)
    function crossings(grid, box) {
      var seen = {}, n = { strong: 0, pale: 0 };
      for (var gx = Math.floor(box.x / CELL); gx <= Math.floor((box.x + box.w) / CELL); gx++)
        for (var gy = Math.floor(box.y / CELL); gy <= Math.floor((box.y + box.h) / CELL); gy++)
          (grid[gx + "," + gy] || []).forEach(function (sg) {
            if (!seen[sg.id] && segHitsBox(sg.a, sg.b, box)) { seen[sg.id] = true; if (sg.pale) n.pale++; else n.strong++; }
          });
      return n;
    }
    function spots(d, r, w, outward) {
      var h = LABEL_H, list = [
        { x: d.x - w / 2, y: d.y + r + 2, dx: 0, dy: 1 }, { x: d.x - w / 2, y: d.y - r - 2 - h, dx: 0, dy: -1 },
        { x: d.x + r + 3, y: d.y - h / 2, dx: 1, dy: 0 }, { x: d.x - r - 3 - w, y: d.y - h / 2, dx: -1, dy: 0 },
        { x: d.x + r * 0.7, y: d.y + r * 0.7, dx: 0.7, dy: 0.7 }, { x: d.x - r * 0.7 - w, y: d.y + r * 0.7, dx: -0.7, dy: 0.7 },
        { x: d.x + r * 0.7, y: d.y - r * 0.7 - h, dx: 0.7, dy: -0.7 }, { x: d.x - r * 0.7 - w, y: d.y - r * 0.7 - h, dx: -0.7, dy: -0.7 }
      ];
      if (outward) list.sort(function (a, b) { return (b.dx * outward.x + b.dy * outward.y) - (a.dx * outward.x + a.dy * outward.y); });
      return list;
    }
    function drawLabels(ctx) {
      var v = view(), pos = positions(), box = canvasBox.getBoundingClientRect();
      var forced = [];
      [hovered, selected].forEach(function (h) {
        if (!h) return;
        if (h.kind === "node") forced.push(h.id);
        else if (edgeById[h.id]) { forced.push(edgeById[h.id].from); forced.push(edgeById[h.id].to); }
      });
      // the selection outlives a change of view (the inspector still shows it): a paper this view does not
      // draw gets no label
      forced = forced.filter(function (id) { return nodeRec[id] && pos[id]; });
      // the focus view names its paper in a heading at the canvas' top left: beside the paper every arrow
      // of the view would run through its label
      var focusId = layout === "focus" ? nodesDS.getIds().filter(function (id) { return nodeRec[id].pri === 0; })[0] : undefined;
      var forcedSet = {};
      forced = forced.filter(function (id) { if (forcedSet[id]) return false; forcedSet[id] = true; return true; });
      var ids = nodesDS.getIds();
      var queue = forced.concat(ids.filter(function (id) { return !forcedSet[id]; })
        .sort(function (a, b) { return (nodeRec[a].pri || 0) - (nodeRec[b].pri || 0); }));
      var discs = ids.map(function (id) {
        var d = toDOM(v, pos[id]), r = (nodeRec[id].size || 10) * v.s;
        return { id: id, x: d.x - r, y: d.y - r, w: 2 * r, h: 2 * r };
      });
      var grid = edgeGrid(v), placed = [], drawn = [], count = 0;
      var top = axis.length ? 24 : 2;
      ctx.save();
      ctx.font = "600 13px system-ui, sans-serif";
      captions.forEach(function (c) {
        // a caption as wide as its slot at this zoom (the layout made the slot as wide as the whole caption):
        // with most of the gap to the next slot; drop its last terms ("a · b · c (n)" → "a (n)"), then cut,
        // only when zoomed out below that (captions that would overlap are not drawn)
        var room = Math.max(70, ((c.w || 2 * (c.r || 40) + 44) + 60) * v.s), d = toDOM(v, { x: c.x, y: c.y });
        var text = fitCaption(ctx, String(c.label), room), w = ctx.measureText(text).width + 6;
        var b = { id: "cluster:" + c.cluster, text: text, x: d.x - w / 2, y: d.y - 15, w: w, h: 16, caption: true };
        if (placed.some(function (o) { return boxesOverlap(b, o); })) return;
        placed.push(b);
        drawn.push(b);
      });
      if (focusId !== undefined && nodeRec[focusId].label) {
        var ft = "Focus: " + nodeRec[focusId].label, fw = ctx.measureText(ft).width + 14;  // (600 13px, as drawn)
        var fb = { id: focusId, text: ft, x: 8, y: top + 4, w: fw, h: 22, caption: true, heading: true };
        placed.push(fb);
        drawn.push(fb);
      }
      ctx.font = LABEL_FONT + "px system-ui, sans-serif";
      var centre = null;
      if (layout === "focus") {
        var fid = ids.filter(function (id) { return nodeRec[id].pri === 0; })[0];
        if (fid !== undefined) centre = toDOM(v, pos[fid]);
      }
      queue.forEach(function (id) {
        var n = nodeRec[id], text = n.label;
        var isForced = !!forcedSet[id];
        if (id === focusId && !isForced) return;  // named in the heading
        if (!text || (!isForced && count >= MAX_LABELS)) return;
        var d = toDOM(v, pos[id]), r = (n.size || 10) * v.s, w = ctx.measureText(text).width + 4;
        var out = centre && (d.x !== centre.x || d.y !== centre.y) ? { x: d.x - centre.x, y: d.y - centre.y } : null;
        var best = null;
        spots(d, r, w, out).forEach(function (sp, k) {
          var b = { id: id, text: text, x: sp.x, y: sp.y, w: w, h: LABEL_H };
          if (b.x < 2 || b.y < top || b.x + b.w > box.width - 2 || b.y + b.h > box.height - 2) return;
          for (var i = 0; i < placed.length; i++) if (boxesOverlap(b, placed[i])) return;
          if (!isForced) for (var j = 0; j < discs.length; j++) if (discs[j].id !== id && boxesOverlap(b, discs[j])) return;
          var cross = crossings(grid, b), cost = cross.strong * 100 + cross.pale * 10 + k;
          // in the focus view a label no arrow runs through, or none; elsewhere at most two strong edges pass
          // under it (its pale card hides them there) and any number of pale ones
          if (!isForced && (layout === "focus" ? cross.strong + cross.pale > 0 : cross.strong > 2)) return;
          if (!best || cost < best.cost) { best = b; best.cost = cost; }
        });
        if (!best) return;
        placed.push(best);
        drawn.push(best);
        if (!isForced) count += 1;
      });
      drawn.forEach(function (b) {
        var sel = selected && selected.kind === "node" && selected.id === b.id;
        var x = (b.x + b.w / 2 - v.ox) / v.s, y = (b.y + 2 - v.oy) / v.s;
        ctx.font = (b.caption || sel ? "600 " : "") + ((b.caption ? 13 : LABEL_FONT) / v.s) + "px system-ui, sans-serif";
        ctx.textAlign = "center";
        ctx.textBaseline = "top";
        if (b.heading) {
          ctx.fillStyle = "rgba(255,255,255,0.95)";
          ctx.strokeStyle = "#e76f51";
          ctx.lineWidth = 1.2 / v.s;
          ctx.beginPath();
          ctx.rect((b.x - v.ox) / v.s, (b.y - v.oy) / v.s, b.w / v.s, b.h / v.s);
          ctx.fill();
          ctx.stroke();
          y = (b.y + 4 - v.oy) / v.s;
        }
        if (!b.caption) {  // a pale card under the text: an edge passing under a label does not cross its letters
          ctx.fillStyle = "rgba(251,252,253,0.86)";
          var bx = (b.x - v.ox) / v.s, by = (b.y - v.oy) / v.s, bw = b.w / v.s, bh = b.h / v.s, rr = 3 / v.s;
          ctx.beginPath();
          ctx.moveTo(bx + rr, by); ctx.lineTo(bx + bw - rr, by); ctx.quadraticCurveTo(bx + bw, by, bx + bw, by + rr);
          ctx.lineTo(bx + bw, by + bh - rr); ctx.quadraticCurveTo(bx + bw, by + bh, bx + bw - rr, by + bh);
          ctx.lineTo(bx + rr, by + bh); ctx.quadraticCurveTo(bx, by + bh, bx, by + bh - rr);
          ctx.lineTo(bx, by + rr); ctx.quadraticCurveTo(bx, by, bx + rr, by);
          ctx.fill();
        }
        ctx.lineWidth = 3.5 / v.s;
        ctx.lineJoin = "round";
        ctx.strokeStyle = "rgba(255,255,255,0.94)";
        ctx.strokeText(b.text, x, y);
        ctx.fillStyle = b.caption ? "#52606d" : sel ? "#b3472f" : "#27313b";
        ctx.fillText(b.text, x, y);
      });
      ctx.restore();
      G.labels = placed.map(function (b) { return { id: b.id, text: b.text, x: b.x, y: b.y, w: b.w, h: b.h, caption: !!b.caption, heading: !!b.heading }; });
    }

    function fitCaption(ctx, label, room) {
      var m = /^(.*?)(\s\(\d+\))?$/.exec(label), terms = m[1].split(" \u00b7 "), tail = m[2] || "";
      while (terms.length > 1 && ctx.measureText(terms.join(" \u00b7 ") + tail).width > room) terms.pop();
      var text = terms.join(" \u00b7 ") + tail;
      while (text.length > 4 && ctx.measureText(text).width > room) text = text.slice(0, -2) + "\u2026";
      return text;
    }

    // ---- legend and cluster chips (constant text from the view model; textContent only) ----
    function buildLegend(items) {
      legend.textContent = "";
      legend.appendChild(el("span", "lg-head", "Legend"));
      (items || []).forEach(function (it) {
        var row = el("span", "lg-row"), sw = el("span", "sw sw-" + String(it.kind).replace(/[^a-z-]/g, ""));
        var c = safeColour(it.colour, "");
        if (c) {
          if (it.kind === "dot") sw.style.background = c;
          else if (it.kind === "ring" || it.kind === "mine") sw.style.borderColor = c;
          else sw.style.borderTopColor = c;
        }
        row.appendChild(sw);
        row.appendChild(el("span", null, it.text));
        legend.appendChild(row);
      });
    }
    function buildChips() {
      chips.textContent = "";
      var real = captions.filter(function (c) { return c.r !== undefined; });
      chips.style.display = real.length > 1 ? "flex" : "none";
      if (real.length < 2) return;
      chips.appendChild(el("span", "lg-head", "Zoom to a cluster:"));
      real.forEach(function (c) {
        var m = /^(.*?)(\s\(\d+\))?$/.exec(String(c.label)), terms = m[1].split(" \u00b7 ");
        var b = el("button", "chip", terms.slice(0, 2).join(" \u00b7 ") + (m[2] || ""));
        b.title = String(c.label);  // a native tooltip: plain text
        b.type = "button";
        b.addEventListener("click", function () { zoomTo(c.cluster); });
        chips.appendChild(b);
      });
      var all = el("button", "chip", "all");
      all.type = "button";
      all.addEventListener("click", function () { fit(); });
      chips.appendChild(all);
    }
    function zoomTo(cluster) {
      var ids = nodesDS.getIds().filter(function (id) { return nodeRec[id].group === cluster; });
      if (!ids.length) return;
      network.fit({ nodes: ids, animation: false });
      network.moveTo({ scale: network.getScale() * 0.85, animation: false });
    }

    // ---- tooltip ----
    function showTip(hit, dom) {
      var item = hit.kind === "node" ? nodeRec[hit.id] : edgeById[hit.id];
      if (!item || !item.tip) { hideTip(); return; }
      tip.textContent = item.tip;
      tip.style.display = "block";
      var wb = wrap.getBoundingClientRect(), cb = canvasBox.getBoundingClientRect();
      var x = dom.x + (cb.left - wb.left) + 16, y = dom.y + (cb.top - wb.top) + 16;
      var w = tip.offsetWidth, h = tip.offsetHeight;
      if (x + w > wb.width - 6) x = Math.max(6, x - w - 32);
      if (y + h > wb.height - 6) y = Math.max(6, y - h - 28);
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    }
    function hideTip() { tip.style.display = "none"; tip.textContent = ""; }

    // ---- data ----
    function setData(data) {
      data = data || {};
      layout = String(data.layout || "");
      nodeRec = {};
      var visNodes = (data.nodes || []).map(function (n) {
        var id = String(n.id), bw = n.mine ? 3.5 : 1;
        nodeRec[id] = { id: id, label: n.label ? String(n.label) : "", tip: n.tip ? String(n.tip) : "", size: Number(n.size) || 10,
                        pri: Number(n.pri) || 0, rank: Number(n.rank) || 0, group: n.group, mine: !!n.mine, bw: bw };
        var bg = safeColour(n.colour, "#4f6d9a");
        return { id: id, x: Number(n.x) || 0, y: Number(n.y) || 0, size: Number(n.size) || 10, borderWidth: bw, mine: !!n.mine,
                 borderWidthSelected: bw, color: { background: bg, border: safeColour(n.border, "#ffffff"),
                 highlight: { background: bg, border: safeColour(n.border, "#ffffff") },
                 hover: { background: bg, border: safeColour(n.border, "#ffffff") } } };
      });
      edges = (data.edges || []).filter(function (e) { return nodeRec[String(e.from)] && nodeRec[String(e.to)]; })
        .map(function (e) {
          return { id: String(e.id), from: String(e.from), to: String(e.to), kept: e.kept !== false, scorer: String(e.scorer || ""),
                   delta: Number(e.delta) || 0, tip: e.tip ? String(e.tip) : "", bend: Number(e.bend) || 0,
                   width: Number(e.width) || 1, colour: e.colour, opacity: Number(e.opacity) || 0.8,
                   dash: Array.isArray(e.dash) ? e.dash.map(Number) : [], context: !!e.context,
                   strong: e.context ? { width: Math.max(1.2, Number(e.width) * 2), opacity: 0.85 } : null };
        });
      // drawing order (and the hit test's "on top" on equal distance): context edges first, under the trails
      edges = edges.filter(function (e) { return e.context; }).concat(edges.filter(function (e) { return !e.context; }));
      edgeById = {};
      edges.forEach(function (e) { edgeById[e.id] = e; });
      axis = data.axis || [];
      captions = data.captions || [];
      hovered = null;
      geo = null;
      hideTip();
      buildLegend(data.legend);
      buildChips();
      hint.textContent = String(data.hint || "Hover: full text \u00b7 Click: inspect \u00b7 Scroll: zoom \u00b7 Drag: pan");
      empty.style.display = visNodes.length ? "none" : "flex";
      canvasBox.style.height = (opts.height ? opts.height() : 600) + "px";
      nodesDS = new vis.DataSet(visNodes);
      var options = {
        autoResize: true, physics: false,
        interaction: { hover: false, selectable: false, tooltipDelay: 3600000, dragNodes: true, zoomSpeed: 0.6,
                       navigationButtons: false, multiselect: false },
        nodes: { shape: "dot", font: { size: 0 } },
        layout: { improvedLayout: false, randomSeed: 7 }
      };
      if (network) network.destroy();
      G.ready = false;
      network = new vis.Network(canvasBox, { nodes: nodesDS, edges: [] }, options);
      G.network = network;
      G.nodes = nodesDS;
      G.key = String(data.key || "");
      network.on("beforeDrawing", drawBackground);
      network.on("afterDrawing", function (ctx) { drawHighlights(ctx); drawLabels(ctx); drawAxisLabels(ctx); });
      network.on("dragging", function () { geo = null; hideTip(); });
      network.on("dragEnd", function () { geo = null; });
      network.on("zoom", hideTip);
      network.once("afterDrawing", function () { fit(); setTimeout(function () { G.ready = true; }, 0); });
    }
    // fit everything drawn — papers, clusters' discs and their captions — not only the papers
    function fit() {
      if (!network) return;
      var pos = positions(), ids = nodesDS.getIds();
      if (!ids.length) return;
      var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
      function take(x, y, r) { x0 = Math.min(x0, x - r); x1 = Math.max(x1, x + r); y0 = Math.min(y0, y - r); y1 = Math.max(y1, y + r); }
      ids.forEach(function (id) { take(pos[id].x, pos[id].y, (nodeRec[id].size || 10) + 4); });
      geometry().forEach(function (g) { if (g.e.bend) { var m = bez(g.p, g.c, g.q, 0.5); take(m.x, m.y, 4); } });
      captions.forEach(function (c) { if (c.r !== undefined) { take(c.cx, c.cy, c.r + 22); take(c.x, c.y - 18, 0); } });
      var box = canvasBox.getBoundingClientRect(), top = axis.length ? 30 : 10, pad = 18;
      var w = Math.max(x1 - x0, 1), h = Math.max(y1 - y0, 1);
      var scale = Math.min((box.width - 2 * pad) / w, (box.height - top - pad) / h, 2.5);
      network.moveTo({ position: { x: (x0 + x1) / 2, y: (y0 + y1) / 2 - (top - pad) / 2 / scale }, scale: scale, animation: false });
    }
    function select(sel) {
      selected = sel && sel.id !== undefined && sel.id !== null ? { kind: String(sel.kind), id: String(sel.id) } : null;
      G.selected = selected;
      if (network) network.redraw();
    }
    function resize() {
      if (!network) return;
      canvasBox.style.height = (opts.height ? opts.height() : 600) + "px";
      network.redraw();
      fit();
    }

    // ---- pointer: one position function for hover, click and double-click ----
    function pointer(ev) {
      var r = canvasBox.getBoundingClientRect();
      return { x: ev.clientX - r.left, y: ev.clientY - r.top };
    }
    function setHover(hit, dom) {
      if (!same(hit, hovered)) {
        hovered = hit;
        G.hovered = hit;
        canvasBox.style.cursor = hit ? "pointer" : "default";
        if (network) network.redraw();
      }
      if (hit) showTip(hit, dom); else hideTip();
    }
    var down = null;
    canvasBox.addEventListener("mousedown", function (ev) { down = pointer(ev); });
    canvasBox.addEventListener("mousemove", function (ev) {
      if (!network) return;
      if (ev.buttons) { hideTip(); return; }
      var dom = pointer(ev);
      setHover(hitTest(dom), dom);
    });
    canvasBox.addEventListener("click", function (ev) {
      if (!network) return;
      var dom = pointer(ev);
      if (down && Math.hypot(dom.x - down.x, dom.y - down.y) > 4) return;  // the end of a drag, not a click
      var hit = hitTest(dom);
      setHover(hit, dom);
      if (!hit) return;
      select(hit);
      var v = { kind: hit.kind, id: hit.id };
      if (hit.kind === "edge") { v.citing = edgeById[hit.id].from; v.cited = edgeById[hit.id].to; }
      G.clicks.push(v);
      if (opts.onClick) opts.onClick(v);
    });
    canvasBox.addEventListener("dblclick", function (ev) {
      if (!network) return;
      var hit = hitTest(pointer(ev));
      if (hit && hit.kind === "node" && opts.onDblClick) opts.onDblClick({ kind: "node", id: hit.id });
    });
    canvasBox.addEventListener("mouseleave", function () { setHover(null, null); });
    fitBtn.addEventListener("click", fit);

    // what the browser tests read: the drawn geometry in canvas-box pixels
    function drawnGeometry() {
      var v = view(), pos = positions();
      return {
        scale: v.s, origin: { x: v.ox, y: v.oy },
        nodes: nodesDS.getIds().map(function (id) {
          var d = toDOM(v, pos[id]);
          return { id: id, x: d.x, y: d.y, r: ((nodeRec[id].size || 10) + (nodeRec[id].bw || 1) / 2) * v.s,
                   cx: pos[id].x, cy: pos[id].y, size: nodeRec[id].size, bw: nodeRec[id].bw };
        }),
        edges: edges.map(function (e) {
          return { id: e.id, from: e.from, to: e.to, bend: e.bend, width: Math.max(e.width * v.s, 0.8), kept: e.kept };
        })
      };
    }
    G.setData = setData;
    G.select = select;
    G.hitTest = hitTest;
    G.fit = fit;
    G.resize = resize;
    G.zoomTo = zoomTo;
    G.geometry = drawnGeometry;
    G.canvas = canvasBox;
    G.tip = tip;
    G.legend = legend;
    G.wrap = wrap;
    return G;
  }

  root.CraseGraph = { create: create, TOL: TOL };
})(window);
