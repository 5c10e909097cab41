// eosink console: a page over the management API (/api/v1, docs/openapi.yaml). No framework,
// no build step. Every value from the API is put into the page as text (textContent, never
// innerHTML), so a record holding markup or terminal escapes is shown, never run.
"use strict";

const MAX_SHOWN = 4096; // bytes of a key or value shown; the rest is cut with a note
const REFRESH_MS = 5000;

const state = { token: sessionStorage.getItem("eosink-token") || "", timer: null };

// ---- DOM helpers: elements built with text only --------------------------------------
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}
const svgNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}
function main(...kids) {
  const m = document.getElementById("main");
  m.replaceChildren(...kids.flat().filter(Boolean));
}
function flash(text, isError) {
  const f = document.getElementById("flash");
  f.textContent = text;
  f.className = isError ? "flash error" : "flash";
  f.hidden = false;
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { f.hidden = true; }, isError ? 12000 : 5000);
}
// Shown safely: control characters (terminal escapes among them) as \x.. escapes, cut long.
function printable(s) {
  if (s === null || s === undefined) return "(null)";
  let out = "";
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if ((c < 0x20 && ch !== "\n" && ch !== "\t") || (c >= 0x7f && c < 0xa0)) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out;
}
function cut(s) {
  if (s.length <= MAX_SHOWN) return s;
  return s.slice(0, MAX_SHOWN) + `… (${s.length - MAX_SHOWN} more characters not shown)`;
}
function when(t) {
  if (!t || t.startsWith("0001-")) return "";
  const d = new Date(t);
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const ago = s < 90 ? `${s}s ago` : s < 5400 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`;
  return `${d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z")} (${ago})`;
}
function secs(v) {
  if (v === undefined || v === null || v < 0) return "?";
  if (v < 120) return `${v.toFixed(v < 10 ? 1 : 0)}s`;
  if (v < 7200) return `${Math.round(v / 60)}m`;
  return `${(v / 3600).toFixed(1)}h`;
}
function route(...parts) { return "#/" + parts.map(encodeURIComponent).join("/"); }

// ---- the API ---------------------------------------------------------------------------
class APIError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.field = body && body.field;
  }
}
async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (method !== "GET") {
    headers["X-Eosink-CSRF"] = "1"; // the API refuses a mutation without it
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (_) { /* empty or not JSON */ }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}
function showError(err) {
  const msg = err.status === 401 ? "A token is required: enter one above (console.tokens_file maps it to your name)." :
    (err.field ? `${err.message} (field: ${err.field})` : err.message);
  flash(msg, true);
  return el("p", { class: "bad", "data-testid": "error" }, msg);
}

// ---- confirmation in the page (no browser dialogs) -------------------------------------
function confirmBox(question, yesLabel, action) {
  const box = el("span", { class: "confirm", "data-testid": "confirm" }, question, " ");
  const yes = el("button", { class: "danger", type: "button", "data-testid": "confirm-yes" }, yesLabel);
  const no = el("button", { type: "button" }, "Cancel");
  yes.addEventListener("click", async () => {
    yes.disabled = true;
    try { await action(); } finally { box.remove(); }
  });
  no.addEventListener("click", () => box.remove());
  box.append(yes, " ", no);
  return box;
}

