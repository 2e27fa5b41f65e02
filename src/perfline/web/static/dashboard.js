// perfline's dashboard: charts with uPlot from the JSON API, and the triage token kept
// in this browser. No inline script anywhere (the Content-Security-Policy forbids it);
// every stored string reaches the page through textContent, never as HTML.
"use strict";

const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"];

// The API sends each series' points as columns; one point as an object for the hover.
function pointAt(s, i) {
  if (i == null || i >= s.points.mean.length) return null;
  const point = {};
  for (const key of Object.keys(s.points)) point[key] = s.points[key][i];
  return point;
}

function hoverText(point) {
  if (!point) return "";
  const lines = [
    (point.commit ? point.commit.slice(0, 12) : point.name) + (point.subject ? "  " + point.subject : ""),
    "mean " + point.mean.toPrecision(5) + "  min " + point.min.toPrecision(5) + "  max " + point.max.toPrecision(5) +
      "  n " + point.n + "  run " + point.runs.join(", ") + (point.label ? "  label " + point.label : ""),
  ];
  return lines.join("\n");
}

// Vertical lines at the regressions' change points, with their change and culprit.
function marksPlugin(marks) {
  return {
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        for (const m of marks) {
          const x = u.valToPos(m.x, "x", true);
          ctx.strokeStyle = m.kind === "improvement" ? "#1e7b34" : "#b3261e";
          ctx.lineWidth = 2;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillStyle = ctx.strokeStyle;
          ctx.font = "12px system-ui";
          const label = "#" + m.id + " " + (m.change_pct >= 0 ? "+" : "") + m.change_pct.toFixed(1) + "%" +
            (m.culprit ? " " + m.culprit.slice(0, 10) : "");
          ctx.fillText(label, x + 4, u.bbox.top + 14);
        }
        ctx.restore();
      }],
    },
  };
}

// Wheel zooms the x axis around the pointer, shift+wheel pans it (uPlot itself zooms
// by dragging a range; double-click resets).
function wheelPlugin() {
  return {
    hooks: {
      ready: [(u) => {
        u.over.addEventListener("wheel", (e) => {
          e.preventDefault();
          const { min, max } = u.scales.x;
          const width = max - min;
          const all = u.data[0];
          const lo = all[0], hi = all[all.length - 1];
          let next;
          if (e.shiftKey) {
            const step = width * 0.1 * Math.sign(e.deltaY || e.deltaX);
            next = [min + step, max + step];
          } else {
            const at = u.posToVal(e.offsetX, "x");
            const factor = e.deltaY < 0 ? 0.8 : 1.25;
            next = [at - (at - min) * factor, at + (max - at) * factor];
          }
          next = [Math.max(lo, next[0]), Math.min(hi, next[1])];
          if (next[1] - next[0] >= 1) u.setScale("x", { min: next[0], max: next[1] });
        }, { passive: false });
      }],
    },
  };
}

function drawSeries(el, doc, small) {
  const series = doc.series;
  if (!series.length) { el.textContent = "no data"; return; }
  const longest = Math.max(...series.map((s) => s.points.mean.length));
  const xs = Array.from({ length: longest }, (_, i) => i);
  const data = [xs];
  const opts = {
    width: el.clientWidth || 800,
    height: small ? 50 : (el.classList.contains("big") ? 360 : 200),
    series: [{ label: "point" }],
    scales: { x: { time: false } },
    axes: small ? [{ show: false }, { show: false }] : [{}, {}],
    legend: { show: !small },
    cursor: { drag: { x: true, y: false } },
    plugins: [],
  };
  series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    const pad = (column) => (column.length === longest ? column : xs.map((i) => (i < column.length ? column[i] : null)));
    data.push(pad(s.points.mean));
    opts.series.push({ label: s.case + " @ " + s.hostname, stroke: color, width: 1.5, points: { show: !small } });
    if (!small) {
      data.push(pad(s.points.min));
      data.push(pad(s.points.max));
      opts.series.push({ label: "min", stroke: color, width: 0.5, dash: [2, 3] });
      opts.series.push({ label: "max", stroke: color, width: 0.5, dash: [2, 3] });
    }
  });
  if (!small) opts.plugins.push(marksPlugin(series[0].changes), wheelPlugin());
  const hover = el.nextElementSibling && el.nextElementSibling.classList.contains("hover") ? el.nextElementSibling : null;
  // The x range shown, on the element: what a link or a test can read back.
  opts.hooks = { setScale: [(u, key) => {
    if (key === "x") el.dataset.range = u.scales.x.min.toFixed(2) + ":" + u.scales.x.max.toFixed(2);
  }] };
  if (hover) {
    opts.hooks.setCursor = [(u) => {
      const i = u.cursor.idx;
      hover.textContent = hoverText(pointAt(series[0], i));
    }];
  }
  el.textContent = "";
  const plot = new uPlot(opts, data, el);
  el.dataset.drawn = "1";
  el.dataset.drawnAt = String(performance.now());  // for bench/web_bench.py
  if (!small) {
    plot.over.addEventListener("click", () => {
      const i = plot.cursor.idx;
      const point = pointAt(series[0], i);
      if (point) window.location.href = "/runs/" + encodeURIComponent(point.runs[0]);
    });
  }
  el.dispatchEvent(new CustomEvent("perfline:drawn"));
}

function drawNumbers(el, trackers) {
  const t = trackers.find((x) => x.name === el.dataset.tracker);
  if (!t || !t.daily_numbers.length) { el.textContent = "no tested commit yet"; return; }
  const n = t.daily_numbers;
  const data = [n.map((p) => p.position), n.map((p) => p.value), n.map((p) => p.ci[0]), n.map((p) => p.ci[1])];
  const opts = {
    width: el.clientWidth || 800, height: 200, scales: { x: { time: false } },
    series: [{ label: "commit #" }, { label: "number", stroke: "#1f77b4", width: 2 },
      { label: "low", stroke: "#9ecae1", dash: [3, 3] }, { label: "high", stroke: "#9ecae1", dash: [3, 3] }],
  };
  el.textContent = "";
  new uPlot(opts, data, el);
  el.dataset.drawn = "1";
}

async function fetchJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(url + ": " + response.status);
  return response.json();
}

function keepToken(form) {
  const field = form.querySelector("input[name=token]");
  if (!field) return;
  const kept = window.localStorage.getItem("perfline-token");
  if (kept && !field.value) field.value = kept;
  form.addEventListener("submit", () => { if (field.value) window.localStorage.setItem("perfline-token", field.value); });
}

document.addEventListener("DOMContentLoaded", async () => {
  document.querySelectorAll("form.triage").forEach(keepToken);
  for (const el of document.querySelectorAll("[data-series]")) {
    fetchJson(el.dataset.series).then((doc) => drawSeries(el, doc, el.classList.contains("spark")))
      .catch((e) => { el.textContent = String(e); });
  }
  const numbers = document.querySelectorAll("[data-numbers]");
  if (numbers.length) {
    const trackers = await fetchJson("/api/trackers");
    numbers.forEach((el) => drawNumbers(el, trackers));
  }
});
