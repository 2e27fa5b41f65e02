// perfline's dashboard: charts with uPlot from the JSON API, and the triage token kept
// in this browser. No inline script anywhere (the Content-Security-Policy forbids it);
// every stored string reaches the page through textContent, never as HTML.
//
// A chart's x axis is the tested commits in branch order: ticks only at commits,
// labelled with their short sha. Every line and shade drawn has its entry in the
// chart's legend, an HTML list under it (uPlot's own legend is off). A chart takes the
// keyboard focus: arrows move between commits, Enter opens the run, + and - zoom.
"use strict";

// Okabe and Ito's colours: told apart with the common colour-vision deficiencies.
const COLORS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"];
const RED = "#b3261e";
const GREEN = "#1e7b34";
const TICK_SPACE = 70;  // px a tick's label needs: 7 characters of sha and a gap

function markColor(kind) { return kind === "improvement" ? GREEN : RED; }
function pct(value) { return (value >= 0 ? "+" : "") + value.toFixed(1) + "%"; }
function num(value) { return Number(value).toPrecision(4); }
function short(sha) { return sha ? sha.slice(0, 7) : ""; }
function day(seconds) { return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC"; }

// "author, committed 2026-11-26 21:50" from the store's commit facts
function committed(p) {
  return [p.author, p.date ? "committed " + p.date.slice(0, 16).replace("T", " ") : ""].filter(Boolean).join(", ");
}

function culpritText(culprits) {
  if (!culprits || !culprits.length) return "";
  const named = culprits.map((c) => short(c.commit) + (c.subject ? " " + c.subject : ""));
  return (culprits.length > 1 ? "; culprit one of " : "; culprit ") + named.join(", ");
}

// ---- the legend: an HTML list, each entry with a swatch of how its thing is drawn ----

function legendList(el) {
  let list = el.parentElement.querySelector("ul.legend");
  if (!list) {
    list = document.createElement("ul");
    list.className = "legend";
    const hover = el.nextElementSibling && el.nextElementSibling.classList.contains("hover") ? el.nextElementSibling : el;
    hover.after(list);
  }
  list.textContent = "";
  return list;
}

// kind: "line", "dash" (dotted), "band" (shaded), "rule" (a vertical line), "cursor" (a dashed one)
function legendEntry(list, kind, color, text) {
  const item = document.createElement("li");
  const swatch = document.createElement("span");
  swatch.className = "swatch " + kind;
  swatch.setAttribute("aria-hidden", "true");
  if (kind === "band") swatch.style.background = color;
  else swatch.style.borderColor = color;
  item.append(swatch, document.createTextNode(text));
  list.append(item);
}

// ---- axes ---------------------------------------------------------------------------

// x: points 0..n-1, one per tested commit; ticks at whole points only (integer steps),
// labelled by `names`. What was drawn is kept on the element (`data-x-ticks`).
function commitAxis(el, names) {
  return {
    label: "tested commit, in branch order",
    space: TICK_SPACE,
    incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
    values: (u, splits) => {
      const labels = splits.map((i) => (Number.isInteger(i) && names[i] != null ? names[i] : ""));
      el.dataset.xTicks = JSON.stringify(labels);
      return labels;
    },
  };
}

// x: first-parent positions; ticks at the tested commits' positions, as many as fit.
function positionAxis(el, positions, names) {
  return {
    label: "tested commit (first-parent position from the tracker's start)",
    splits: (u, axis, min, max) => {
      const shown = [];
      let last = -Infinity;
      for (const p of positions) {
        const at = u.valToPos(p, "x");
        if (p >= min && p <= max && at - last >= TICK_SPACE) { shown.push(p); last = at; }
      }
      return shown;
    },
    values: (u, splits) => {
      const labels = splits.map((p) => names.get(p) || "");
      el.dataset.xTicks = JSON.stringify(labels);
      return labels;
    },
  };
}

// y: as many decimals as the step between ticks needs, the same on every tick.
function valueAxis(label) {
  return { label: label, size: 64, values: (u, splits, axis, space, incr) => {
    const decimals = Math.max(0, Math.min(12, -Math.floor(Math.log10(incr) + 1e-9)));
    return splits.map((v) => v.toFixed(decimals));
  } };
}

// ---- the series chart ---------------------------------------------------------------

// The series of one chart on one x axis: every commit (or run) any series has, in the
// order first measured; each series' points placed at their commit.
function mergeSeries(series) {
  const keyOf = (s, i) => s.points.commit[i] || ("run " + s.points.runs[i][0]);
  const first = new Map();
  for (const s of series) {
    s.points.mean.forEach((_, i) => {
      const key = keyOf(s, i);
      if (!first.has(key) || s.points.time[i] < first.get(key).time) first.set(key, { time: s.points.time[i], s, i });
    });
  }
  const keys = [...first.keys()].sort((a, b) => first.get(a).time - first.get(b).time);
  const index = new Map(keys.map((k, x) => [k, x]));
  const names = keys.map((k) => {
    const { s, i } = first.get(k);
    const name = s.points.name[i];  // a bucket's: its first commit's sha, to 12 characters
    return s.points.commit[i] ? short(s.points.commit[i]) : (/^[0-9a-f]+$/.test(name) ? short(name) : name);
  });
  // at[k][x]: the point of series k at x, or null
  const at = series.map((s) => {
    const row = new Array(keys.length).fill(null);
    s.points.mean.forEach((_, i) => { row[index.get(keyOf(s, i))] = i; });
    return row;
  });
  return { names, at, length: keys.length };
}

function pointAt(s, i) {
  if (i == null) return null;
  const point = {};
  for (const key of Object.keys(s.points)) point[key] = s.points[key][i];
  return point;
}

function hoverText(doc, merged, x) {
  if (x == null) return "";
  const lines = [];
  doc.series.forEach((s, k) => {
    const i = merged.at[k][x];
    const p = pointAt(s, i);
    if (!p) return;
    if (!lines.length) {
      const what = s.bucket > 1 ? s.bucket + " points from " + p.name : (p.commit || p.name);
      lines.push(what + (p.subject && s.bucket === 1 ? "  " + p.subject : ""));
      if (p.author || p.date) lines.push(committed(p));
      lines.push("tested " + day(p.time) + "  run" + (p.runs.length > 1 ? "s " : " ") + p.runs.join(", ") +
        (p.label ? "  label " + p.label : ""));
    }
    const unit = doc.unit ? " " + doc.unit : "";
    lines.push((doc.series.length > 1 ? s.name + ": " : "") + num(p.mean) + unit + " ± " + num(p.sd) +
      " (sd of " + p.n + " sample" + (p.n === 1 ? "" : "s") + "; min " + num(p.min) + ", max " + num(p.max) + ")");
  });
  return lines.join("\n");
}

// Each [from, to, kind] stretch of x shaded under the data, red or green by its kind.
function shade(u, stretches) {
  const ctx = u.ctx;
  ctx.save();
  for (const [from, to, kind] of stretches) {
    const left = u.valToPos(from, "x", true);
    ctx.fillStyle = markColor(kind) + "22";
    ctx.fillRect(left, u.bbox.top, u.valToPos(to, "x", true) - left, u.bbox.height);
  }
  ctx.restore();
}

// The regressions of a series: the stretch between the points before and after the
// change shaded, a line at the first point after it, and its label.
function changesPlugin(changes) {
  return {
    hooks: {
      drawClear: [(u) => shade(u, changes.map((m) => [m.from, m.x, m.kind]))],
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        for (const m of changes) {
          const x = u.valToPos(m.x, "x", true);
          ctx.strokeStyle = ctx.fillStyle = markColor(m.kind);
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.font = (12 * devicePixelRatio) + "px system-ui";
          ctx.fillText("#" + m.id + " " + pct(m.change_pct), x + 4 * devicePixelRatio, u.bbox.top + 14 * devicePixelRatio);
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
          const at = u.posToVal(e.offsetX, "x");
          zoom(u, e.shiftKey ? null : at, e.shiftKey ? 0.1 * Math.sign(e.deltaY || e.deltaX) : 0,
            e.deltaY < 0 ? 0.8 : 1.25);
        }, { passive: false });
      }],
    },
  };
}

