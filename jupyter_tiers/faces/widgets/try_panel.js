// The Try it panel of ServeView (try_panel.py is its kernel side, where the requests run): one
// HTTP request (method, path, headers, JSON/text body) and its response, and, for an
// OpenAI-compatible server, its models and a chat that streams the answer as it arrives.
// Everything the server says is set with textContent, never as HTML.

import { h } from "./view_common.js";

export function jtTryPanel({ model, box }) {
  let nextId = 1;
  let pendingTry = null; // the id of the request in flight
  let chatId = null; // the id of the chat in flight
  let detected = false;
  const history = []; // the chat so far: [{role, content}]

  // --- mode ----------------------------------------------------------------------------------
  const modeBar = h("div", "jt-try-bar");
  const modeSelect = h("select", "jt-try-mode");
  for (const [value, label] of [["auto", "auto-detect"], ["http", "HTTP"], ["openai", "OpenAI-compatible"]]) {
    const o = h("option", "", label);
    o.value = value;
    modeSelect.appendChild(o);
  }
  modeSelect.title = "OpenAI-compatible when GET /v1/models answers (auto), or chosen";
  const detectNote = h("span", "jt-try-detect");
  const refreshBtn = h("button", "jt-try-models-refresh", "Check /v1/models");
  refreshBtn.title = "ask the server again whether it is OpenAI-compatible, and its models";
  // While a canary runs: which revision answers (both, the stable one's pods, the canary's).
  const trackBox = h("span", "jt-try-track-box");
  const trackSelect = h("select", "jt-try-track");
  for (const [value, label] of [["", "both tracks"], ["stable", "stable"], ["canary", "canary"]]) {
    const o = h("option", "", label);
    o.value = value;
    trackSelect.appendChild(o);
  }
  trackSelect.title = "send to the stable revision's pods, the canary's, or either (both)";
  trackBox.append(h("span", "jt-label", "send to"), trackSelect);
  modeBar.append(h("span", "jt-label", "mode"), modeSelect, trackBox, refreshBtn, detectNote);
  function track() { return trackBox.hidden ? "" : trackSelect.value; }

  // --- one request -------------------------------------------------------------------------------
  const reqBox = h("div", "jt-try-request");
  const line = h("div", "jt-try-line");
  const method = h("select", "jt-try-method");
  for (const m of ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]) {
    const o = h("option", "", m);
    o.value = m;
    method.appendChild(o);
  }
  const path = h("input", "jt-try-path");
  path.type = "text";
  path.value = "/";
  path.placeholder = "/path?query";
  path.spellcheck = false;
  const sendBtn = h("button", "jt-try-send", "Send");
  line.append(method, path, sendBtn);
  const headers = h("textarea", "jt-try-headers-in");
  headers.rows = 2;
  headers.placeholder = "Header: value (one a line)";
  headers.spellcheck = false;
  const bodyBar = h("div", "jt-try-bodybar");
  const bodyKind = h("select", "jt-try-body-kind");
  for (const [value, label] of [["none", "no body"], ["json", "JSON body"], ["text", "text body"]]) {
    const o = h("option", "", label);
    o.value = value;
    bodyKind.appendChild(o);
  }
  bodyBar.append(bodyKind);
  const body = h("textarea", "jt-try-body-in");
  body.rows = 4;
  body.placeholder = '{"prompt": "hello"}';
  body.spellcheck = false;
  body.hidden = true;
  const result = h("div", "jt-try-result");
  const status = h("span", "jt-try-status");
  const who = h("span", "jt-try-who");
  const times = h("span", "jt-try-times");
  const resultHead = h("div", "jt-try-result-head");
  resultHead.append(status, who, times);
  const error = h("div", "jt-try-error");
  const respHeaders = h("pre", "jt-try-headers");
  const respBody = h("pre", "jt-try-body");
  result.append(resultHead, error, respHeaders, respBody);
  result.hidden = true;
  reqBox.append(line, headers, bodyBar, body, result);

  // --- OpenAI-compatible: models and chat ----------------------------------------------------
  const chatBox = h("div", "jt-try-chat");
  const chatBar = h("div", "jt-try-bar");
  const modelSelect = h("select", "jt-try-model");
  const clearBtn = h("button", "jt-chat-clear", "Clear");
  chatBar.append(h("span", "jt-label", "model"), modelSelect, clearBtn);
  const chatLog = h("div", "jt-chat-log");
  const chatIn = h("textarea", "jt-chat-input");
  chatIn.rows = 2;
  chatIn.placeholder = "Message (Ctrl+Enter sends)";
  const chatControls = h("div", "jt-try-bar");
  const chatSend = h("button", "jt-chat-send", "Send");
  const chatStop = h("button", "jt-chat-stop", "Stop");
  chatStop.disabled = true;
  const chatStats = h("span", "jt-chat-stats");
  chatControls.append(chatSend, chatStop, chatStats);
  chatBox.append(chatBar, chatLog, chatIn, chatControls);

  box.append(modeBar, chatBox, reqBox);

  // --- rendering -----------------------------------------------------------------------------------
  function openai() {
    const mode = modeSelect.value;
    return mode === "openai" || (mode === "auto" && model.get("try_openai") === "yes");
  }

  function refresh() {
    trackBox.hidden = !model.get("canary");
    chatBox.hidden = !openai();
    detectNote.textContent = model.get("try_note") || "";
    const models = model.get("try_models") || [];
    const have = [...modelSelect.options].map((o) => o.value);
    const wanted = ["", ...models];
    if (have.length !== wanted.length || have.some((v, i) => v !== wanted[i])) {
      const keep = modelSelect.value;
      modelSelect.replaceChildren();
      for (const id of wanted) {
        const o = h("option", "", id || "(server default)");
        o.value = id;
        modelSelect.appendChild(o);
      }
      modelSelect.value = models.includes(keep) ? keep : (models[0] || "");
    }
    const terminal = model.get("terminal");
    sendBtn.disabled = terminal || pendingTry !== null;
    sendBtn.textContent = pendingTry !== null ? "Sending…" : "Send";
    chatSend.disabled = terminal || chatId !== null;
    chatStop.disabled = chatId === null;
  }

  function ms(v) {
    return v === null || v === undefined ? "–" : `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`;
  }

  function showResponse(msg) {
    result.hidden = false;
    result.dataset.state = msg.error ? "error" : "done";
    if (msg.error) {
      status.textContent = "no response";
      status.dataset.code = "";
      who.textContent = "";
      times.textContent = "";
      error.textContent = msg.error;
      respHeaders.textContent = "";
      respBody.textContent = "";
      return;
    }
    const r = msg.response;
    status.textContent = `${r.status} ${r.reason}`;
    status.dataset.code = String(Math.floor(r.status / 100));
    who.textContent = r.answered_by ? `answered by ${r.answered_by}` : "";
    times.textContent = `time to first byte ${ms(r.ttfb_ms)} · total ${ms(r.total_ms)} · ${r.bytes} bytes`;
    error.textContent = r.truncated ? `the body was longer: its first ${r.bytes} bytes were kept`
      : r.shown_cut ? "the body is cut here: svc.request() returns all of it" : "";
    respHeaders.textContent = r.headers.map(([k, v]) => `${k}: ${v}`).join("\n");
    respBody.textContent = r.body;
  }

  // Time to first token, tokens/s and tokens so far (a chat_piece or chat_end message).
  function figures(msg) {
    const parts = [];
    if (msg.ttft_ms !== null && msg.ttft_ms !== undefined) parts.push(`time to first token ${ms(msg.ttft_ms)}`);
    if (msg.tokens_per_s !== null && msg.tokens_per_s !== undefined) parts.push(`${msg.tokens_per_s} tokens/s`);
    const tokens = msg.tokens !== undefined ? msg.tokens : msg.pieces;
    if (tokens !== undefined) parts.push(`${tokens} tokens`);
    return parts;
  }

  function addTurn(role, text) {
    const turn = h("div", `jt-chat-turn jt-chat-${role}`);
    turn.append(h("span", "jt-chat-role", role === "user" ? "you" : "model"), h("span", "jt-chat-text", text));
    chatLog.appendChild(turn);
    chatLog.scrollTop = chatLog.scrollHeight;
    return turn;
  }

  // --- actions -----------------------------------------------------------------------------------
  function send() {
    pendingTry = nextId++;
    refresh();
    model.send({ kind: "try", id: pendingTry, method: method.value, path: path.value,
                 headers: headers.value, body_kind: bodyKind.value, body: body.value, track: track() });
  }

  // What the panel keeps: one answer's text up to MAX_ANSWER_CHARS (the kernel stops the chat
  // there too), and a conversation sent back of at most MAX_HISTORY_CHARS (oldest turns dropped).
  const MAX_ANSWER_CHARS = 1000000;
  const MAX_HISTORY_CHARS = 2000000;

  function trimHistory() {
    let total = history.reduce((n, m) => n + m.content.length, 0);
    while (history.length > 1 && total > MAX_HISTORY_CHARS) total -= history.shift().content.length;
  }

  function chat() {
    const text = chatIn.value;
    if (!text.trim() || chatId !== null) return;
    history.push({ role: "user", content: text });
    trimHistory();
    addTurn("user", text);
    const answer = addTurn("assistant", "");
    answer.dataset.state = "streaming";
    chatIn.value = "";
    chatId = nextId++;
    chatStats.textContent = "waiting for the first token…";
    refresh();
    model.send({ kind: "chat", id: chatId, model: modelSelect.value, messages: history.slice(), track: track() });
  }

  function lastAnswer() {
    const turns = chatLog.querySelectorAll(".jt-chat-assistant");
    return turns.length ? turns[turns.length - 1] : null;
  }

  sendBtn.addEventListener("click", send);
  path.addEventListener("keydown", (e) => { if (e.key === "Enter" && !sendBtn.disabled) send(); });
  bodyKind.addEventListener("change", () => {
    body.hidden = bodyKind.value === "none";
    if (bodyKind.value !== "none" && method.value === "GET") method.value = "POST";
  });
  chatSend.addEventListener("click", chat);
  chatIn.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) chat(); });
  chatStop.addEventListener("click", () => { if (chatId !== null) model.send({ kind: "chat_stop", id: chatId }); });
  clearBtn.addEventListener("click", () => {
    if (chatId !== null) return;
    history.length = 0;
    chatLog.replaceChildren();
    chatStats.textContent = "";
  });
  refreshBtn.addEventListener("click", () => { detected = true; model.send({ kind: "detect", track: track() }); });
  modeSelect.addEventListener("change", () => {
    if (modeSelect.value !== "http" && !detected) { detected = true; model.send({ kind: "detect", track: track() }); }
    refresh();
  });

  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg.kind !== "string") return;
    if (msg.kind === "try_result" && msg.id === pendingTry) {
      pendingTry = null;
      showResponse(msg);
      refresh();
    } else if (msg.kind === "chat_piece" && msg.id === chatId) {
      const turn = lastAnswer();
      if (turn) {
        const text = turn.querySelector(".jt-chat-text");
        if (typeof msg.reasoning === "string" && msg.reasoning) {
          // A reasoning model's thinking: shown apart from the answer, never sent back as history.
          let thinking = turn.querySelector(".jt-chat-reasoning");
          if (!thinking) {
            thinking = h("span", "jt-chat-reasoning", "");
            thinking.title = "the model's reasoning (not part of the answer)";
            text.before(thinking);
          }
          const room = MAX_ANSWER_CHARS - thinking.textContent.length;
          if (room > 0) thinking.textContent += msg.reasoning.slice(0, room); // text, never markup
        }
        const room = MAX_ANSWER_CHARS - text.textContent.length;
        if (room > 0) text.textContent += String(msg.text || "").slice(0, room); // text, never markup
        chatLog.scrollTop = chatLog.scrollHeight;
      }
      chatStats.textContent = figures(msg).join(" · ") + " · streaming…";
    } else if (msg.kind === "chat_end" && msg.id === chatId) {
      chatId = null;
      const turn = lastAnswer();
      if (turn) {
        turn.dataset.state = msg.error ? "error" : "done";
        const text = turn.querySelector(".jt-chat-text").textContent;
        if (!msg.error || text) history.push({ role: "assistant", content: text });
        trimHistory();
        if (msg.error) turn.appendChild(h("div", "jt-chat-error", msg.error));
      }
      const parts = figures(msg);
      if (msg.finish_reason) parts.push(`finish: ${msg.finish_reason}`);
      if (msg.answered_by) parts.push(`answered by ${msg.answered_by}`);
      chatStats.textContent = parts.join(" · ");
      refresh();
    }
  });
  for (const name of ["try_openai", "try_models", "try_note", "terminal", "canary"]) model.on(`change:${name}`, refresh);
  refresh();

  return {
    // The panel was opened: in auto mode, ask once whether the server is OpenAI-compatible.
    shown() {
      if (!detected && modeSelect.value !== "http") { detected = true; model.send({ kind: "detect", track: track() }); }
    },
  };
}