// ---- pages -----------------------------------------------------------------------------
async function overview() {
  const list = await api("GET", "/api/v1/pipelines");
  const rows = list.map(s => {
    const stopped = (s.stopped || []).length;
    const running = s.partitions - stopped - s.partitions_unowned;
    return el("tr", { "data-pipeline": s.pipeline },
      el("td", {}, el("a", { href: route("p", s.pipeline) }, s.pipeline)),
      el("td", { class: "num" }, s.partitions),
      el("td", { class: "num" }, running),
      el("td", { class: stopped ? "num bad" : "num" }, stopped),
      el("td", { class: s.partitions_unowned ? "num warn" : "num" }, s.partitions_unowned),
      el("td", { class: "num" }, s.lag),
      el("td", { class: "num" }, secs(s.lag_seconds)),
      el("td", { class: "num", "data-testid": "rate" }, "…"),
      el("td", { class: s.dead_letters ? "num bad" : "num", "data-testid": "dead" }, s.dead_letters),
      el("td", { class: "num", "data-testid": "dead-hour" }, "…"),
      el("td", {}, (s.owners_alive || []).join(", ") || el("span", { class: "muted" }, "none alive")),
      el("td", {}, when(s.last_commit)));
  });
  main(el("h1", {}, "Pipelines"),
    list.length === 0 ? el("p", { class: "muted" }, "No pipeline has stored positions in this schema yet.") :
      el("table", { id: "pipelines" },
        el("thead", {}, el("tr", {}, ["pipeline", "partitions", "running", "stopped", "unowned", "lag", "lag (age)", "records/s", "dead letters", "dead letters 1h", "owners alive", "last commit"]
          .map((h, i) => el("th", { class: i > 0 && i < 10 ? "num" : "" }, h)))),
        el("tbody", {}, rows)));
  for (const s of list) {
    try {
      const h = await api("GET", `/api/v1/pipelines/${encodeURIComponent(s.pipeline)}/history`);
      const tr = document.querySelector(`tr[data-pipeline="${CSS.escape(s.pipeline)}"]`);
      if (!tr) continue;
      tr.querySelector('[data-testid="rate"]').textContent = h.records_per_second === null ? "?" : h.records_per_second.toFixed(1);
      tr.querySelector('[data-testid="dead-hour"]').textContent = h.dead_letters_last_hour;
    } catch (_) { /* history is optional */ }
  }
}

function partitionRow(p) {
  const stop = p.stopped;
  const un = p.unowned;
  return el("tr", { "data-partition": `${p.topic}/${p.partition}`, class: stop ? "stopped" : "" },
    el("td", {}, p.topic), el("td", { class: "num" }, p.partition),
    el("td", {}, p.owner || "", " ", p.owner_alive ? el("span", { class: "good" }, "alive") : el("span", { class: "muted" }, "(gone)")),
    el("td", { class: "num" }, p.epoch), el("td", { class: "num" }, p.next_offset),
    el("td", { class: "num" }, `${p.log_start}–${p.log_end}`),
    el("td", { class: "num" }, p.lag), el("td", { class: "num" }, secs(p.lag_seconds)),
    el("td", { "data-testid": "state" },
      stop ? [el("span", { class: "bad" }, "stopped: ", stop.reason), el("div", {}, printable(stop.error)),
        el("div", { class: "remedy", "data-testid": "remedy" }, "remedy: ", stop.remedy)] :
        un ? [el("span", { class: "warn" }, "unowned: ", un.reason), el("div", { class: "remedy" }, un.detail)] :
          p.error ? el("span", { class: "bad" }, p.error) : el("span", { class: "good" }, "running")),
    el("td", {}, when(p.last_commit)));
}

function chart(samples) {
  const W = 900, H = 180, pad = 28;
  const box = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "lag and throughput" });
  if (samples.length < 2) {
    const t = svg("text", { x: pad, y: H / 2 });
    t.textContent = "collecting samples (one every few seconds while the console runs)";
    box.append(t);
    return box;
  }
  const t0 = Date.parse(samples[0].at), t1 = Date.parse(samples[samples.length - 1].at);
  const rates = samples.map((s, i) => i === 0 ? 0 : Math.max(0, (s.applied - samples[i - 1].applied) / Math.max(0.001, (Date.parse(s.at) - Date.parse(samples[i - 1].at)) / 1000)));
  const maxLag = Math.max(1, ...samples.map(s => s.lag)), maxRate = Math.max(1, ...rates);
  const x = t => pad + (W - 2 * pad) * (t - t0) / Math.max(1, t1 - t0);
  const line = (vals, max) => vals.map((v, i) => `${i ? "L" : "M"}${x(Date.parse(samples[i].at)).toFixed(1)},${(H - pad - (H - 2 * pad) * v / max).toFixed(1)}`).join(" ");
  box.append(svg("line", { class: "axis", x1: pad, y1: H - pad, x2: W - pad, y2: H - pad }));
  box.append(svg("path", { class: "lag", d: line(samples.map(s => s.lag), maxLag) }));
  box.append(svg("path", { class: "rate", d: line(rates, maxRate) }));
  const label = (tx, ty, text) => { const t = svg("text", { x: tx, y: ty }); t.textContent = text; box.append(t); };
  label(pad, 12, `lag max ${maxLag}, records/s max ${maxRate.toFixed(1)}`);
  label(pad, H - 8, new Date(t0).toISOString().slice(11, 19) + "Z");
  label(W - pad - 50, H - 8, new Date(t1).toISOString().slice(11, 19) + "Z");
  return box;
}

