// Bidirectional Streamlit component around vis-network (no build step, no CDN).
// Protocol (streamlit-component-lib): we post "streamlit:componentReady", receive
// "streamlit:render" messages with {args}, and post "streamlit:setComponentValue" /
// "streamlit:setFrameHeight". Paper text only ever reaches the DOM through textContent.
(function () {
  "use strict";
  var network = null;
  var dataKey = null;
  var nodesDS = null;
  var edgesDS = null;
  var clickCount = 0;

  function send(type, data) {
    var msg = Object.assign({ isStreamlitMessage: true, type: type }, data || {});
    window.parent.postMessage(msg, "*");
  }
  function setHeight(h) { send("streamlit:setFrameHeight", { height: h }); }
  function setValue(v) { send("streamlit:setComponentValue", { value: v, dataType: "json" }); }

  function textTitle(s) {
    // vis-network renders an Element title as-is: build it from plain text only.
    if (s === undefined || s === null) return undefined;
    var el = document.createElement("div");
    el.textContent = String(s);
    return el;
  }

  function prepare(items) {
    return (items || []).map(function (it) {
      var copy = Object.assign({}, it);
      if (copy.title !== undefined) copy.title = textTitle(copy.title);
      if (copy.label !== undefined) copy.label = String(copy.label);
      return copy;
    });
  }

  function applySelection(sel) {
    if (!network || !sel) { if (network) network.unselectAll(); return; }
    try {
      if (sel.kind === "edge" && edgesDS.get(sel.id)) network.setSelection({ nodes: [], edges: [sel.id] }, { unselectAll: true, highlightEdges: false });
      else if (sel.kind === "node" && nodesDS.get(sel.id)) network.setSelection({ nodes: [sel.id], edges: [] }, { unselectAll: true, highlightEdges: true });
      else network.unselectAll();
    } catch (e) { /* selection of an id not in the view: ignore */ }
  }

  function build(args) {
    var container = document.getElementById("graph");
    var height = args.height || 620;
    container.style.height = height + "px";
    nodesDS = new vis.DataSet(prepare(args.nodes));
    edgesDS = new vis.DataSet(prepare(args.edges));
    document.getElementById("empty").style.display = (args.nodes || []).length ? "none" : "flex";
    var options = {
      autoResize: true,
      physics: args.physics ? { enabled: true, stabilization: { iterations: 120, fit: true }, barnesHut: { gravitationalConstant: -4000, springLength: 140 } } : false,
      interaction: { hover: true, tooltipDelay: 150, hideEdgesOnDrag: (args.edges || []).length > 1500, hideEdgesOnZoom: (args.edges || []).length > 1500, navigationButtons: false, selectConnectedEdges: false, multiselect: false },
      nodes: { shape: "dot", borderWidth: 1, borderWidthSelected: 3, font: { size: 12, color: "#27313b", strokeWidth: 3, strokeColor: "#ffffff" } },
      edges: { arrows: { to: { enabled: true, scaleFactor: 0.5 } }, smooth: false, selectionWidth: 3, hoverWidth: 1.5, color: { inherit: false } },
      layout: { improvedLayout: false, randomSeed: 7 }
    };
    if (network) network.destroy();
    network = new vis.Network(container, { nodes: nodesDS, edges: edgesDS }, options);
    window.craseGraph = { network: network, nodes: nodesDS, edges: edgesDS, ready: false };
    network.once("afterDrawing", function () {
      network.fit({ animation: false });
      window.craseGraph.ready = true;
    });
    if (args.physics) {
      network.once("stabilizationIterationsDone", function () { network.setOptions({ physics: false }); });
    }
    network.on("click", function (params) {
      clickCount += 1;
      if (params.nodes && params.nodes.length) {
        setValue({ kind: "node", id: String(params.nodes[0]), nonce: clickCount });
      } else if (params.edges && params.edges.length) {
        var e = edgesDS.get(params.edges[0]);
        setValue({ kind: "edge", id: String(params.edges[0]), citing: String(e.from), cited: String(e.to), nonce: clickCount });
      }
    });
    setHeight(height + 4);
  }

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

  window.addEventListener("resize", function () { if (network) network.fit({ animation: false }); });
  send("streamlit:componentReady", { apiVersion: 1 });
  setHeight(640);
})();
