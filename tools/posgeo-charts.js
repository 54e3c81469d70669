/* posgeo book: draw every posgeo chart of the page with vega-embed.
 *
 * posgeo's MyST-NB plugin (posgeo/_mystnb.py) writes each chart as
 *   <div class="posgeo-chart"><script type="application/json">SPEC</script>...</div>
 * and tools/posgeo_book_assets.py serves vega, vega-lite and vega-embed from the book itself
 * (_static/posgeo-vega, loaded before this file). Nothing is fetched from anywhere else.
 *
 * Before drawing, a chart wider than its box is re-flowed: a grid of panels loses columns
 * (down to one on a phone) and panels wider than the box are narrowed (square heatmaps stay
 * square), so no chart makes the page scroll sideways.
 *
 * For tests and curious readers: each box gets data-posgeo-state="drawn" (or "error"), and
 * window.posgeoCharts lists {box, view} for the drawn charts (view: the Vega View).
 */
(function () {
  "use strict";
  var GAP = 20;          // px between panels of a grid (Vega-Lite's default spacing)
  var MARGIN = 60;       // px of a panel's axes, titles and padding beyond its plotting width
  var MIN_WIDTH = 110;
  var AXES = 110;        // px a narrowed panel keeps for its y axis (labels, cut to 100 px on a phone; title) and padding

  function widthOf(node) {
    if (!node || typeof node !== "object") return 0;
    var own = typeof node.width === "number" ? node.width : 0;
    ["layer", "vconcat"].forEach(function (key) {
      (node[key] || []).forEach(function (child) { own = Math.max(own, widthOf(child)); });
    });
    if (node.hconcat) {
      var sum = 0;
      node.hconcat.forEach(function (child) { sum += widthOf(child) + MARGIN + GAP; });
      own = Math.max(own, sum);
    }
    if (node.spec) own = Math.max(own, widthOf(node.spec));
    return own;
  }

  function narrow(node, avail) {
    if (!node || typeof node !== "object") return;
    if (typeof node.width === "number" && node.width > avail) {
      if (node.height === node.width) node.height = Math.max(MIN_WIDTH, avail);
      node.width = Math.max(MIN_WIDTH, avail);
    }
    ["layer", "vconcat", "concat"].forEach(function (key) {
      (node[key] || []).forEach(function (child) { narrow(child, avail); });
    });
    if (node.spec) narrow(node.spec, avail);
  }

  // Re-flow a (sub)spec to boxWidth: a row of panels too wide becomes a column, a grid loses
  // columns; then every panel still wider than the box is narrowed.
  function reflow(node, boxWidth) {
    if (!node || typeof node !== "object") return;
    if (node.hconcat && widthOf(node) > boxWidth) {
      node.vconcat = node.hconcat;
      delete node.hconcat;
    }
    if (node.concat) {
      var panel = 0;
      node.concat.forEach(function (child) { panel = Math.max(panel, widthOf(child)); });
      var columns = node.columns || node.concat.length;
      while (columns > 1 && columns * (panel + MARGIN + GAP) > boxWidth) columns -= 1;
      node.columns = columns;
    }
    if (node.facet && node.columns) {
      var w = widthOf(node.spec);
      while (node.columns > 1 && node.columns * (w + MARGIN + GAP) > boxWidth) node.columns -= 1;
    }
    ["vconcat", "concat", "layer"].forEach(function (key) {
      (node[key] || []).forEach(function (child) { reflow(child, boxWidth); });
    });
    if (node.spec) reflow(node.spec, boxWidth);
  }

  // A phone: legends stacked (not side by side), one entry per line, labels cut to the box;
  // axis labels cut to 100 px.
  function stackLegends(node, boxWidth) {
    if (!node || typeof node !== "object") return;
    Object.keys(node.encoding || {}).forEach(function (channel) {
      var legend = node.encoding[channel] && node.encoding[channel].legend;
      if (legend && typeof legend === "object") {
        legend.columns = 1;
        legend.direction = legend.type === "gradient" ? "horizontal" : "vertical";
      }
      var axis = node.encoding[channel] && node.encoding[channel].axis;
      if (axis && typeof axis === "object" && !(axis.labelLimit <= 100)) axis.labelLimit = 100;
    });
    ["layer", "vconcat", "hconcat", "concat"].forEach(function (key) {
      (node[key] || []).forEach(function (child) { stackLegends(child, boxWidth); });
    });
    if (node.spec) stackLegends(node.spec, boxWidth);
  }

  function fit(spec, boxWidth, extra) {
    var keep = AXES + (extra || 0);
    if (boxWidth < 520) {
      spec.config = spec.config || {};
      var legend = spec.config.legend = spec.config.legend || {};
      legend.columns = 1;
      legend.labelLimit = Math.max(120, boxWidth - 60);
      legend.layout = { bottom: { direction: "vertical", anchor: "start" } };
      var axis = spec.config.axis = spec.config.axis || {};
      axis.labelLimit = 100;  // long category names (a y axis of map names) are cut, with an ellipsis
      stackLegends(spec, boxWidth);
    }
    reflow(spec, boxWidth);
    if (widthOf(spec) > boxWidth - keep || boxWidth < 520 || extra) narrow(spec, boxWidth - keep);
    return spec;
  }

  function draw(box) {
    if (box.getAttribute("data-posgeo-state")) return;
    var source = box.querySelector('script[type="application/json"]');
    if (!source || typeof window.vegaEmbed !== "function") {
      box.setAttribute("data-posgeo-state", "error");
      box.insertAdjacentHTML("beforeend", '<p class="posgeo-chart-missing">This chart needs JavaScript (vega-embed) to be drawn.</p>');
      return;
    }
    var text = source.textContent;
    var target = document.createElement("div");
    target.className = "posgeo-chart-view";
    box.appendChild(target);
    var options = {
      actions: { export: true, source: false, compiled: false, editor: false },
      renderer: "svg",
      downloadFileName: "posgeo-chart",
    };
    var extra = (JSON.parse(text).usermeta || {}).embedOptions || {};
    Object.keys(extra).forEach(function (key) { options[key] = extra[key]; });
    embed(box, target, text, options, 0, 0);
  }

  // Draw; if the drawn chart is still wider than its box (long axis titles, legends), draw it
  // again with its panels narrowed by the overflow (three times at most).
  function embed(box, target, text, options, shrink, attempt) {
    var width = box.clientWidth || 700;
    window.vegaEmbed(target, fit(JSON.parse(text), width, shrink), options).then(function (result) {
      var drawn = target.querySelector("svg.marks, canvas.marks");
      var over = drawn ? drawn.getBoundingClientRect().width - width : 0;
      if (over > 2 && attempt < 3) {
        result.finalize();
        target.innerHTML = "";
        embed(box, target, text, options, shrink + over + 4, attempt + 1);
        return;
      }
      box.setAttribute("data-posgeo-state", "drawn");
      (window.posgeoCharts = window.posgeoCharts || []).push({ box: box, view: result.view });
    }).catch(function (error) {
      box.setAttribute("data-posgeo-state", "error");
      console.error("posgeo chart:", error);
    });
  }

  function drawAll() {
    Array.prototype.forEach.call(document.querySelectorAll("div.posgeo-chart"), draw);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