// Zoom by `factor` around `at`, or (at null) pan by `shift` widths; within the data.
function zoom(u, at, shift, factor) {
  const { min, max } = u.scales.x;
  const width = max - min;
  const all = u.data[0];
  const lo = all[0], hi = all[all.length - 1];
  let next = at == null ? [min + width * shift, max + width * shift]
    : [at - (at - min) * factor, at + (max - at) * factor];
  if (at == null) {  // a pan keeps its width at the ends
    if (next[0] < lo) next = [lo, lo + width];
    if (next[1] > hi) next = [hi - width, hi];
  }
  next = [Math.max(lo, next[0]), Math.min(hi, next[1])];
  if (next[1] - next[0] >= 1) u.setScale("x", { min: next[0], max: next[1] });
}

// Arrows move the cursor between points (the hover says what is there), Home and End
// go to the ends, + and - zoom around the cursor, 0 shows everything, Enter opens.
function keyboard(el, u, open) {
  el.addEventListener("keydown", (e) => {
    const xs = u.data[0];
    const last = xs.length - 1;
    const now = u.cursor.idx == null ? -1 : u.cursor.idx;
    let next = null;
    if (e.key === "ArrowRight") next = Math.min(last, now + 1);
    else if (e.key === "ArrowLeft") next = Math.max(0, now < 0 ? last : now - 1);
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = last;
    else if (e.key === "+" || e.key === "=") zoom(u, now < 0 ? (u.scales.x.min + u.scales.x.max) / 2 : xs[now], 0, 0.8);
    else if (e.key === "-") zoom(u, now < 0 ? (u.scales.x.min + u.scales.x.max) / 2 : xs[now], 0, 1.25);
    else if (e.key === "0") u.setScale("x", { min: xs[0], max: xs[last] });
    else if (e.key === "Enter" && now >= 0 && open) open(now);
    else return;
    e.preventDefault();
    if (next == null) return;
    const x = xs[next];
    if (x < u.scales.x.min || x > u.scales.x.max) {  // bring it into view
      const width = u.scales.x.max - u.scales.x.min;
      const min = Math.max(xs[0], Math.min(x - width / 2, xs[last] - width));
      u.setScale("x", { min, max: min + width });
    }
    u.setCursor({ left: u.valToPos(x, "x"), top: u.bbox.height / devicePixelRatio / 2 });
  });
}

