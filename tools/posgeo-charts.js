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
  var MIN_WIDTH = 150;

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

  function fit(spec, boxWidth) {
    if (boxWidth < 520 && spec.config && spec.config.legend) spec.config.legend.columns = 1;  // a phone: one legend entry per line
    if (spec.hconcat && widthOf(spec) > boxWidth) {
      spec.concat = spec.hconcat;
      delete spec.hconcat;
      spec.columns = spec.concat.length;
    }
    if (spec.concat) {
      var panel = 0;
      spec.concat.forEach(function (child) { panel = Math.max(panel, widthOf(child)); });
      var columns = spec.columns || spec.concat.length;
      while (columns > 1 && columns * (panel + MARGIN + GAP) > boxWidth) columns -= 1;
      spec.columns = columns;
      if (columns === 1) spec.concat.forEach(function (child) { narrow(child, boxWidth - MARGIN); });
    } else if (spec.facet && spec.columns) {
      var w = widthOf(spec.spec);
      while (spec.columns > 1 && spec.columns * (w + MARGIN + GAP) > boxWidth) spec.columns -= 1;
      if (spec.columns === 1) narrow(spec.spec, boxWidth - MARGIN);
    } else {
      narrow(spec, boxWidth - MARGIN);
    }
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
    var spec = JSON.parse(source.textContent);
    var target = document.createElement("div");
    target.className = "posgeo-chart-view";
    box.appendChild(target);
    var options = {
      actions: { export: true, source: false, compiled: false, editor: false },
      renderer: "svg",
      downloadFileName: "posgeo-chart",
    };
    var extra = (spec.usermeta && spec.usermeta.embedOptions) || {};
    Object.keys(extra).forEach(function (key) { options[key] = extra[key]; });
    window.vegaEmbed(target, fit(spec, box.clientWidth || 700), options).then(function (result) {
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