function deadLetterRows(page, pipeline, reload) {
  const selected = new Set();
  const rows = page.dead_letters.map(d => el("tr", { "data-dead-letter": d.id },
    el("td", {}, el("input", { type: "checkbox", "aria-label": `select ${d.id}`, onchange: e => e.target.checked ? selected.add(d.id) : selected.delete(d.id) })),
    el("td", {}, el("a", { href: route("dl", d.id) }, d.id)),
    el("td", {}, `${d.topic}[${d.partition}]@${d.offset}`),
    el("td", {}, cut(printable(d.error))),
    el("td", { class: "num" }, d.failures), el("td", {}, when(d.last_failed_at))));
  const actions = el("div", { class: "actions" });
  const act = (verb) => async () => {
    const ids = [...selected];
    if (ids.length === 0) { flash("Select dead letters first.", true); return; }
    actions.append(confirmBox(`${verb} ${ids.length} dead letter(s) of ${pipeline}?`, `Yes, ${verb.toLowerCase()}`, async () => {
      let done = 0;
      for (const id of ids) {
        try { await api("POST", `/api/v1/dead-letters/${id}/${verb.toLowerCase()}`); done++; } catch (e) { showError(e); }
      }
      flash(`${verb}: ${done} of ${ids.length} done.`);
      reload();
    }));
  };
  actions.append(el("button", { type: "button", onclick: act("Replay") }, "Replay selected"), " ",
    el("button", { type: "button", onclick: act("Discard") }, "Discard selected"));
  // Select all: the listed page of dead letters (a range: filter by topic and partition in the
  // API, or page on) in one action.
  const all = el("input", { type: "checkbox", "aria-label": "select all listed", "data-testid": "select-all", onchange: e => {
    for (const box of rows.map(r => r.querySelector("input"))) {
      box.checked = e.target.checked;
      const id = Number(box.closest("tr").dataset.deadLetter);
      if (e.target.checked) selected.add(id); else selected.delete(id);
    }
  } });
  return [el("table", { id: "dead-letters" },
    el("thead", {}, el("tr", {}, el("th", {}, all), ["id", "record", "error", "failures", "last failed"].map(h => el("th", {}, h)))),
    el("tbody", {}, rows)), page.dead_letters.length ? actions : el("p", { class: "muted" }, "No dead letters.")];
}

function offsetsForm(pipeline, partitions) {
  const topics = [...new Set(partitions.map(p => p.topic))];
  const form = el("form", { class: "inline", id: "offsets-form" },
    el("label", {}, "topic", el("select", { name: "topic" }, topics.map(t => el("option", { value: t }, t)))),
    el("label", {}, "partition (empty: all)", el("input", { name: "partition", inputmode: "numeric", size: 6 })),
    el("label", {}, "to", el("input", { name: "to", placeholder: "earliest, latest, an offset, an RFC 3339 time", size: 28 })),
    el("label", {}, "reason (audited)", el("input", { name: "reason", size: 30 })),
    el("button", { type: "submit", class: "primary" }, "Preview (dry run)"));
  const out = el("div", { id: "offsets-result" });
  form.addEventListener("submit", async ev => {
    ev.preventDefault();
    const f = new FormData(form);
    const body = { topic: f.get("topic"), to: f.get("to"), reason: f.get("reason"), dry_run: true };
    const part = String(f.get("partition") || "").trim();
    if (part !== "") {
      if (!/^\d+$/.test(part)) { flash("partition: a number, or empty for all", true); return; }
      body.partition = Number(part);
    }
    if (/^\d+$/.test(body.to)) body.to = Number(body.to);
    const path = `/api/v1/pipelines/${encodeURIComponent(pipeline)}/offsets`;
    try {
      const plan = await api("POST", path, body);
      const table = el("table", { "data-testid": "plan" },
        el("thead", {}, el("tr", {}, ["topic", "partition", "from", "to", "log range"].map(h => el("th", {}, h)))),
        el("tbody", {}, plan.changes.map(c => el("tr", {}, el("td", {}, c.topic), el("td", { class: "num" }, c.partition),
          el("td", { class: "num" }, c.from === null ? "(no row)" : c.from), el("td", { class: "num" }, c.to), el("td", { class: "num" }, `${c.log_start}–${c.log_end}`)))));
      out.replaceChildren(el("h2", {}, "Dry run: what would move"), table,
        confirmBox(`Move ${plan.changes.length} partition(s) as shown?`, "Yes, apply", async () => {
          try {
            const done = await api("POST", path, { ...body, dry_run: false });
            flash(`Moved ${done.changes.length} partition(s), audited as ${done.operator || "(no operator)"}.`);
            const audit = await api("GET", `/api/v1/audit?pipeline=${encodeURIComponent(pipeline)}&limit=5`);
            out.replaceChildren(el("h2", {}, "Audit after the move"), auditTable(audit.entries));
          } catch (e) { out.append(showError(e)); }
        }));
    } catch (e) { out.replaceChildren(showError(e)); }
  });
  return [form, out];
}

