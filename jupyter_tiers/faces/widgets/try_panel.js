// The Try it panel of ServeView (try_panel.py is its kernel side, where the requests run): one
// HTTP request (method, path, headers, JSON/text body) and its response, headers and body shown
// apart, and, for an OpenAI-compatible server, its models and a chat as chats look: your turns on
// the right, the model's on the left with its Markdown rendered (chat_markdown.js: DOM nodes with
// textContent, never innerHTML), a transcript that scrolls, a system prompt, temperature and
// max_tokens, Copy and Regenerate; a reasoning model's thinking shown apart, above its answer; an
// error (an HTTP error, or one sent inside the stream after HTTP 200) ends the turn as an error.
// "tokens" only when the server's usage counts them; otherwise the panel counts pieces (streamed
// chunks). Everything the server says is set as text.

import { h } from "./view_common.js";
import { jtRenderMarkdown } from "./chat_markdown.js";

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
  const reqHeading = h("div", "jt-try-heading", "HTTP request");
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
  const respHeadersLabel = h("div", "jt-try-sublabel", "response headers");
  const respBodyLabel = h("div", "jt-try-sublabel", "response body");
  result.append(h("div", "jt-try-heading jt-try-response-heading", "Response"), resultHead, error,
                respHeadersLabel, respHeaders, respBodyLabel, respBody);
  result.hidden = true;
  reqBox.append(reqHeading, line, h("div", "jt-try-sublabel", "request headers"), headers, bodyBar, body,
                result);

  // --- OpenAI-compatible: models and chat ----------------------------------------------------
  const chatBox = h("div", "jt-try-chat");
  const chatHeading = h("div", "jt-try-heading", "Chat");
  const chatBar = h("div", "jt-try-bar");
  const modelSelect = h("select", "jt-try-model");
  const clearBtn = h("button", "jt-chat-clear", "Clear");
  clearBtn.title = "start a new conversation";
  chatBar.append(h("span", "jt-label", "model"), modelSelect, clearBtn);
  // The parameters: blank is the server's default (nothing sent).
  const paramBar = h("div", "jt-try-bar jt-chat-params");
  const temperature = h("input", "jt-chat-temperature");
  temperature.type = "number";
  temperature.min = "0";
  temperature.max = "2";
  temperature.step = "0.1";
  temperature.placeholder = "default";
  const maxTokens = h("input", "jt-chat-max-tokens");
  maxTokens.type = "number";
  maxTokens.min = "1";
  maxTokens.max = "100000";
  maxTokens.step = "1";
  maxTokens.placeholder = "default";
  const paramLabel = (text, input) => {
    const wrap = h("label", "jt-chat-param");
    wrap.append(h("span", "jt-label", text), input);
    return wrap;
  };
  paramBar.append(paramLabel("temperature", temperature), paramLabel("max_tokens", maxTokens));
  const system = h("textarea", "jt-chat-system");
  system.rows = 1;
  system.placeholder = "System prompt (optional): sent first, as the system message";
  system.spellcheck = false;
  const chatLog = h("div", "jt-chat-log");
  chatLog.setAttribute("role", "log");
  const chatIn = h("textarea", "jt-chat-input");
  chatIn.rows = 2;
  chatIn.placeholder = "Message (Ctrl+Enter sends)";
  const chatControls = h("div", "jt-try-bar");
  const chatSend = h("button", "jt-chat-send", "Send");
  const chatStop = h("button", "jt-chat-stop", "Stop");
  chatStop.disabled = true;
  const chatStats = h("span", "jt-chat-stats");
  chatControls.append(chatSend, chatStop, chatStats);
  chatBox.append(chatHeading, chatBar, paramBar, h("div", "jt-try-sublabel", "system prompt"), system, chatLog,
                chatIn, chatControls);

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
    const last = lastAnswer();
    for (const btn of chatLog.querySelectorAll(".jt-chat-regenerate")) {
      btn.disabled = terminal || chatId !== null || !last || !last.contains(btn);
    }
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

  // Time to the first piece, the rate and pieces so far (a chat_piece or chat_end message);
  // tokens only as the server's usage counts them (a piece is a streamed chunk: a token on vLLM
  // and TGI, but not on every server). The kernel's rate is of the usage's tokens when it has
  // them (ChatStats.tokens_per_s), else of the pieces: named so.
  function figures(msg) {
    const parts = [];
    const usage = msg.usage && typeof msg.usage === "object" ? msg.usage : null;
    const counted = usage !== null && Number.isInteger(usage.completion_tokens);
    if (msg.ttft_ms !== null && msg.ttft_ms !== undefined) parts.push(`first piece after ${ms(msg.ttft_ms)}`);
    if (msg.tokens_per_s !== null && msg.tokens_per_s !== undefined) {
      parts.push(`${msg.tokens_per_s} ${counted ? "tokens" : "pieces"}/s`);
    } else if (msg.kind === "chat_end" && msg.pieces !== undefined) {
      // Said, not dropped: a short or one-read answer has no rate to measure.
      parts.push(`${counted ? "tokens" : "pieces"}/s: too quick to measure`);
    }
    if (msg.pieces !== undefined) parts.push(`${msg.pieces} pieces`);
    if (counted) {
      let words = `${usage.completion_tokens} tokens`;
      if (Number.isInteger(usage.prompt_tokens)) words += ` (prompt ${usage.prompt_tokens})`;
      parts.push(`${words}, the server's count`);
    }
    return parts;
  }

  // The transcript follows the newest text unless the reader scrolled up to read.
  function atBottom() {
    return chatLog.scrollHeight - chatLog.scrollTop - chatLog.clientHeight < 24;
  }

  function follow(was) {
    if (was) chatLog.scrollTop = chatLog.scrollHeight;
  }

  function copyText(text, btn) {
    const done = (ok) => {
      btn.textContent = ok ? "Copied" : "Copy failed";
      btn.dataset.copied = ok ? "1" : "0";
      setTimeout(() => { btn.textContent = "Copy"; }, 1500);
    };
    const fallback = () => {
      const area = h("textarea", "jt-chat-copy-area");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand("copy"); } catch { ok = false; }
      area.remove();
      done(ok);
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(() => done(true), fallback);
    } else {
      fallback();
    }
  }

  const raw = new WeakMap(); // an answer's turn -> its text as the server sent it (Markdown)
  let drawPending = false;

  function drawAnswer(turn) {
    const body = turn.querySelector(".jt-chat-text");
    jtRenderMarkdown(body, raw.get(turn) || "", copyText);
  }

  function addTurn(role, text) {
    const was = atBottom();
    const turn = h("div", `jt-chat-turn jt-chat-${role}`);
    const bubble = h("div", "jt-chat-bubble");
    const head = h("div", "jt-chat-head");
    head.appendChild(h("span", "jt-chat-role", role === "user" ? "You" : "Model"));
    const body = h("div", "jt-chat-text", role === "user" ? text : "");
    bubble.append(head, body);
    if (role === "assistant") {
      raw.set(turn, text);
      const actions = h("span", "jt-chat-actions");
      const copy = h("button", "jt-chat-copy", "Copy");
      copy.title = "copy the answer as the server sent it (Markdown)";
      copy.addEventListener("click", () => copyText(raw.get(turn) || "", copy));
      const again = h("button", "jt-chat-regenerate", "Regenerate");
      again.title = "drop this answer and ask again";
      again.addEventListener("click", () => regenerate(turn));
      actions.append(copy, again);
      head.appendChild(actions);
    }
    turn.appendChild(bubble);
    chatLog.appendChild(turn);
    follow(was);
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

  // The parameters as the kernel takes them (try_panel.py's chat_of): blank ones left out.
  function params() {
    const out = {};
    if (system.value.trim()) out.system = system.value;
    if (temperature.value !== "") out.temperature = Number(temperature.value);
    if (maxTokens.value !== "") out.max_tokens = Number(maxTokens.value);
    return out;
  }

  function ask() {
    const answer = addTurn("assistant", "");
    answer.dataset.state = "streaming";
    chatId = nextId++;
    chatStats.textContent = "waiting for the first piece…";
    refresh();
    model.send({ kind: "chat", id: chatId, model: modelSelect.value, messages: history.slice(), track: track(),
                 ...params() });
  }

  function chat() {
    const text = chatIn.value;
    if (!text.trim() || chatId !== null) return;
    history.push({ role: "user", content: text });
    trimHistory();
    addTurn("user", text);
    chatIn.value = "";
    ask();
  }

  // Regenerate: the last answer goes (from the transcript and the conversation) and is asked again.
  function regenerate(turn) {
    if (chatId !== null || turn !== lastAnswer()) return;
    if (history.length && history[history.length - 1].role === "assistant") history.pop();
    turn.remove();
    if (!history.length || history[history.length - 1].role !== "user") return;
    ask();
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
        if (typeof msg.reasoning === "string" && msg.reasoning) {
          // A reasoning model's thinking: shown apart, above the answer, as plain text (never
          // Markdown, never markup), and never sent back as history nor copied with the answer.
          let thinking = turn.querySelector(".jt-chat-reasoning");
          if (!thinking) {
            thinking = h("div", "jt-chat-reasoning", "");
            thinking.title = "the model's reasoning (not part of the answer)";
            turn.querySelector(".jt-chat-text").before(thinking);
          }
          const room = MAX_ANSWER_CHARS - thinking.textContent.length;
          if (room > 0) thinking.textContent += msg.reasoning.slice(0, room);
        }
        const text = raw.get(turn) || "";
        const room = MAX_ANSWER_CHARS - text.length;
        if (room > 0) raw.set(turn, text + String(msg.text || "").slice(0, room));
        // Drawn once a frame at most (a long answer is parsed again each time).
        if (!drawPending) {
          drawPending = true;
          const draw = () => {
            drawPending = false;
            const was = atBottom();
            const last = lastAnswer();
            if (last) drawAnswer(last);
            follow(was);
          };
          if (typeof requestAnimationFrame === "function") requestAnimationFrame(draw);
          else draw();
        }
      }
      chatStats.textContent = figures(msg).join(" · ") + " · streaming…";
    } else if (msg.kind === "chat_end" && msg.id === chatId) {
      chatId = null;
      const turn = lastAnswer();
      if (turn) {
        const was = atBottom();
        turn.dataset.state = msg.error ? "error" : "done";
        drawAnswer(turn);
        const text = raw.get(turn) || "";
        if (!msg.error || text) history.push({ role: "assistant", content: text });
        trimHistory();
        if (msg.error) turn.querySelector(".jt-chat-bubble").appendChild(h("div", "jt-chat-error", msg.error));
        follow(was);
      }
      const parts = figures(msg);
      if (msg.finish_reason) {
        parts.push(`finish: ${msg.finish_reason}${msg.finish_reason === "length" ? " (max_tokens reached)" : ""}`);
      }
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