function describe(el, text, opens) {
  el.setAttribute("aria-label", text + ". Focus it and use the left and right arrow keys to read each commit's " +
    "value; + and - zoom, 0 shows all" + (opens ? ", Enter opens the run" : ""));
}

function drawSeries(el, doc, small) {
  const series = doc.series;
  if (!series.length) { el.textContent = "no data"; return; }
  const merged = mergeSeries(series);
  const xs = Array.from({ length: merged.length }, (_, i) => i);
  const data = [xs];
  const unit = doc.unit ? " (" + doc.unit + ")" : "";
  const opts = {
    width: el.clientWidth || 800,
    height: small ? 50 : (el.classList.contains("big") ? 360 : 200),
    series: [{}],
    bands: [],
    scales: { x: { time: false } },
    axes: small ? [{ show: false }, { show: false }] : [commitAxis(el, merged.names), valueAxis(doc.metric + unit)],
    legend: { show: false },
    cursor: { y: false, drag: { x: true, y: false } },
    plugins: [],
  };
  const list = small ? null : legendList(el);
  series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    const column = (name) => merged.at[k].map((i) => (i == null ? null : s.points[name][i]));
    data.push(column("mean"));
    opts.series.push({ stroke: color, width: 2, spanGaps: true, points: { show: !small } });
    if (!small) {
      const mean = data.length - 1;
      data.push(column("max"), column("min"));
      opts.series.push({ stroke: "transparent", width: 0, points: { show: false }, spanGaps: true },
        { stroke: "transparent", width: 0, points: { show: false }, spanGaps: true });
      opts.bands.push({ series: [mean + 1, mean + 2], fill: color + "26" });
      legendEntry(list, "line", color, (series.length > 1 ? s.name + ": " : "") + "the mean of each commit's samples" +
        (s.downsampled ? " (" + s.bucket + " commits a point: the series has " + s.points_total + ")" : ""));
    }
  });
  if (!small) {
    legendEntry(list, "band", COLORS[0] + "40", "shaded" + (series.length > 1 ? ", in each series' colour" : "") +
      ": from the lowest to the highest sample of each commit");
    legendEntry(list, "cursor", "#607080", "dashed vertical line: the commit under the pointer (or chosen with the " +
      "arrow keys), described above");
  }
  const changes = small ? [] : series.flatMap((s, k) => s.changes.map((m) => ({
    ...m, x: merged.at[k].indexOf(m.x) >= 0 ? merged.at[k].indexOf(m.x) : m.x,
    from: merged.at[k].indexOf(m.from) >= 0 ? merged.at[k].indexOf(m.from) : m.from,
  })));
  for (const m of changes) {
    legendEntry(list, "band", markColor(m.kind) + "40", "#" + m.id + " " + m.kind + " " + pct(m.change_pct) + " (" +
      m.status + "): it happened in the shaded stretch, between " + merged.names[m.from] + " and " +
      merged.names[m.x] + " (the line: the first commit measured after it)" + culpritText(m.culprits));
  }
  if (!small) {
    opts.plugins.push(changesPlugin(changes), wheelPlugin());
    const common = el.parentElement.querySelector(".common");
    if (common && doc.common.length) {
      common.textContent = (series.length > 1 ? "every series: " : "the case: ") + doc.common.join(", ");
    }
  }
  const hover = el.parentElement.querySelector(".hover");
  // The x range shown, on the element: what a link or a test can read back.
  opts.hooks = { setScale: [(u, key) => {
    if (key === "x") el.dataset.range = u.scales.x.min.toFixed(2) + ":" + u.scales.x.max.toFixed(2);
  }] };
  if (hover) opts.hooks.setCursor = [(u) => { hover.textContent = hoverText(doc, merged, u.cursor.idx); }];
  el.textContent = "";
  const plot = new uPlot(opts, data, el);
  el.dataset.drawn = "1";
  el.dataset.drawnAt = String(performance.now());  // for bench/web_bench.py
  if (!small) {
    const open = (x) => {
      const k = merged.at.findIndex((row) => row[x] != null);
      if (k >= 0) window.location.href = "/runs/" + encodeURIComponent(series[k].points.runs[merged.at[k][x]][0]);
    };
    plot.over.addEventListener("click", () => { if (plot.cursor.idx != null) open(plot.cursor.idx); });
    keyboard(el, plot, open);
    describe(el, "chart of " + doc.metric + " over " + merged.length + " tested commits, " + series.length +
      " series", true);
  }
  el.dispatchEvent(new CustomEvent("perfline:drawn"));
}

