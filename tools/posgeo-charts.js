/* posgeo book: draw every posgeo chart of the page with vega-embed.
 *
 * posgeo's MyST-NB plugin (posgeo/_mystnb.py) writes each chart as
 *   <div class="posgeo-chart"><script type="application/json">SPEC</script>...</div>
 * and tools/posgeo_book_assets.py serves vega, vega-lite and vega-embed from the book itself
 * (_static/posgeo-vega, next to this file). This script loads them when the first chart is to
 * be drawn, so the page does not wait for them. Nothing is fetched from anywhere else.
 *
 * Before drawing, a chart wider than its box is re-flowed: a grid of panels loses columns
 * (down to one on a phone) and panels wider than the box are narrowed (square heatmaps stay
 * square), so no chart makes the page scroll sideways.
 *
 * The charts on the first screen are drawn at once; the others one at a time while the
 * browser is idle, or as soon as the reader scrolls near them, whichever comes first: the page
 * answers the reader while the charts below are still being compiled.
 *
 * For tests and curious readers: each box gets data-posgeo-state="drawn" (or "error") and
 * data-posgeo-drawn-ms (performance.now() when it was drawn; the charts drawn at once also get
 * data-posgeo-first-screen), and window.posgeoCharts lists
 * {box, view} for the drawn charts (view: the Vega View).
 */