async function pipelinePage(name) {
  const enc = encodeURIComponent(name);
  const [d, dl] = await Promise.all([api("GET", `/api/v1/pipelines/${enc}`), api("GET", `/api/v1/pipelines/${enc}/dead-letters?limit=50`)]);
  let hist = null;
  try { hist = await api("GET", `/api/v1/pipelines/${enc}/history`); } catch (_) { /* optional */ }
  const s = d.summary;
  const card = (k, v, cls) => el("div", { class: "card" }, el("div", { class: "v " + (cls || "") }, v), el("div", { class: "k" }, k));
  const stopped = (s.stopped || []).length;
  main(el("h1", { "data-pipeline-page": name }, "Pipeline ", name),
    el("div", { class: "cards" }, card("partitions", s.partitions), card("stopped", stopped, stopped ? "bad" : ""),
      card("unowned", s.partitions_unowned, s.partitions_unowned ? "warn" : ""), card("lag (records)", s.lag), card("lag (age)", secs(s.lag_seconds)),
      card("open dead letters", s.dead_letters, s.dead_letters ? "bad" : ""), card("max epoch", s.max_epoch)),
    el("h2", {}, "Partitions"),
    el("table", { id: "partitions" },
      el("thead", {}, el("tr", {}, ["topic", "partition", "owner", "epoch", "position", "log range", "lag", "lag (age)", "state", "last commit"].map(h => el("th", {}, h)))),
      el("tbody", {}, d.partitions.map(partitionRow))),
    el("h2", {}, "Lag and throughput"),
    el("div", { class: "legend" }, el("span", { class: "lag" }, "— lag (records)"), el("span", { class: "rate" }, "— applied records/s")),
    chart(hist ? hist.samples : []),
    el("h2", {}, "Dead letters"), deadLetterRows(dl, name, () => render()),
    dl.next_after_id ? el("p", { class: "muted" }, `Showing the first ${dl.dead_letters.length}; use the API's after_id=${dl.next_after_id} for more.`) : null,
    el("h2", {}, "Move positions"), offsetsForm(name, d.partitions));
}

function recordBlock(label, text, b64) {
  if (text === null && b64 === null) return [el("h2", {}, label), el("p", { class: "muted" }, "(null)")];
  if (text === null) return [el("h2", {}, label, " (not UTF-8, base64)"), el("pre", { class: "record", "data-testid": label }, cut(b64))];
  return [el("h2", {}, label), el("pre", { class: "record", "data-testid": label }, cut(printable(text)))];
}