// ---- the front page: a tracker's daily number -----------------------------------------

function marksPlugin(marks) {
  return {
    hooks: {
      drawClear: [(u) => shade(u, marks.map((m) => [m.from, m.to, m.kind]))],
      draw: [(u) => {
        const ctx = u.ctx;
        const dpr = devicePixelRatio;
        ctx.save();
        // 100: the first tested commit's level, dotted.
        const y = u.valToPos(100, "y", true);
        ctx.strokeStyle = "#555";
        ctx.lineWidth = dpr;
        ctx.setLineDash([2 * dpr, 3 * dpr]);
        ctx.beginPath();
        ctx.moveTo(u.bbox.left, y);
        ctx.lineTo(u.bbox.left + u.bbox.width, y);
        ctx.stroke();
        ctx.setLineDash([]);
        for (const m of marks) {
          ctx.strokeStyle = ctx.fillStyle = markColor(m.kind);
          ctx.font = (12 * dpr) + "px system-ui";
          const label = m.changes.map((c) => "#" + c.id + " " + pct(c.change_pct)).join(" ");
          let at = u.valToPos(m.to, "x", true);
          for (const c of m.culprits) {
            if (c.position == null) continue;
            at = u.valToPos(c.position, "x", true);
            ctx.lineWidth = 2 * dpr;
            ctx.beginPath();
            ctx.moveTo(at, u.bbox.top);
            ctx.lineTo(at, u.bbox.top + u.bbox.height);
            ctx.stroke();
          }
          ctx.fillText(label, at + 4 * dpr, u.bbox.top + 14 * dpr);
        }
        ctx.restore();
      }],
    },
  };
}