(function () {
  "use strict";
  var SCRIPT = document.currentScript;
  var LIBS = ((SCRIPT && SCRIPT.getAttribute("data-posgeo-libs")) || "vega.min.js vega-lite.min.js vega-embed.min.js").split(/\s+/);
  var loading = null;

  // vega, vega-lite and vega-embed, loaded once, in order (from this script's folder).
  function libraries() {
    if (typeof window.vegaEmbed === "function") return Promise.resolve();
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var left = LIBS.length;
        LIBS.forEach(function (name) {
          var tag = document.createElement("script");
          tag.src = new URL(name, SCRIPT ? SCRIPT.src : document.baseURI).href;
          tag.async = false;  // run in the order inserted
          tag.onload = function () { if (--left === 0) resolve(); };
          tag.onerror = function () { reject(new Error("could not load " + tag.src)); };
          document.head.appendChild(tag);
        });
      });
    }
    return loading;
  }

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

  // Call fn on a spec and each of its sub-specs (layers, concatenations, a facet's spec).
  function eachSpec(node, fn) {
    if (!node || typeof node !== "object") return;
    fn(node);
    ["layer", "vconcat", "hconcat", "concat"].forEach(function (key) {
      (node[key] || []).forEach(function (child) { eachSpec(child, fn); });
    });
    if (node.spec) eachSpec(node.spec, fn);
  }

  // Call fn(legend, axis) for every encoding channel of a spec and its sub-specs.
  function eachChannel(spec, fn) {
    eachSpec(spec, function (node) {
      Object.keys(node.encoding || {}).forEach(function (channel) {
        var enc = node.encoding[channel] || {};
        fn(enc.legend && typeof enc.legend === "object" ? enc.legend : null,
           enc.axis && typeof enc.axis === "object" ? enc.axis : null);
      });
    });
  }

  // A phone: legends stacked (not side by side), one entry per line, labels cut to the box;
  // axis labels cut to 100 px.
  function stackLegends(spec) {
    eachChannel(spec, function (legend, axis) {
      if (legend) {
        legend.columns = 1;
        legend.direction = legend.type === "gradient" ? "horizontal" : "vertical";
      }
      if (axis && !(axis.labelLimit <= 100)) axis.labelLimit = 100;
    });
  }

  function fit(spec, boxWidth, extra, attempt) {
    var keep = AXES + (extra || 0);
    if (boxWidth < 520) {
      spec.config = spec.config || {};
      var legend = spec.config.legend = spec.config.legend || {};
      legend.columns = 1;
      legend.labelLimit = Math.max(120, boxWidth - 60);
      legend.layout = { bottom: { direction: "vertical", anchor: "start" } };
      var axis = spec.config.axis = spec.config.axis || {};
      axis.labelLimit = 100;  // long category names (a y axis of map names) are cut, with an ellipsis
      stackLegends(spec);
    }
    reflow(spec, boxWidth);
    if (widthOf(spec) > boxWidth - keep || boxWidth < 520 || extra) narrow(spec, boxWidth - keep);
    if (extra) {  // a retry: narrower panels, and legends (often what overflows) in fewer columns
      narrow(spec, widestPanel(spec) - Math.ceil(extra / perRow(spec)));
      fewerLegendColumns(spec, attempt);
    }
    return spec;
  }

  function fewerLegendColumns(spec, by) {
    spec.config = spec.config || {};
    var legend = spec.config.legend = spec.config.legend || {};
    legend.columns = Math.max(1, (legend.columns || 3) - by);
    eachChannel(spec, function (own) {
      if (own && typeof own.columns === "number") own.columns = Math.max(1, own.columns - by);
    });
  }

  function widestPanel(spec) {
    var widest = 0;
    eachSpec(spec, function (node) { if (typeof node.width === "number") widest = Math.max(widest, node.width); });
    return widest;
  }

  function perRow(spec) {
    if (spec.hconcat) return spec.hconcat.length;
    if (spec.concat) return spec.columns || spec.concat.length;
    if (spec.facet) return spec.columns || 1;
    return 1;
  }

  // Draw one chart; `done` is called once it is drawn (or has failed).
  function draw(box, done) {
    done = done || function () {};
    if (box.getAttribute("data-posgeo-state") || box.posgeoStarted) return done();
    box.posgeoStarted = true;
    var source = box.querySelector('script[type="application/json"]');
    var missing = function (error) {
      if (error) console.error("posgeo chart:", error);
      box.setAttribute("data-posgeo-state", "error");
      box.insertAdjacentHTML("beforeend", '<p class="posgeo-chart-missing">This chart needs JavaScript (vega-embed) to be drawn.</p>');
      done();
    };
    if (!source) return missing();
    libraries().then(function () { drawFrom(box, source, done); }, missing);
  }

  function drawFrom(box, source, done) {
    var text = source.textContent;
    var target = document.createElement("div");  // attached once drawn (see embed)
    target.className = "posgeo-chart-view";
    var options = {
      actions: { export: true, source: false, compiled: false, editor: false },
      renderer: "svg",
      downloadFileName: "posgeo-chart",
    };
    var extra = (JSON.parse(text).usermeta || {}).embedOptions || {};
    Object.keys(extra).forEach(function (key) { options[key] = extra[key]; });
    embed(box, target, text, options, 0, 0, done);
  }

  // Draw; if the drawn chart is still wider than its box (long axis titles, legends), draw it
  // again with its panels narrowed by the overflow (three times at most, and only while that
  // makes it narrower). The chart is drawn into a detached element and attached in one step:
  // the theme's FontAwesome script inspects every insertion into the page, which cost it
  // seconds on a chart inserted mark by mark.
  function embed(box, target, text, options, shrink, attempt, done, previous) {
    var width = box.clientWidth || 700;
    window.vegaEmbed(target, fit(JSON.parse(text), width, shrink, attempt), options).then(function (result) {
      box.appendChild(target);
      var drawn = target.querySelector("svg.marks, canvas.marks");
      var drawnWidth = drawn ? drawn.getBoundingClientRect().width : 0;
      var over = drawnWidth - width;
      if (over > 2 && attempt < 3 && !(previous && drawnWidth >= previous - 1)) {
        result.finalize();
        box.removeChild(target);
        target.innerHTML = "";
        embed(box, target, text, options, shrink + over + 4, attempt + 1, done, drawnWidth);
        return;
      }
      box.setAttribute("data-posgeo-drawn-ms", String(Math.round(performance.now())));
      box.setAttribute("data-posgeo-state", "drawn");
      (window.posgeoCharts = window.posgeoCharts || []).push({ box: box, view: result.view });
      done();
    }).catch(function (error) {
      box.setAttribute("data-posgeo-state", "error");
      console.error("posgeo chart:", error);
      done();
    });
  }

  var idle = window.requestIdleCallback
    ? function (fn) { window.requestIdleCallback(fn, { timeout: 1000 }); }
    : function (fn) { window.setTimeout(fn, 50); };

  function onScreen(box) {
    var r = box.getBoundingClientRect();
    return r.bottom > 0 && r.top < (window.innerHeight || document.documentElement.clientHeight);
  }

  function drawAll() {
    var boxes = Array.prototype.slice.call(document.querySelectorAll("div.posgeo-chart"));
    var later = boxes.filter(function (box) { return !onScreen(box); });
    boxes.filter(onScreen).forEach(function (box) {
      box.setAttribute("data-posgeo-first-screen", "");
      draw(box);
    });
    if (!later.length) return;
    // The rest: one at a time in idle time, in page order; a chart the reader scrolls near first
    var rest = function () {
      var box = later.shift();
      if (box) draw(box, function () { idle(rest); });
    };
    if ("IntersectionObserver" in window) {
      var watch = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) {
          if (!entry.isIntersecting) return;
          watch.unobserve(entry.target);
          draw(entry.target);
        });
      }, { rootMargin: "300px 0px" });
      later.forEach(function (box) { watch.observe(box); });
    }
    idle(rest);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawAll);
  else drawAll();
})();