async function deadLetterPage(id) {
  const d = await api("GET", `/api/v1/dead-letters/${encodeURIComponent(id)}`);
  const out = el("div", { id: "dl-actions" });
  const act = verb => () => out.replaceChildren(confirmBox(`${verb} dead letter ${d.id}?`, `Yes, ${verb.toLowerCase()}`, async () => {
    try {
      const r = await api("POST", `/api/v1/dead-letters/${d.id}/${verb.toLowerCase()}`);
      const what = verb === "Replay" ? `replayed ${r.replayed}, failed again ${r.failed_again}, gone ${r.gone}` : `discarded ${r.discarded}`;
      out.replaceChildren(el("p", { class: "good", "data-testid": "result" }, `${verb}: ${what} (as ${r.operator || "no operator"}).`));
    } catch (e) { out.replaceChildren(showError(e)); }
  }));
  const isOpen = d.state === "open";
  main(el("h1", { "data-dead-letter-page": d.id }, `Dead letter ${d.id}`),
    el("p", {}, el("a", { href: route("p", d.pipeline) }, d.pipeline), ` · ${d.topic}[${d.partition}]@${d.offset} · failures ${d.failures} · first ${when(d.first_failed_at)} · last ${when(d.last_failed_at)}`),
    el("p", { "data-testid": "dl-state", class: isOpen ? "bad" : "good" }, isOpen ? "open" : `${d.state} by ${d.resolved_by} ${when(d.resolved_at)}`),
    el("h2", {}, "Error"), el("pre", { class: "record", "data-testid": "error-text" }, cut(printable(d.error))),
    recordBlock("key", d.key, d.key_base64), recordBlock("value", d.value, d.value_base64),
    d.edited ? [el("p", { class: "warn" }, `Edited by ${d.edited_by} ${when(d.edited_at)}: a replay applies the edit.`),
      d.edited_key_base64 !== null ? recordBlock("edited key", d.edited_key, d.edited_key_base64) : null,
      d.edited_value_base64 !== null ? recordBlock("edited value", d.edited_value, d.edited_value_base64) : null] : null,
    el("h2", {}, "Headers"),
    (d.headers || []).length === 0 ? el("p", { class: "muted" }, "none") :
      el("table", {}, el("tbody", {}, d.headers.map(h => el("tr", {}, el("td", {}, h.key === null ? `(base64) ${h.key_base64}` : printable(h.key)),
        el("td", {}, h.value === null ? (h.value_base64 === null ? "(null)" : `(base64) ${h.value_base64}`) : cut(printable(h.value))))))),
    el("h2", {}, "Audit"),
    (d.audit || []).length === 0 ? el("p", { class: "muted" }, "No edit, replay or discard yet.") :
      el("table", { id: "dl-audit" }, el("tbody", {}, d.audit.map(a => el("tr", {}, el("td", {}, when(a.at)), el("td", {}, a.action),
        el("td", {}, a.operator), el("td", {}, printable(a.reason)))))),
    isOpen ? el("p", {}, el("button", { type: "button", class: "primary", onclick: act("Replay") }, "Replay"), " ",
      el("button", { type: "button", onclick: act("Discard") }, "Discard")) : null, out);
}

function auditTable(entries) {
  return el("table", { id: "audit" },
    el("thead", {}, el("tr", {}, ["id", "at", "operator", "reason", "change", "partition", "from", "to", "owner", "db user"].map(h => el("th", {}, h)))),
    el("tbody", {}, entries.map(a => el("tr", { "data-audit": a.id }, el("td", {}, a.id), el("td", {}, when(a.at)), el("td", {}, a.operator),
      el("td", {}, printable(a.reason)), el("td", {}, a.change), el("td", {}, `${a.pipeline} ${a.topic}[${a.partition}]`),
      el("td", { class: "num" }, a.from_offset ?? ""), el("td", { class: "num" }, a.to_offset ?? ""), el("td", {}, a.owner), el("td", {}, a.db_user)))));
}

async function auditPage(before) {
  const q = before ? `?limit=100&before_id=${encodeURIComponent(before)}` : "?limit=100";
  const page = await api("GET", "/api/v1/audit" + q);
  main(el("h1", {}, "Audit of position changes"), auditTable(page.entries),
    page.next_before_id ? el("p", {}, el("a", { href: route("audit", page.next_before_id) }, "Older entries")) : null);
}

// ---- routing ---------------------------------------------------------------------------
async function render() {
  clearTimeout(state.timer);
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "p" && parts[1]) await pipelinePage(parts[1]);
    else if (parts[0] === "dl" && parts[1]) await deadLetterPage(parts[1]);
    else if (parts[0] === "audit") await auditPage(parts[1]);
    else {
      await overview();
      state.timer = setTimeout(render, REFRESH_MS); // the overview refreshes itself
    }
  } catch (e) {
    main(el("h1", {}, "eosink console"), showError(e));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("token");
  input.value = state.token;
  document.getElementById("login").addEventListener("submit", ev => {
    ev.preventDefault();
    state.token = input.value.trim();
    if (state.token) sessionStorage.setItem("eosink-token", state.token); else sessionStorage.removeItem("eosink-token");
    document.getElementById("operator").textContent = state.token ? "token set for this tab" : "";
    render();
  });
  if (state.token) document.getElementById("operator").textContent = "token set for this tab";
  window.addEventListener("hashchange", render);
  render();
});
