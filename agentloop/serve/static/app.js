// agentloop serve: live updates (SSE) and decisions. Every server string is
// inserted as HTML the server escaped, or with textContent: never as raw HTML.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const partial = document.querySelector('meta[name="partial"]').content;

// -- a small JSON Schema check in the page (the server checks again, fully) ----------
function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(expected, value) {
  const found = typeOf(value);
  const types = Array.isArray(expected) ? expected : [expected];
  return types.some((t) => t === found || (t === "number" && found === "integer"));
}

function check(schema, value, where) {
  if (!schema || typeof schema !== "object") return null;
  const at = where ? "at " + where + ": " : "";
  if (schema.type !== undefined && !typeMatches(schema.type, value)) {
    return at + JSON.stringify(value) + " is not of type " + JSON.stringify(schema.type);
  }
  if (schema.enum && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    return at + JSON.stringify(value) + " is not one of " + JSON.stringify(schema.enum);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) return at + "too short";
    if (schema.maxLength !== undefined && value.length > schema.maxLength) return at + "too long";
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) return at + value + " is less than the minimum of " + schema.minimum;
    if (schema.maximum !== undefined && value > schema.maximum) return at + value + " is greater than the maximum of " + schema.maximum;
  }
  if (typeOf(value) === "object") {
    for (const name of schema.required || []) {
      if (!(name in value)) return at + "'" + name + "' is a required property";
    }
    const properties = schema.properties || {};
    for (const [name, element] of Object.entries(value)) {
      if (name in properties) {
        const problem = check(properties[name], element, where ? where + "/" + name : name);
        if (problem) return problem;
      } else if (schema.additionalProperties === false) {
        return at + "additional property '" + name + "' is not allowed";
      }
    }
  }
  if (typeOf(value) === "array" && schema.items && typeof schema.items === "object") {
    for (let i = 0; i < value.length; i++) {
      const problem = check(schema.items, value[i], where ? where + "/" + i : String(i));
      if (problem) return problem;
    }
  }
  return null;
}

// -- decisions ----------------------------------------------------------------------
function show(card, selector, text) {
  card.querySelector(".error").textContent = "";
  card.querySelector(".result").textContent = "";
  card.querySelector(selector).textContent = text;
}

async function decide(card, action) {
  const body = {
    session_id: card.dataset.session,
    call_ref: card.dataset.callRef,
    digest: card.dataset.digest,
    action: action,
  };
  if (action === "deny") body.reason = card.querySelector(".reason").value;
  if (action === "approve_with") {
    const text = card.querySelector(".edited").value;
    let value;
    try {
      value = JSON.parse(text);
    } catch (error) {
      show(card, ".error", "The edited arguments are not JSON: " + error.message);
      return;
    }
    const schema = card.dataset.schema ? JSON.parse(card.dataset.schema) : null;
    const problem = check(schema, value, "");
    if (problem) {
      show(card, ".error", "The edited arguments do not match the tool's schema: " + problem);
      return;
    }
    body.input = text;
  }
  await send(card, "/api/decide", body, "decided", "refused");
}

// POST one card's answer; mark the card with how it went. A live refresh keeps a
// pending card until its answer is shown; an answered card, or one no longer
// answerable (409), leaves the server's list (and its count) at the next refresh.
async function send(card, url, body, doneClass, refusedClass) {
  card.querySelectorAll("button").forEach((b) => (b.disabled = true));
  card.classList.add("pending");
  let reply;
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    reply = await response.json();
  } catch (error) {
    reply = { ok: false, error: "The server did not answer: " + error.message };
  }
  card.classList.remove("pending");
  const label = card.dataset.session + " · " + card.querySelector(".tool-name").textContent + ": ";
  if (reply.ok) {
    card.classList.add(doneClass);
    show(card, ".result", reply.message);
    notify(label + reply.message, "ok");
  } else {
    if (refusedClass) card.classList.add(refusedClass);
    show(card, ".error", reply.error);
    if (reply.status === 409) notify(label + reply.error, "error");
    else card.querySelectorAll("button").forEach((b) => (b.disabled = false));
  }
  if (reply.ok || reply.status === 409) queueRefresh();
}

// The last decision's outcome, above the list (a decided card leaves the list).
function notify(text, kind) {
  const notice = document.getElementById("notice");
  const line = document.createElement("p");
  line.className = kind;
  line.textContent = text;
  notice.replaceChildren(line);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button");
  const card = button && button.closest(".card");
  if (!card) return;
  if (button.classList.contains("approve")) decide(card, "approve");
  else if (button.classList.contains("deny")) decide(card, "deny");
  else if (button.classList.contains("approve-edited")) decide(card, "approve_with");
  else if (button.classList.contains("edit")) card.querySelector(".editor").hidden = false;
});

// -- questions of running calls -------------------------------------------------------
function answerContent(card) {
  const mode = card.dataset.mode;
  if (mode === "url" || mode === "confirm") return { value: null };
  if (mode === "sampling") return { value: { text: card.querySelector(".reply").value } };
  if (mode === "json") {
    try {
      return { value: JSON.parse(card.querySelector(".json-answer").value) };
    } catch (error) {
      return { error: "The answer is not JSON: " + error.message };
    }
  }
  const value = {};
  for (const field of card.querySelectorAll("[data-kind]")) {
    const kind = field.dataset.kind;
    if (kind === "boolean") value[field.name] = field.checked;
    else if (kind === "enum") { if (field.value !== "") value[field.name] = JSON.parse(field.value); }
    else if (field.value !== "") value[field.name] = kind === "string" ? field.value : Number(field.value);
  }
  return { value: value };
}

