// Bidirectional Streamlit component around vis-network (no build step, no CDN).
// Protocol (streamlit-component-lib): we post "streamlit:componentReady", receive
// "streamlit:render" messages with {args}, and post "streamlit:setComponentValue" /
// "streamlit:setFrameHeight".
//
// Safety: paper text only ever reaches the DOM through textContent, or the canvas through
// fillText. vis-network gets no `title` and no `label` (so it draws no HTML popup of its own).
//
// One hit test for everything: hover highlight, the tooltip and the click all ask hitTest()
// (vis-network's getNodeAt, then getEdgeAt) at the same pointer position, so what the tooltip
// names is what a click opens. Labels are drawn by us after vis-network draws: in priority order
// (focus, hovered, selected, then rank), skipping any that would overlap a label already drawn,
// a node or the canvas edge; the boxes drawn are in window.craseGraph.labels.
(function () {
  "use strict";
  var network = null, nodesDS = null, edgesDS = null;
  var dataKey = null, clickCount = 0, lastArgs = {};
  var hovered = null;   // {kind, id}
  var selected = null;  // {kind, id}
  var axis = [], groups = [];
  var LABEL_FONT = 12, LABEL_H = 16, MAX_LABELS = 45;

  function send(type, data) {
    var msg = Object.assign({ isStreamlitMessage: true, type: type }, data || {});
    window.parent.postMessage(msg, "*");
  }
  function setHeight(h) { send("streamlit:setFrameHeight", { height: h }); }
  function setValue(v) { send("streamlit:setComponentValue", { value: v, dataType: "json" }); }

  function prepare(items) {
    return (items || []).map(function (it) {
      var copy = Object.assign({}, it);
      copy.lab = copy.label === undefined || copy.label === null ? "" : String(copy.label);
      copy.tip = copy.tip === undefined || copy.tip === null ? "" : String(copy.tip);
      delete copy.label;
      delete copy.title;
      return copy;
    });
  }

  function frameHeight(args) {
    if (args.height) return args.height;
    var vh = 900;
    try { vh = window.parent.innerHeight || vh; } catch (e) { /* another origin: keep the default */ }
    return Math.max(440, Math.min(1100, Math.round(vh * 0.74)));
  }

  // ---- hit test (shared by hover, tooltip and click) ----
  function hitTest(dom) {
    if (!network) return null;
    var n = network.getNodeAt(dom);
    if (n !== undefined && n !== null) return { kind: "node", id: String(n) };
    var e = network.getEdgeAt(dom);
    if (e !== undefined && e !== null) return { kind: "edge", id: String(e) };
    return null;
  }
  function same(a, b) { return (!a && !b) || (a && b && a.kind === b.kind && a.id === b.id); }

  // ---- tooltip ----
  var tip = document.getElementById("tip");
  function showTip(hit, dom) {
    var item = hit.kind === "node" ? nodesDS.get(hit.id) : edgesDS.get(hit.id);
    if (!item || !item.tip) { hideTip(); return; }
    tip.textContent = item.tip;
    tip.style.display = "block";
    var wrap = document.getElementById("wrap").getBoundingClientRect();
    var w = tip.offsetWidth, h = tip.offsetHeight;
    var x = dom.x + 16, y = dom.y + 16;
    if (x + w > wrap.width - 6) x = Math.max(6, dom.x - w - 16);
    if (y + h > wrap.height - 6) y = Math.max(6, dom.y - h - 12);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }
  function hideTip() { tip.style.display = "none"; tip.textContent = ""; }

  // ---- drawing helpers ----
  function scale() { return network.getScale(); }
  function boxesOverlap(a, b) { return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h; }

  function drawBackground(ctx) {
    var s = scale();
    var box = document.getElementById("graph").getBoundingClientRect();
    var topLeft = network.DOMtoCanvas({ x: 0, y: 0 });
    var bottomRight = network.DOMtoCanvas({ x: box.width, y: box.height });
    ctx.save();
    if (axis.length) {
      ctx.strokeStyle = "#e6eaef";
      ctx.lineWidth = 1 / s;
      ctx.fillStyle = "#8a96a3";
      ctx.font = (11 / s) + "px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      var lastX = -Infinity;
      axis.slice().sort(function (a, b) { return a.x - b.x; }).forEach(function (t) {
        ctx.beginPath();
        ctx.moveTo(t.x, topLeft.y);
        ctx.lineTo(t.x, bottomRight.y);
        ctx.stroke();
        var d = network.canvasToDOM({ x: t.x, y: 0 });
        if (d.x - lastX < 34) return;  // keep year ticks readable when zoomed out
        lastX = d.x;
        ctx.fillText(String(t.label), t.x, topLeft.y + 6 / s);
      });
    }
    if (groups.length) {
      ctx.fillStyle = "#7b8794";
      ctx.font = "600 " + (13 / s) + "px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "bottom";
      groups.forEach(function (g) { ctx.fillText(String(g.label), g.x, g.y); });
    }
    ctx.restore();
  }

  function nodeRadius(n) { return (n.size || 10); }

  function drawHighlights(ctx) {
    var s = scale();
    var pos = network.getPositions();
    function ringNode(id, colour, width) {
      var n = nodesDS.get(id), p = pos[id];
      if (!n || !p) return;
      ctx.beginPath();
      ctx.arc(p.x, p.y, nodeRadius(n) + 4 / s, 0, 2 * Math.PI);
      ctx.strokeStyle = colour;
      ctx.lineWidth = width / s;
      ctx.stroke();
    }
    function haloEdge(id, colour) {
      var e = edgesDS.get(id);
      if (!e || !pos[e.from] || !pos[e.to]) return;
      ctx.beginPath();
      ctx.moveTo(pos[e.from].x, pos[e.from].y);
      ctx.lineTo(pos[e.to].x, pos[e.to].y);
      ctx.strokeStyle = colour;
      ctx.lineWidth = (e.width || 1) + 7 / s;
      ctx.lineCap = "round";
      ctx.stroke();
    }
    ctx.save();
    if (hovered && !same(hovered, selected)) {
      if (hovered.kind === "edge") haloEdge(hovered.id, "rgba(42,157,143,0.35)");
      else ringNode(hovered.id, "rgba(42,157,143,0.9)", 2.5);
    }
    if (selected) {
      if (selected.kind === "edge") {
        haloEdge(selected.id, "rgba(231,111,81,0.45)");
        var e = edgesDS.get(selected.id);
        if (e) { ringNode(e.from, "#e76f51", 2.5); ringNode(e.to, "#e76f51", 2.5); }
      } else {
        ringNode(selected.id, "#e76f51", 3.5);
      }
    }
    ctx.restore();
  }

  function drawLabels(ctx) {
    var s = scale();
    var pos = network.getPositions();
    var box = document.getElementById("graph").getBoundingClientRect();
    var forced = [];
    if (hovered && hovered.kind === "node") forced.push(hovered.id);
    if (selected && selected.kind === "node") forced.push(selected.id);
    if (selected && selected.kind === "edge") {
      var se = edgesDS.get(selected.id);
      if (se) { forced.push(String(se.from)); forced.push(String(se.to)); }
    }
    if (hovered && hovered.kind === "edge") {
      var he = edgesDS.get(hovered.id);
      if (he) { forced.push(String(he.from)); forced.push(String(he.to)); }
    }
    forced = forced.filter(function (id, i) { return forced.indexOf(id) === i; });
    var all = nodesDS.get();
    var order = all.slice().sort(function (a, b) { return (a.pri || 0) - (b.pri || 0); });
    var forcedSet = {};
    forced.forEach(function (id) { forcedSet[id] = true; });
    var queue = forced.map(function (id) { return nodesDS.get(id); }).filter(Boolean)
      .concat(order.filter(function (n) { return !forcedSet[String(n.id)]; }));
    // obstacles: every node's disc (a label must not cover another paper)
    var discs = all.map(function (n) {
      var p = pos[n.id];
      if (!p) return null;
      var d = network.canvasToDOM(p), r = nodeRadius(n) * s;
      return { id: String(n.id), x: d.x - r, y: d.y - r, w: 2 * r, h: 2 * r };
    }).filter(Boolean);
    var placed = [];
    var topMargin = axis.length ? 24 : 2;  // the year axis row
    // cluster captions count as drawn labels too
    groups.forEach(function (g) {
      ctx.save();
      ctx.font = "600 13px system-ui, sans-serif";
      var w = ctx.measureText(String(g.label)).width;
      ctx.restore();
      var d = network.canvasToDOM({ x: g.x, y: g.y });
      placed.push({ id: "group:" + g.label, text: String(g.label), x: d.x - w / 2, y: d.y - 15, w: w, h: 15, group: true });
    });
    ctx.save();
    ctx.font = LABEL_FONT + "px system-ui, sans-serif";
    var count = 0;
    var drawn = [];
    queue.forEach(function (n) {
      var id = String(n.id);
      var text = n.lab;
      if (!text) return;
      var isForced = !!forcedSet[id];
      if (!isForced && count >= MAX_LABELS) return;
      var p = pos[n.id];
      if (!p) return;
      var d = network.canvasToDOM(p);
      var r = nodeRadius(n) * s;
      var w = ctx.measureText(text).width + 4;
      // candidate spots: below, above, right, left of the paper; the first free one wins
      var spots = [
        { x: d.x - w / 2, y: d.y + r + 2 }, { x: d.x - w / 2, y: d.y - r - 2 - LABEL_H },
        { x: d.x + r + 3, y: d.y - LABEL_H / 2 }, { x: d.x - r - 3 - w, y: d.y - LABEL_H / 2 }
      ];
      var b = null;
      for (var k = 0; k < spots.length && !b; k++) {
        var c0 = { id: id, text: text, x: spots[k].x, y: spots[k].y, w: w, h: LABEL_H };
        if (c0.x < 2 || c0.y < topMargin || c0.x + c0.w > box.width - 2 || c0.y + c0.h > box.height - 2) continue;
        var free = true;
        for (var i = 0; i < placed.length && free; i++) if (boxesOverlap(c0, placed[i])) free = false;
        if (!isForced) {
          for (var j = 0; j < discs.length && free; j++) if (discs[j].id !== id && boxesOverlap(c0, discs[j])) free = false;
        }
        if (free) b = c0;
      }
      if (!b) return;
      placed.push(b);
      drawn.push(b);
      if (!isForced) count += 1;
    });
    // draw in DOM pixel space: undo vis-network's view transform
    var c = network.DOMtoCanvas({ x: 0, y: 0 });
    drawn.forEach(function (b) {
      var sel = selected && selected.kind === "node" && selected.id === b.id;
      var x = c.x + (b.x + b.w / 2) / s, y = c.y + (b.y + 2) / s;
      ctx.font = (sel ? "600 " : "") + (LABEL_FONT / s) + "px system-ui, sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "top";
      ctx.lineWidth = 3 / s;
      ctx.strokeStyle = "rgba(255,255,255,0.92)";
      ctx.lineJoin = "round";
      ctx.strokeText(b.text, x, y);
      ctx.fillStyle = sel ? "#b3472f" : "#27313b";
      ctx.fillText(b.text, x, y);
    });
    ctx.restore();
    window.craseGraph.labels = placed;
  }

  // ---- legend (constant text from Python, built with textContent) ----
  function buildLegend(items) {
    var el = document.getElementById("legend");
    el.textContent = "";
    var head = document.createElement("div");
    head.className = "lg-head";
    head.textContent = "Legend";
    el.appendChild(head);
    (items || []).forEach(function (it) {
      var row = document.createElement("div");
      row.className = "lg-row";
      var sw = document.createElement("span");
      sw.className = "sw sw-" + String(it.kind).replace(/[^a-z-]/g, "");
      if (it.colour && /^#[0-9a-fA-F]{3,8}$/.test(it.colour)) {
        if (it.kind === "dot") sw.style.background = it.colour;
        else if (it.kind === "ring" || it.kind === "mine") sw.style.borderColor = it.colour;
        else sw.style.borderTopColor = it.colour;
      }
      var tx = document.createElement("span");
      tx.textContent = String(it.text);
      row.appendChild(sw);
      row.appendChild(tx);
      el.appendChild(row);
    });
    el.style.display = (items || []).length ? "flex" : "none";
  }

  function build(args) {
    lastArgs = args;
    var container = document.getElementById("graph");
    var height = frameHeight(args);
    container.style.height = height + "px";
    nodesDS = new vis.DataSet(prepare(args.nodes));
    edgesDS = new vis.DataSet(prepare(args.edges));
    axis = args.axis || [];
    groups = args.groups || [];
    hovered = null;
    hideTip();
    buildLegend(args.legend);
    document.getElementById("hint").textContent = String(args.hint || "");
    document.getElementById("empty").style.display = (args.nodes || []).length ? "none" : "flex";
    var many = (args.edges || []).length > 1500;
    var options = {
      autoResize: true,
      physics: false,
      interaction: { hover: false, tooltipDelay: 3600000, hideEdgesOnDrag: many, hideEdgesOnZoom: many,
                     navigationButtons: false, selectConnectedEdges: false, multiselect: false, zoomSpeed: 0.6 },
      nodes: { shape: "dot", borderWidth: 1, borderWidthSelected: 2, font: { size: 0 },
               color: { border: "#ffffff" } },
      edges: { arrows: { to: { enabled: true, scaleFactor: 0.45 } }, smooth: false, selectionWidth: 2,
               hoverWidth: 0, color: { inherit: false, opacity: 0.85 } },
      layout: { improvedLayout: false, randomSeed: 7 }
    };
    if (network) network.destroy();
    network = new vis.Network(container, { nodes: nodesDS, edges: edgesDS }, options);
    window.craseGraph = { network: network, nodes: nodesDS, edges: edgesDS, ready: false, labels: [],
                          hitTest: hitTest, clicks: [], hovered: null, key: String(dataKey) };
    network.on("beforeDrawing", drawBackground);
    network.on("afterDrawing", function (ctx) { drawHighlights(ctx); drawLabels(ctx); });
    network.once("afterDrawing", function () {
      fitView();
      setTimeout(function () { window.craseGraph.ready = true; }, 0);
    });
    network.on("click", function (params) {
      var hit = hitTest(params.pointer.DOM);
      if (!hit) return;
      clickCount += 1;
      selected = hit;
      applySelection(hit);
      var v = { kind: hit.kind, id: hit.id, nonce: clickCount };
      if (hit.kind === "edge") {
        var e = edgesDS.get(hit.id);
        v.citing = String(e.from);
        v.cited = String(e.to);
      }
      window.craseGraph.clicks.push(v);
      setValue(v);
    });
    network.on("dragStart", function () { hideTip(); });
    setHeight(height + document.getElementById("legend").offsetHeight + 6);
  }

  function fitView() {
    // fit, then a little room at the edges so that border papers keep their labels
    network.fit({ animation: false });
    var axisRoom = axis.length ? 0.9 : 0.94;
    network.moveTo({ scale: network.getScale() * axisRoom, animation: false });
  }

  function applySelection(sel) {
    selected = sel && sel.id ? { kind: sel.kind, id: String(sel.id) } : null;
    if (!network) return;
    try {
      if (selected && selected.kind === "edge" && edgesDS.get(selected.id)) network.setSelection({ nodes: [], edges: [selected.id] }, { unselectAll: true, highlightEdges: false });
      else if (selected && selected.kind === "node" && nodesDS.get(selected.id)) network.setSelection({ nodes: [selected.id], edges: [] }, { unselectAll: true, highlightEdges: true });
      else network.unselectAll();
    } catch (e) { /* an id not in this view: nothing to select */ }
    network.redraw();
  }

  // pointer: hover highlight + tooltip from the same hit test the click uses
  var graphEl = document.getElementById("graph");
  graphEl.addEventListener("mousemove", function (ev) {
    if (!network) return;
    if (ev.buttons) { hideTip(); return; }
    var r = graphEl.getBoundingClientRect();
    var dom = { x: ev.clientX - r.left, y: ev.clientY - r.top };
    var hit = hitTest(dom);
    if (!same(hit, hovered)) {
      hovered = hit;
      window.craseGraph.hovered = hit;
      graphEl.style.cursor = hit ? "pointer" : "default";
      network.redraw();
    }
    if (hit) showTip(hit, dom); else hideTip();
  });
  graphEl.addEventListener("dblclick", function (ev) {
    if (!network) return;
    var r = graphEl.getBoundingClientRect();
    var hit = hitTest({ x: ev.clientX - r.left, y: ev.clientY - r.top });
    if (!hit || hit.kind !== "node") return;
    clickCount += 1;
    var v = { kind: "node", id: hit.id, focus: true, nonce: clickCount };
    window.craseGraph.clicks.push(v);
    setValue(v);
  });
  graphEl.addEventListener("mouseleave", function () {
    hideTip();
    if (hovered) {
      hovered = null;
      if (window.craseGraph) window.craseGraph.hovered = null;
      if (network) network.redraw();
    }
  });
  document.getElementById("fit").addEventListener("click", function () { if (network) fitView(); });

  window.addEventListener("message", function (event) {
    var data = event.data || {};
    if (data.type !== "streamlit:render") return;
    var args = data.args || {};
    if (args.key_data !== dataKey || !network) {
      dataKey = args.key_data;
      build(args);
    }
    applySelection(args.selected || null);
  });

  window.addEventListener("resize", function () {
    if (!network) return;
    var h = frameHeight(lastArgs), container = document.getElementById("graph");
    if (container.style.height !== h + "px") {
      container.style.height = h + "px";
      setHeight(h + document.getElementById("legend").offsetHeight + 6);
    }
    network.redraw();
    fitView();
  });
  send("streamlit:componentReady", { apiVersion: 1 });
  setHeight(640);
})();