function drawNumbers(el, trackers) {
  const t = trackers.find((x) => x.name === el.dataset.tracker);
  if (!t || !t.daily_numbers.length) { el.textContent = "no tested commit yet"; return; }
  const n = t.daily_numbers;
  const names = new Map(n.map((p) => [p.position, short(p.commit)]));
  const positions = n.map((p) => p.position);
  const data = [positions, n.map((p) => p.value), n.map((p) => p.ci[1]), n.map((p) => p.ci[0])];
  const values = n.flatMap((p) => p.ci).concat([100]);
  const opts = {
    width: el.clientWidth || 800, height: 240, legend: { show: false }, cursor: { y: false },
    scales: { x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] },
      y: { range: () => [Math.min(...values) - 1, Math.max(...values) + 1] } },
    axes: [positionAxis(el, positions, names), valueAxis("number")],
    series: [{}, { stroke: COLORS[0], width: 2, points: { show: true, size: 7 } },
      { stroke: "transparent", width: 0, points: { show: false } },
      { stroke: "transparent", width: 0, points: { show: false } }],
    bands: [{ series: [2, 3], fill: COLORS[0] + "2e" }],
    plugins: [marksPlugin(t.marks)],
  };
  const list = legendList(el);
  legendEntry(list, "line", COLORS[0], "the daily number of each tested commit: the geometric mean of the primary " +
    "metrics against the first tested commit, x100, higher is better");
  legendEntry(list, "band", COLORS[0] + "40", "shaded: its 95% interval");
  legendEntry(list, "dash", "#555", "dotted line at 100: the first tested commit's level");
  legendEntry(list, "cursor", "#607080", "dashed vertical line: the commit under the pointer (or chosen with the " +
    "arrow keys), described above");
  for (const m of t.marks) {
    const what = m.changes.map((c) => "#" + c.id + " " + c.metric + " " + pct(c.change_pct)).join(", ");
    legendEntry(list, "band", markColor(m.kind) + "40", m.kind + " " + what + ": the change happened between tested " +
      "commits " + short(m.good) + " and " + short(m.bad));
    if (m.culprits.some((c) => c.position != null)) {
      legendEntry(list, "rule", markColor(m.kind), "line: " + culpritText(m.culprits).slice(2) +
        " (found by bisection)");
    }
  }
  const hover = el.parentElement.querySelector(".hover");
  opts.hooks = { setCursor: [(u) => {
    const p = n[u.cursor.idx];
    hover.textContent = p == null ? "" : p.commit + "  " + p.subject + (p.author || p.date ? "\n" + committed(p) : "") +
      "\nposition " + p.position + "  number " +
      p.value.toFixed(1) + " [" + p.ci[0].toFixed(1) + ", " + p.ci[1].toFixed(1) + "]  tested " +
      p.tested_at.slice(0, 16).replace("T", " ");
  }] };
  el.textContent = "";
  const plot = new uPlot(opts, data, el);
  keyboard(el, plot, null);
  describe(el, "chart of " + t.name + "'s daily number over " + n.length + " tested commits, with " + t.marks.length +
    " change(s) marked", false);
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
