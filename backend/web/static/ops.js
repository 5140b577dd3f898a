// The ops console: every view is drawn from the ops HTTP API (/v1/ops/...) with the ops token
// from this tab's sessionStorage in the Authorization header (never in a URL).
"use strict";
const TOKEN_KEY = "muarl.ops.token";
const $ = (id) => document.getElementById(id);
let current = "models";

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

function table(headers, rows, caption) {
  return h("div", {class: "table-wrap"}, h("table", {},
    caption ? h("caption", {class: "sr-only"}, caption) : null,
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", {scope: "col"}, t)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))));
}

const tag = (text, kind) => h("span", {class: `tag ${kind || "other"}`}, text);
const when = (iso) => iso ? new Date(iso).toLocaleString() : "";
const num = (v, d = 3) => v === null || v === undefined ? "–" : (typeof v === "number" ? +v.toFixed(d) : String(v));

function flash(kind, text) {
  $("flash").replaceChildren(text ? h("div", {class: `banner ${kind}`}, text) : "");
}

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

async function api(method, path, body) {
  const r = await fetch(path, {method, headers: {"Authorization": `Bearer ${sessionStorage.getItem(TOKEN_KEY)}`,
                                                 ...(body ? {"Content-Type": "application/json"} : {})},
                               body: body ? JSON.stringify(body) : undefined});
  if (r.status === 401 || r.status === 403) {
    sessionStorage.removeItem(TOKEN_KEY);
    showSignin("That token was not accepted; sign in again.");
    throw new ApiError(r.status, "not signed in");
  }
  const data = r.headers.get("content-type")?.includes("json") ? await r.json() : null;
  if (!r.ok) throw new ApiError(r.status, (data && data.detail) || `${r.status} ${r.statusText}`);
  return data;
}

// the confirmation step: resolves to {reason, skip} or null when cancelled
function confirmAction(title, text, {reason = true, skip = false, ok = "Confirm", note = false} = {}) {
  const d = $("confirm");
  $("confirm-reason-label").textContent = note ? "Note (optional, kept with the escalation)"
                                               : "Reason (recorded in the audit trail)";
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-reason").value = "";
  $("confirm-reason").required = reason && !note;
  $("confirm-reason-wrap").hidden = !reason;
  $("confirm-skip").checked = false;
  $("confirm-skip-wrap").hidden = !skip;
  $("confirm-ok").textContent = ok;
  return new Promise((resolve) => {
    const done = (value) => { d.close(); resolve(value); };
    $("confirm-form").onsubmit = (e) => {
      e.preventDefault();
      const r = $("confirm-reason").value.trim();
      if (reason && !note && !r) { $("confirm-reason").focus(); return; }
      done({reason: r, skip: $("confirm-skip").checked});
    };
    $("confirm-cancel").onclick = () => done(null);
    d.oncancel = () => resolve(null);
    d.showModal();
    (reason ? $("confirm-reason") : $("confirm-ok")).focus();
  });
}

// ---------------------------------------------------------------- models
function lineage(v) {
  const recipe = v.recipe ? (v.recipe.name || JSON.stringify(v.recipe).slice(0, 60)) : "–";
  return [v.parent_version_id || "–", v.base_version_id || "–", recipe, v.store_snapshot || "–"];
}

function aliasTags(v) {
  return [v.aliases.map((a) => tag(a, a === "champion" ? "champion" : a === "previous" ? "previous" : "other")),
          v.retired ? tag("retired") : null];
}

async function viewModels(view) {
  const versions = await api("GET", "/v1/ops/models");
  const champion = versions.find((v) => v.aliases.includes("champion"));
  const previous = versions.find((v) => v.aliases.includes("previous"));
  view.append(h("section", {class: "card", "aria-labelledby": "models-h"},
    h("h2", {id: "models-h"}, "Models"),
    h("p", {}, "Champion: ", champion ? h("strong", {id: "champion-id"}, champion.id) : h("em", {id: "champion-id"}, "none"),
      previous ? ["  ·  previous: ", h("strong", {}, previous.id)] : null, " ",
      h("button", {type: "button", id: "rollback", class: "danger", disabled: previous ? null : true,
                   onclick: () => rollback(previous)}, "Roll back…")),
    versions.length ? table(["version", "name", "aliases", "kind / engine", "parent", "base", "recipe", "snapshot",
                             "created", ""],
      versions.map((v) => [h("code", {}, v.id), v.name, aliasTags(v), `${v.kind} / ${v.engine}`, ...lineage(v),
                           when(v.created_at),
                           h("button", {type: "button", "aria-label": `Details of ${v.id}`,
                                        onclick: () => show("model", v.id)}, "Details")]), "Model versions")
      : h("p", {class: "muted"}, "No version is registered yet: a training cycle registers its candidate, or run "
                                 + "`muarl models register PATH`.")));
}

async function rollback(previous) {
  const c = await confirmAction("Roll back", `Make the previous champion ${previous.id} the champion again?`,
                                {ok: "Roll back"});
  if (!c) return;
  try {
    const r = await api("POST", "/v1/ops/rollback", {reason: c.reason});
    flash("ok", `Rolled back: the champion is now ${r.champion}.`);
  } catch (e) { if (e.status !== 401 && e.status !== 403) flash("bad", `Rollback refused: ${e.message}`); }
  render();
}

async function promote(v) {
  const c = await confirmAction("Promote", `Make ${v.id} (${v.name}) the champion? It answers customers from the `
                                + "next message on.", {skip: true, ok: "Promote"});
  if (!c) return;
  try {
    const r = await api("POST", `/v1/ops/models/${encodeURIComponent(v.id)}/promote`,
                        {reason: c.reason, skip_gates: c.skip});
    flash("ok", `Promoted: the champion is now ${r.champion} (was ${r.previous_champion || "none"}).`);
    current = "models";
  } catch (e) { if (e.status !== 401 && e.status !== 403) flash("bad", `Promotion refused: ${e.message}`); }
  render();
}

function wilson(p, n) {
  if (p === null || p === undefined || !n) return null;
  const z = 1.96, d = 1 + z * z / n, c = (p + z * z / (2 * n)) / d;
  const m = z * Math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d;
  return [Math.max(0, c - m), Math.min(1, c + m)];
}
const withCi = (v, ci) => v === null || v === undefined ? "–" : `${num(v)}` + (ci ? ` [${num(ci[0])}, ${num(ci[1])}]` : "");

function gateReport(g) {
  const rep = g.report || {};
  const parts = [h("h3", {}, "Gate report #", g.id, " ", tag(g.passed ? "passed" : "failed", g.passed ? "pass" : "fail"),
                   h("span", {class: "muted"}, ` against ${g.baseline_id || "no champion"} · ${when(g.created_at)}`))];
  if (rep.checks) {
    parts.push(table(["check", "value", "threshold", "result", "detail"],
      rep.checks.map((c) => [c.name, num(c.value), c.threshold === undefined ? "–" : String(c.threshold),
                             tag(c.passed ? "pass" : "fail", c.passed ? "pass" : "fail"), c.detail || ""]),
      "Checks: value against threshold"));
  }
  if (rep.pass_hat_k && rep.pass_hat_k.candidate) {
    const champ = rep.pass_hat_k.champion || {};
    parts.push(h("h4", {}, "pass^k (95% bootstrap CI)"), table(["k", "candidate", "champion"],
      Object.entries(rep.pass_hat_k.candidate).map(([k, x]) => [k, withCi(x?.value, x?.ci),
                                                               withCi(champ[k]?.value, champ[k]?.ci)])));
  }
  if (rep.categories) {
    parts.push(h("h4", {}, "Per category: candidate against champion (pass^1, 95% Wilson interval over n tasks)"),
      table(["category", "n", "candidate", "champion", "delta"],
        rep.categories.map((c) => [c.category, c.n, withCi(c.candidate, wilson(c.candidate, c.n)),
                                   withCi(c.champion, wilson(c.champion, c.n)), num(c.delta)])));
  }
  return h("div", {class: "gate"}, parts);
}

function eventsTable(events) {
  return table(["when", "event", "version", "from → to", "actor", "reason"],
    events.map((e) => [when(e.created_at), tag(e.kind), e.version_id || "–",
                       e.from_version_id || e.to_version_id ? `${e.from_version_id || "–"} → ${e.to_version_id || "–"}` : "",
                       e.actor, e.reason]), "Events");
}

async function viewModel(view, id) {
  const v = await api("GET", `/v1/ops/models/${encodeURIComponent(id)}`);
  const [parent, base, recipe, snapshot] = lineage(v);
  view.append(h("section", {class: "card", "aria-labelledby": "model-h"},
    h("h2", {id: "model-h"}, "Version ", h("code", {}, v.id), " ", aliasTags(v)),
    h("p", {}, h("button", {type: "button", onclick: () => show("models")}, "← All models"), " ",
      h("button", {type: "button", class: "primary", id: "promote", disabled: v.aliases.includes("champion") || null,
                   onclick: () => promote(v)}, "Promote…")),
    table(["name", "parent", "base", "recipe", "snapshot", "training run", "artifact"],
          [[v.name, parent, base, recipe, snapshot, v.training_run || "–", h("code", {}, v.artifact_uri)]], "Lineage")),
    h("section", {class: "card", "aria-labelledby": "gates-h"}, h("h2", {id: "gates-h"}, "Gate reports"),
      v.gate_reports.length ? v.gate_reports.map(gateReport) : h("p", {class: "muted"}, "No gate report yet.")),
    h("section", {class: "card", "aria-labelledby": "vev-h"}, h("h2", {id: "vev-h"}, "Events of this version"),
      eventsTable(v.events)));
}

async function viewEvents(view) {
  const events = await api("GET", "/v1/ops/events?limit=200");
  view.append(h("section", {class: "card", "aria-labelledby": "ev-h"}, h("h2", {id: "ev-h"}, "Audit trail"),
    events.length ? eventsTable(events) : h("p", {class: "muted"}, "No event yet.")));
}

// ---------------------------------------------------------------- cycles
function cycleLine(c) {
  const p = c.progress || {};
  return h("div", {},
    h("p", {}, h("strong", {}, c.cycle_id), ` (${c.status}, ${c.trigger || "?"}, recipe ${c.recipe}): step `,
      h("strong", {}, c.step), ` (${c.step_index + 1} of ${c.steps.length}), ${num(p.percent, 1)}% done`,
      p.eta_seconds ? `, about ${Math.max(1, Math.round(p.eta_seconds / 60))} min left in this step` : "",
      p.detail ? ` · ${p.detail}` : ""),
    h("progress", {max: 100, value: p.percent || 0, "aria-label": `Cycle ${c.cycle_id} progress`}));
}

function outcome(c) {
  if (c.status === "failed") return [tag("failed", "fail"), " ", c.error || ""];
  if (c.promoted) return tag("promoted", "pass");
  if (c.gate_passed === false) return tag("gate failed", "fail");
  if (c.gate_passed) return tag("gate passed", "pass");
  return tag(c.status);
}

async function viewCycles(view) {
  const data = await api("GET", "/v1/ops/cycles?limit=50");
  view.append(h("section", {class: "card", "aria-labelledby": "cy-h"}, h("h2", {id: "cy-h"}, "Current cycle"),
    data.active ? cycleLine(data.active) : h("p", {class: "muted"}, "No cycle is running."),
    h("button", {type: "button", class: "primary", id: "start-cycle", disabled: data.active ? true : null,
                 onclick: startCycle}, "Start a cycle now…")),
  h("section", {class: "card", "aria-labelledby": "past-h"}, h("h2", {id: "past-h"}, "Cycles"),
    data.cycles.length ? table(["cycle", "started", "finished", "step", "candidate", "champion then", "outcome"],
      data.cycles.map((c) => [h("code", {}, c.cycle_id), when(c.started_at || c.created_at), when(c.finished_at),
                              c.step, c.candidate || "–", c.champion || "–", outcome(c)]), "Cycles")
      : h("p", {class: "muted"}, "No cycle has run yet.")));
}

async function startCycle() {
  const c = await confirmAction("Start a cycle", "Start a training cycle now (snapshot, tasks, train, gate, "
                                + "promote when it passes)?", {reason: false, ok: "Start"});
  if (!c) return;
  try {
    const r = await api("POST", "/v1/ops/cycles", {});
    flash("ok", `Cycle ${r.cycle_id || ""} started.`);
  } catch (e) { if (e.status !== 401 && e.status !== 403) flash("bad", `Not started: ${e.message}`); }
  render();
}

// ---------------------------------------------------------------- curves
async function viewCurves(view) {
  const data = await api("GET", "/v1/ops/curves");
  const steps = data.steps;  // every GRPO step of every cycle, in order
  const pts = (key) => steps.map((s, i) => ({x: i + 1, y: s[key]}));
  const gate = data.cycles.filter((c) => c.gate_pass1 !== null).map((c, i) => ({x: i + 1, y: c.gate_pass1}));
  const champ = data.cycles.filter((c) => c.gate_pass1 !== null).map((c, i) => ({x: i + 1, y: c.champion_pass1}));
  view.append(h("section", {class: "card", "aria-labelledby": "cu-h"}, h("h2", {id: "cu-h"}, "Training curves"),
    h("p", {class: "muted"}, `${steps.length} GRPO steps over ${data.cycles.length} cycles (x: step, across cycles).`),
    h("div", {class: "plots"},
      plot("Mean reward", [{name: "reward", color: "#0b5cad", points: pts("reward_mean")}], "GRPO step"),
      plot("Groups all correct / all wrong", [
        {name: "all correct", color: "#1a7f37", points: pts("frac_all_correct")},
        {name: "all wrong", color: "#b42318", points: pts("frac_all_wrong")}], "GRPO step"),
      plot("KL to the reference", [{name: "KL", color: "#8250df", points: pts("kl")}], "GRPO step"),
      plot("Entropy", [{name: "entropy", color: "#9a6700", points: pts("entropy")}], "GRPO step"),
      plot("Turns per rollout", [{name: "turns", color: "#0a7d8c", points: pts("turns_mean")}], "GRPO step"),
      plot("Gate suite pass^1 per cycle", [{name: "candidate", color: "#0b5cad", points: gate},
                                           {name: "champion", color: "#57606a", points: champ}], "cycle"))));
}

// ---------------------------------------------------------------- escalations
async function viewEscalations(view) {
  const page = await api("GET", "/v1/ops/escalations");
  view.append(h("section", {class: "card", "aria-labelledby": "es-h"}, h("h2", {id: "es-h"}, "Escalated conversations"),
    page.items.length ? table(["#", "when", "customer", "state", "summary", ""],
      page.items.map((e) => [e.id, when(e.created_at), e.customer_user_id || "–",
                             tag(e.state, e.state === "open" ? "fail" : "other"), e.summary,
                             h("button", {type: "button", onclick: () => show("escalation", e.id)}, "Transcript")]),
      "Escalations") : h("p", {class: "muted"}, "No conversation has been handed to a human.")));
}

async function viewEscalation(view, id) {
  const e = await api("GET", `/v1/ops/escalations/${id}`);
  const lines = e.transcript.map((m) => `${m.role}${m.name ? ` (${m.name})` : ""}: ${m.content || ""}` +
    (m.tool_calls ? " " + JSON.stringify(m.tool_calls.map((c) => (c.function || c).name)) : ""));
  view.append(h("section", {class: "card", "aria-labelledby": "e1-h"},
    h("h2", {id: "e1-h"}, `Escalation #${e.id} `, tag(e.state)),
    h("p", {}, h("button", {type: "button", onclick: () => show("escalations")}, "← All escalations")),
    h("p", {}, "Conversation ", h("code", {}, e.conversation_id), ` · customer ${e.customer_user_id || "unknown"} · `,
      e.summary),
    h("p", {class: "row"},
      h("button", {type: "button", class: "primary", disabled: e.state !== "open" || null,
                   onclick: () => decide(e, "resolve")}, "Resolve…"),
      h("button", {type: "button", disabled: ["mined", "dismissed"].includes(e.state) || null,
                   onclick: () => decide(e, "dismiss")}, "Dismiss…"),
      h("span", {class: "muted"}, "A resolved escalation becomes a training task in the next cycle."),
      e.note ? h("span", {}, `Note: ${e.note}`) : null),
    h("pre", {class: "transcript", tabindex: 0, "aria-label": "Transcript"}, lines.join("\n")),
    e.staff_actions.length ? [h("h3", {}, "Staff actions since"),
      table(["when", "actor", "tool", "arguments"], e.staff_actions.map((a) => [when(a.created_at), a.actor, a.tool,
                                                                       h("code", {}, JSON.stringify(a.arguments))]))]
      : null));
}

async function decide(e, how) {
  const c = await confirmAction(how === "resolve" ? "Resolve" : "Dismiss",
    how === "resolve" ? `Mark escalation #${e.id} resolved? The next cycle mines it into a training task.`
                      : `Dismiss escalation #${e.id}? It never becomes a training task.`,
    {note: true, ok: how === "resolve" ? "Resolve" : "Dismiss"});
  if (!c) return;
  try {
    const r = await api("POST", `/v1/ops/escalations/${e.id}/${how}`, {note: c.reason});
    flash("ok", `Escalation #${r.id} is now ${r.state}.`);
  } catch (err) { if (err.status !== 401 && err.status !== 403) flash("bad", `Refused: ${err.message}`); }
  render();
}

// ---------------------------------------------------------------- frame
const VIEWS = {models: viewModels, model: viewModel, events: viewEvents, cycles: viewCycles, curves: viewCurves,
               escalations: viewEscalations, escalation: viewEscalation};
let arg = null;

function show(name, a) { current = name; arg = a ?? null; flash("", ""); render(); }

// Views load asynchronously: a click while the previous view is still loading starts a second
// render, and only the newest may fill the page (else a slow Models load replaces the Cycles view).
let renders = 0;

async function render() {
  const mine = ++renders;
  if (!sessionStorage.getItem(TOKEN_KEY)) return showSignin();
  $("signin").hidden = true;
  $("nav").hidden = false;
  for (const b of document.querySelectorAll("nav [data-view]")) {
    const on = b.dataset.view === ({model: "models", escalation: "escalations"}[current] || current);
    if (on) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
  }
  const view = h("div", {});
  try {
    await VIEWS[current](view, arg);
  } catch (e) {
    if (e.status === 401 || e.status === 403) return;
    view.append(h("div", {class: "banner bad"}, `Could not load this view: ${e.message}`));
  }
  if (mine !== renders) return;  // a newer render is on its way
  $("view").replaceChildren(view);
}

function showSignin(message) {
  $("nav").hidden = true;
  $("view").replaceChildren();
  $("signin").hidden = false;
  flash(message ? "bad" : "", message || "");
  $("ops-token").focus();
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("ops-token").value.trim());
  $("ops-token").value = "";
  flash("", "");
  current = "models";
  render();
});
$("sign-out").addEventListener("click", () => { sessionStorage.removeItem(TOKEN_KEY); showSignin(); });
for (const b of document.querySelectorAll("nav [data-view]")) b.addEventListener("click", () => show(b.dataset.view));
render();
