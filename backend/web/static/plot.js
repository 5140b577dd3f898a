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
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 1) return v.toFixed(2);
  return v.toPrecision(2);
}

// series: [{name, color, points: [{x, y}]}]; xLabel: what x counts
function plot(title, series, xLabel) {
  const W = 320, H = 190, L = 44, R = 10, T = 10, B = 32;
  const fig = document.createElement("figure");
  fig.className = "plot";
  const cap = document.createElement("figcaption");
  cap.textContent = title;
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
  const pad = (y1 - y0) * 0.08; y0 -= pad; y1 += pad;
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  svg.append(el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fff", stroke: "#d0d7de"}));
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    svg.append(el("line", {x1: L, x2: W - R, y1: sy(y), y2: sy(y), stroke: "#eaeef2"}));
    svg.append(el("text", {x: L - 4, y: sy(y) + 4, "text-anchor": "end", "font-size": 10, fill: "#57606a"}, fmt(y)));
  }
  for (let i = 0; i <= 4; i++) {
    const x = x0 + (x1 - x0) * i / 4;
    svg.append(el("text", {x: sx(x), y: H - B + 14, "text-anchor": "middle", "font-size": 10, fill: "#57606a"},
                  Number.isInteger(x) ? x : x.toFixed(1)));
  }
  svg.append(el("text", {x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle", "font-size": 10, fill: "#57606a"},
                xLabel));
  series.forEach((s, i) => {
    const pts = s.points.filter((p) => Number.isFinite(p.y));
    if (!pts.length) return;
    svg.append(el("polyline", {points: pts.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" "), fill: "none",
                               stroke: s.color, "stroke-width": 2}));
    for (const p of pts) svg.append(el("circle", {cx: sx(p.x), cy: sy(p.y), r: 2.5, fill: s.color}));
    if (series.length > 1) {
      svg.append(el("rect", {x: L + 6 + i * 100, y: T + 5, width: 10, height: 3, fill: s.color}));
      svg.append(el("text", {x: L + 20 + i * 100, y: T + 10, "font-size": 10, fill: "#24292f"}, s.name));
    }
  });
  fig.append(cap, svg);
  return fig;
}