async function answer(card, action, extra) {
  const body = {
    session_id: card.dataset.session,
    question_ref: card.dataset.questionRef,
    action: action,
    ...(extra || {}),
  };
  if (action === "accept") {
    const found = answerContent(card);
    if (found.error) { show(card, ".error", found.error); return; }
    const schema = card.dataset.schema ? JSON.parse(card.dataset.schema) : null;
    const problem = check(schema, found.value, "");
    if (problem) { show(card, ".error", "The answer does not match the question's schema: " + problem); return; }
    if (found.value !== null) body.content = found.value;
  }
  await send(card, "/api/answer", body, "answered");
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button");
  const card = button && button.closest(".question-card");
  if (!card) return;
  const reason = card.querySelector(".reason");
  if (button.classList.contains("child-approve")) answer(card, "approve");
  else if (button.classList.contains("child-edit")) answer(card, "approve_with", { input: card.querySelector(".edited").value });
  else if (button.classList.contains("child-deny")) answer(card, "deny", reason && reason.value ? { reason: reason.value } : {});
  else if (button.classList.contains("accept")) answer(card, "accept");
  else if (button.classList.contains("decline")) answer(card, "decline");
});

// -- calls in doubt -------------------------------------------------------------------
async function resolve(card, resolution) {
  const body = {
    session_id: card.dataset.session,
    call_ref: card.dataset.callRef,
    reruns: Number(card.dataset.reruns),
    resolution: resolution,
  };
  if (resolution === "settle") {
    body.result = card.querySelector(".settle-result").value;
    if (!body.result.trim()) { show(card, ".error", "Enter the call's result to settle it."); return; }
  }
  if (resolution === "fail") {
    body.reason = card.querySelector(".fail-reason").value;
    if (!body.reason.trim()) { show(card, ".error", "Enter why the call failed."); return; }
  }
  await send(card, "/api/resolve", body, "resolved");
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button");
  const card = button && button.closest(".doubt-card");
  if (!card) return;
  if (button.classList.contains("settle")) resolve(card, "settle");
  else if (button.classList.contains("fail")) resolve(card, "fail");
  else if (button.classList.contains("run-again")) resolve(card, "run_again");
});

// -- live updates ---------------------------------------------------------------------
let refreshing = null;

function cardKey(card) {
  return [card.dataset.session, card.dataset.callRef, card.dataset.digest].join("\n");
}

// What the person was doing on each card: kept across a live refresh.
function saveState(content) {
  const saved = new Map();
  const focused = document.activeElement;
  for (const card of content.querySelectorAll(".card")) {
    const reason = card.querySelector(".reason");
    const edited = card.querySelector(".edited");
    saved.set(cardKey(card), {
      reason: reason.value,
      editorOpen: !card.querySelector(".editor").hidden,
      edited: edited.value,
      error: card.querySelector(".error").textContent,
      focus: focused === reason ? ".reason" : focused === edited ? ".edited" : null,
      selection: focused && focused.selectionStart !== undefined
        ? [focused.selectionStart, focused.selectionEnd] : null,
    });
  }
  return saved;
}

function restoreState(content, saved) {
  for (const card of content.querySelectorAll(".card")) {
    const state = saved.get(cardKey(card));
    if (!state) continue;
    card.querySelector(".reason").value = state.reason;
    card.querySelector(".editor").hidden = !state.editorOpen;
    card.querySelector(".edited").value = state.edited;
    card.querySelector(".error").textContent = state.error;
    if (state.focus) {
      const element = card.querySelector(state.focus);
      element.focus();
      if (state.selection) element.setSelectionRange(state.selection[0], state.selection[1]);
    }
  }
}

// What the person typed into each question's form: kept across a live refresh.
function saveAnswers(content) {
  const typed = new Map();
  for (const card of content.querySelectorAll(".question-card")) {
    const fields = Array.from(card.querySelectorAll("input, select, textarea"));
    typed.set(card.dataset.questionRef, fields.map((f) => [f.name, f.type === "checkbox" ? f.checked : f.value]));
  }
  return typed;
}

function restoreAnswers(content, typed) {
  for (const card of content.querySelectorAll(".question-card")) {
    for (const [name, value] of typed.get(card.dataset.questionRef) || []) {
      const field = card.querySelector('[name="' + CSS.escape(name) + '"]');
      if (!field) continue;
      if (field.type === "checkbox") field.checked = value; else field.value = value;
    }
  }
}

async function refresh() {
  if (!partial) return;
  const response = await fetch(partial, { credentials: "same-origin" });
  if (!response.ok) return;
  const html = await response.text(); // escaped by the server's templates
  const content = document.getElementById("content");
  // A card whose decision is on its way stays as it is while the server still lists it.
  const pending = Array.from(content.querySelectorAll(".card.pending"));
  const saved = saveState(content);
  const typed = saveAnswers(content);
  content.innerHTML = html;
  restoreState(content, saved);
  restoreAnswers(content, typed);
  const inbox = document.getElementById("inbox");
  for (const card of pending) {
    const same = inbox && Array.from(inbox.children).find((c) => cardKey(c) === cardKey(card));
    if (same) same.replaceWith(card);
  }
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

function queueRefresh() {
  refreshing = (refreshing || Promise.resolve()).then(refresh, refresh);
}

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource("/events");
  source.addEventListener("open", () => { live.textContent = "● live"; live.classList.add("on"); });
  source.addEventListener("changed", queueRefresh);
  source.addEventListener("error", () => { live.textContent = "○ reconnecting"; live.classList.remove("on"); });
}

connect();
