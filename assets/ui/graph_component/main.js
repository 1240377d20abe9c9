// The explorer's Streamlit component around graph_core.js (no build step, no CDN).
// Protocol (streamlit-component-lib): we post "streamlit:componentReady", receive "streamlit:render"
// messages with {args}, and post "streamlit:setComponentValue" / "streamlit:setFrameHeight".
// args: the view model's records (crase_core.views.graph_views.RunView.as_dict: nodes, edges, axis, captions,
// legend, layout), hint, selected, key_data (rebuild only when it changes).
(function () {
  "use strict";
  var dataKey = null, nonce = 0, lastHeight = 0;

  function send(type, data) { window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type: type }, data || {}), "*"); }
  function setValue(v) { nonce += 1; v.nonce = nonce; send("streamlit:setComponentValue", { value: v, dataType: "json" }); }
  function canvasHeight() {
    var vh = 900;
    try { vh = window.parent.innerHeight || vh; } catch (e) { /* another origin: keep the default */ }
    return Math.max(420, Math.min(1040, Math.round(vh * 0.7)));
  }
  function reportHeight() {
    var h = document.getElementById("root").offsetHeight + 2;
    if (h !== lastHeight) { lastHeight = h; send("streamlit:setFrameHeight", { height: h }); }
  }

  var graph = CraseGraph.create(document.getElementById("root"), {
    height: canvasHeight,
    ids: true,
    onClick: function (v) { setValue(Object.assign({}, v)); },
    onDblClick: function (v) { setValue({ kind: "node", id: v.id, focus: true }); }
  });
  window.craseGraph = graph;

  window.addEventListener("message", function (event) {
    var data = event.data || {};
    if (data.type !== "streamlit:render") return;
    var args = data.args || {};
    if (args.key_data !== dataKey) {
      dataKey = args.key_data;
      graph.setData(Object.assign({}, args, { key: args.key_data }));
    }
    graph.select(args.selected || null);
    reportHeight();
  });
  window.addEventListener("resize", function () { graph.resize(); reportHeight(); });
  send("streamlit:componentReady", { apiVersion: 1 });
  reportHeight();
})();
