// The customer chat: starts a conversation, streams each turn (POST .../messages/stream, read as
// server-sent events from the response body), shows tool activity as it happens, and survives a
// reload (the conversation's id and token live in this tab's sessionStorage).
"use strict";
const KEY = "muarl.chat";
const $ = (id) => document.getElementById(id);
let conv = JSON.parse(sessionStorage.getItem(KEY) || "null");
let busy = false;

const PHRASES = {
  find_user_id_by_email: (a) => "finding your account" + (a.email ? ` (${a.email})` : ""),
  find_user_id_by_name_zip: () => "finding your account",
  get_user_details: () => "looking up your account details",
  get_order_details: (a) => `looking up order ${a.order_id || ""}`.trim(),
  get_product_details: (a) => `looking up product ${a.product_id || ""}`.trim(),
  list_all_product_types: () => "listing our product types",
  cancel_pending_order: (a) => `cancelling order ${a.order_id || ""}`.trim(),
  modify_pending_order_items: (a) => `changing the items of order ${a.order_id || ""}`.trim(),
  modify_pending_order_address: (a) => `changing the address of order ${a.order_id || ""}`.trim(),
  modify_pending_order_payment: (a) => `changing the payment of order ${a.order_id || ""}`.trim(),
  modify_user_address: () => "updating your address",
  return_delivered_order_items: (a) => `arranging a return for order ${a.order_id || ""}`.trim(),
  exchange_delivered_order_items: (a) => `arranging an exchange for order ${a.order_id || ""}`.trim(),
  transfer_to_human_agents: () => "handing you to a human agent",
  calculate: () => "calculating",
  think: () => "thinking",
};

function describe(name, args) {
  let a = args;
  if (typeof a === "string") { try { a = JSON.parse(a); } catch { a = {}; } }
  const f = PHRASES[name];
  return f ? f(a || {}) : `using ${name.replace(/_/g, " ")}`;
}

function add(kind, text, extraClass) {
  const li = document.createElement("li");
  li.className = kind === "activity" ? "activity" : `msg ${kind}` + (extraClass ? ` ${extraClass}` : "");
  if (kind !== "activity") {
    const who = document.createElement("span");
    who.className = "sr-only";
    who.textContent = kind === "user" ? "You said: " : kind === "notice" ? "Notice: " : "Agent said: ";
    li.append(who);
  }
  li.append(document.createTextNode(text));
  $("log").append(li);
  li.scrollIntoView({block: "nearest"});
  return li;
}

function setState(kind, text, extra) {
  const box = $("state");
  box.replaceChildren();
  if (!text) return;
  const div = document.createElement("div");
  div.className = `banner ${kind}`;
  div.textContent = text;
  if (extra) div.append(extra);
  box.append(div);
}

function handedOver() {
  setState("info", "You have been handed to a human agent. They will continue this conversation with you; " +
           "start a new conversation for anything else.");
  $("message").disabled = true;
  $("send").disabled = true;
}

function save() { sessionStorage.setItem(KEY, JSON.stringify(conv)); }

async function problem(resp) {
  try { return await resp.json(); } catch { return {detail: `${resp.status} ${resp.statusText}`}; }
}

function cycleProgress(cycle) {
  const wrap = document.createElement("div");
  const p = document.createElement("progress");
  p.max = 100;
  p.value = cycle.percent || 0;
  p.setAttribute("aria-label", "Training progress");
  const line = document.createElement("div");
  const eta = cycle.eta_seconds ? `, about ${Math.max(1, Math.round(cycle.eta_seconds / 60))} min left in this step` : "";
  line.textContent = `Training cycle ${cycle.cycle_id}: step ${cycle.step} (${cycle.step_index + 1} of ` +
    `${(cycle.steps || []).length}), ${Math.round(cycle.percent || 0)}% done${eta}.`;
  wrap.append(line, p);
  return wrap;
}

