// Line plots as inline SVG (no library): plot(title, points[{x, y}], options) -> <figure>.
"use strict";
const SVGNS = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v) {
  const a = Math.abs(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2);
  if (a >= 0.01 || a === 0) return v.toFixed(2);
  return v.toExponential(0);
}

// series: [{name, color, points: [{x, y}]}]; xLabel: what x counts
function plot(title, series, xLabel) {
  const W = 320, H = 190, L = 50, R = 10, T = 8, B = 32;
  const fig = document.createElement("figure");
  fig.className = "plot";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  if (series.length > 1) {  // the legend, in words and colour, above the plot
    for (const s of series) {
      const key = document.createElement("span");
      key.className = "legend";
      key.style.setProperty("--c", s.color);
      key.textContent = s.name;
      cap.append(" ", key);
    }
  }
  const all = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.y));
  const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img",
                         "aria-label": `${title}: ${all.length} points`});
  if (!all.length) {
    svg.append(el("text", {x: W / 2, y: H / 2, "text-anchor": "middle", fill: "#57606a"}, "no data yet"));
    fig.append(cap, svg);
    return fig;
  }
  let x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x));
  let y0 = Math.min(...all.map((p) => p.y)), y1 = Math.max(...all.map((p) => p.y));
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
  const pad = (y1 - y0) * 0.08;
  y0 = y0 >= 0 ? Math.max(0, y0 - pad) : y0 - pad;  // a quantity never below 0 is not drawn below 0
  y1 += pad;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.append(el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de"}));
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    svg.append(el("line", {x1: L, x2: W - R, y1: sy(y), y2: sy(y), stroke: "#eaeef2"}));
    svg.append(el("text", {x: L - 4, y: sy(y) + 4, "text-anchor": "end", "font-size": 10, fill: "#57606a"}, fmt(y)));
  }
  // x ticks: whole numbers (steps, cycles), at most 8 of them
  const every = Math.max(1, Math.ceil((x1 - x0) / 8));
  for (let x = Math.ceil(x0); x <= x1; x += every) {
    svg.append(el("text", {x: sx(x), y: H - B + 14, "text-anchor": "middle", "font-size": 10, fill: "#57606a"}, x));
  }
  svg.append(el("text", {x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", "font-size": 10, fill: "#57606a"},
                xLabel));
  series.forEach((s) => {
    const pts = s.points.filter((p) => Number.isFinite(p.y));
    if (!pts.length) return;
    svg.append(el("polyline", {points: pts.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" "), fill: "none",
                               stroke: s.color, "stroke-width": 2}));
    for (const p of pts) svg.append(el("circle", {cx: sx(p.x), cy: sy(p.y), r: 2.5, fill: s.color}));
  });
  fig.append(cap, svg);
  return fig;
}