async function refused(resp) {
  const body = await problem(resp);
  if (resp.status === 503) {
    const more = document.createElement("div");
    if (body.cycle && ["queued", "running"].includes(body.cycle.status)) more.append(cycleProgress(body.cycle));
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "Details for the operator";
    details.append(summary, body.detail || "");
    more.append(details);
    setState("warn", "Our assistant is not ready yet; please try again a little later. Your message was not sent.",
             more);
  } else if (resp.status === 429) {
    const after = resp.headers.get("Retry-After");
    setState("warn", `You are sending messages too quickly. Please wait ${after ? after + " seconds" : "a moment"} ` +
             "and try again.");
  } else if (resp.status === 409 && /transferred|human/i.test(body.detail || "")) {
    handedOver();
  } else if (resp.status === 401 || resp.status === 403 || resp.status === 404) {
    sessionStorage.removeItem(KEY);
    conv = null;
    setState("bad", "This conversation can no longer be opened; your next message starts a new one.");
  } else {
    setState("bad", body.detail || `Something went wrong (${resp.status}).`);
  }
  return body;
}

async function start() {
  const r = await fetch("/v1/conversations", {method: "POST"});
  if (!r.ok) { await refused(r); return false; }
  conv = await r.json();
  save();
  return true;
}

// yields [eventName, data] from a text/event-stream response body
async function* sse(resp) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield [name, data ? JSON.parse(data) : null];
    }
  }
}

async function send(text) {
  if (!conv && !(await start())) return false;
  const r = await fetch(`/v1/conversations/${conv.id}/messages/stream`, {
    method: "POST", headers: {"Content-Type": "application/json", "Authorization": `Bearer ${conv.token}`},
    body: JSON.stringify({content: text})});
  if (!r.ok) { await refused(r); return false; }
  setState("", "");
  add("user", text);
  const running = new Map();
  for await (const [name, data] of sse(r)) {
    if (name === "tool_call") {
      for (const c of data.tool_calls) {
        const li = add("activity", describe(c.name, c.arguments));
        li.classList.add("running");
        running.set(c.id, li);
      }
    } else if (name === "tool_result") {
      const li = running.get(data.id);
      if (li) {
        li.classList.remove("running");
        if (data.outcome !== "ok") {
          const s = document.createElement("span");
          s.className = "outcome-error";
          s.textContent = ` (${data.outcome})`;
          li.append(s);
        }
      }
    } else if (name === "reply") {
      add(data.notice ? "notice" : "assistant", data.reply);
      if (data.ended_by === "transfer") handedOver();
    } else if (name === "error") {
      setState("bad", data.detail);
    } else if (name === "done" && data.status === "transferred") {
      handedOver();
    }
  }
  return true;
}

async function restore() {
  if (!conv) return;
  const r = await fetch(`/v1/conversations/${conv.id}`, {headers: {"Authorization": `Bearer ${conv.token}`}});
  if (!r.ok) { await refused(r); return; }
  const t = await r.json();
  const calls = new Map();
  for (const m of t.messages) {
    if (m.role === "user") add("user", m.content);
    else if (m.role === "assistant") {
      for (const c of m.tool_calls || []) {
        const fn = c.function || c;
        calls.set(c.id, add("activity", describe(fn.name, fn.arguments)));
      }
      if (m.content && !(m.tool_calls || []).length) add(m.notice ? "notice" : "assistant", m.content);
    }
  }
  if (t.status === "transferred") handedOver();
}

$("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = $("message").value.trim();
  if (!text || busy) return;
  busy = true;
  $("send").disabled = true;
  $("send").textContent = "Sending…";
  try {
    if (await send(text)) $("message").value = "";
  } catch (err) {
    setState("bad", "The connection was lost; please try again.");
  } finally {
    busy = false;
    $("send").textContent = "Send";
    if (!$("message").disabled) { $("send").disabled = false; $("message").focus(); }
  }
});
$("message").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
});
$("new-chat").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  conv = null;
  $("log").replaceChildren();
  setState("", "");
  $("message").disabled = false;
  $("send").disabled = false;
  $("message").focus();
});
restore();
