// leaf-go dashboard. Polls the JSON API every second and draws the segment
// buffers, the snowflake status and the ID inspector. IDs are strings and
// BigInt everywhere: a Number loses IDs above 2^53.
"use strict";

(function () {
  const POLL_MS = 1000;
  const SNOWFLAKE_POLL_MS = 5000;
  const MODE_OFF_POLL_MS = 30000; // a mode that is off rarely comes on

  // Snowflake layout, Twitter's default; replaced by the server's when
  // snowflake mode is on. Widths are in bits.
  const layout = { epoch: 1288834974657n, timeBits: 41, workerBits: 10, seqBits: 12 };
  // idBits is the width of an ID of the layout: 63, or fewer (53 keeps IDs exact in JavaScript).
  const idBits = () => layout.timeBits + layout.workerBits + layout.seqBits;

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // ---- formatting ---------------------------------------------------------

  function fmtInt(s) {
    try {
      return BigInt(s).toLocaleString("en-US");
    } catch (e) {
      return String(s);
    }
  }

  function fmtRate(r) {
    if (!r) return "0/s";
    if (r >= 100) return Math.round(r).toLocaleString("en-US") + "/s";
    return r.toFixed(1) + "/s";
  }

  function fmtDuration(s) {
    if (s === null || s === undefined) return "∞";
    if (s < 1) return (s * 1000).toFixed(s < 0.01 ? 2 : 0) + " ms";
    if (s < 120) return s.toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    if (s < 172800) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }

  function fmtAgo(iso, now) {
    if (!iso) return "never";
    const d = (now - Date.parse(iso)) / 1000;
    return fmtDuration(Math.max(d, 0)) + " ago";
  }

  // RFC 3339 in UTC, with milliseconds only when there are some (as Go's
  // time.RFC3339Nano prints).
  function isoUTC(ms) {
    const s = new Date(ms).toISOString();
    return s.endsWith(".000Z") ? s.slice(0, -5) + "Z" : s;
  }

  function warnSeconds(serverDefault) {
    const q = new URLSearchParams(location.search).get("warn");
    const n = q === null ? NaN : Number(q);
    return Number.isFinite(n) && n >= 0 ? n : serverDefault;
  }

  // ---- segment buffers ----------------------------------------------------

  const rows = new Map(); // biz_tag -> row parts

  // The buffers route pages: the dashboard asks for one page of PAGE tags,
  // worst runway first (or by tag), whose tag starts with the search text.
  // cursors[i] is the cursor of page i (page 0: ""); the server's "next"
  // extends it. A new search or order starts again at page 0.
  const PAGE = 50;
  const view = { prefix: "", sort: "runway", page: 0, cursors: [""] };
  let pollTimer = null;

  function buffersURL() {
    const q = new URLSearchParams({ limit: String(PAGE), sort: view.sort });
    if (view.prefix) q.set("prefix", view.prefix);
    if (view.cursors[view.page]) q.set("cursor", view.cursors[view.page]);
    return "/api/v1/segment/buffers?" + q.toString();
  }

  function pollNow() {
    if (pollTimer !== null) clearTimeout(pollTimer);
    pollTimer = null;
    pollBuffers();
  }

  function restart() {
    view.page = 0;
    view.cursors = [""];
    pollNow();
  }

  function drawPager(data) {
    if (data.next) view.cursors[view.page + 1] = data.next;
    else view.cursors.length = view.page + 1;
    const first = view.page * PAGE;
    const total = data.total || 0;
    $("buffers-count").textContent = total === 0 ? "no matching tags" :
      "tags " + fmtInt(String(first + 1)) + "–" + fmtInt(String(first + data.buffers.length)) +
      " of " + fmtInt(String(total)) + (view.sort === "runway" ? ", shortest runway first" : ", by tag");
    $("buffers-prev").disabled = view.page === 0;
    $("buffers-next").disabled = !data.next;
  }

  function setupBufferControls() {
    let debounce = null;
    $("buffers-search").addEventListener("input", (ev) => {
      if (debounce !== null) clearTimeout(debounce);
      debounce = setTimeout(() => {
        view.prefix = ev.target.value.trim();
        restart();
      }, 250);
    });
    $("buffers-sort").addEventListener("change", (ev) => {
      view.sort = ev.target.value;
      restart();
    });
    $("buffers-prev").addEventListener("click", () => {
      if (view.page > 0) {
        view.page--;
        pollNow();
      }
    });
    $("buffers-next").addEventListener("click", () => {
      if (view.cursors[view.page + 1]) {
        view.page++;
        pollNow();
      }
    });
  }

  function segmentBar(parent) {
    const box = el("div", "seg");
    const bar = el("div", "bar");
    const fill = el("div", "fill");
    bar.appendChild(fill);
    const label = el("div", "seg-label");
    box.append(bar, label);
    parent.appendChild(box);
    return { box, fill, label };
  }

  function newRow(tag) {
    const tr = el("tr");
    tr.dataset.tag = tag;
    const name = el("td", "tag");
    const title = el("div", "tag-name", tag);
    const issued = el("div", "issued muted");
    name.append(title, issued);
    const segs = el("td", "segs");
    const s0 = segmentBar(segs);
    const s1 = segmentBar(segs);
    const step = el("td", "num step");
    const hist = el("td", "hist");
    const load = el("td", "num load");
    const rate = el("td", "num rate");
    const runway = el("td", "num runway");
    tr.append(name, segs, step, hist, load, rate, runway);
    return { tr, issued, segs: [s0, s1], step, hist, load, rate, runway };
  }

  function drawSegment(part, s, b) {
    part.box.classList.toggle("current", s.current);
    const spare = !s.current && b.nextReady;
    part.box.classList.toggle("ready", spare);
    part.box.classList.toggle("stale", !s.current && !b.nextReady);
    part.fill.style.width = (s.used * 100).toFixed(2) + "%";
    let text;
    if (s.max === "0") {
      text = "empty";
    } else {
      text = (s.current ? "▶ " : spare ? "next · " : "old · ") +
        fmtInt(s.idle) + " left of " + fmtInt(String(s.step)) + " · max " + fmtInt(s.max);
    }
    part.label.textContent = text;
    part.box.title = "value " + s.value + ", max " + s.max + ", step " + s.step;
  }

  function drawHistory(td, hist) {
    td.textContent = "";
    if (!hist || hist.length === 0) return;
    const top = Math.max(...hist.map((h) => h.step));
    const chart = el("div", "spark");
    for (const h of hist.slice(-12)) {
      const b = el("span");
      // A log scale keeps a 1,000,000 step from flattening a 1,000 one.
      const f = top > 1 ? Math.log(h.step) / Math.log(top) : 1;
      b.style.height = Math.max(10, f * 100).toFixed(0) + "%";
      b.title = fmtInt(String(h.step)) + " at " + h.time;
      chart.appendChild(b);
    }
    td.append(chart, el("span", "muted spark-label", hist.map((h) => fmtInt(String(h.step))).slice(-3).join(" → ")));
  }

  function drawBuffers(data) {
    const warn = warnSeconds(data.runwayWarnSeconds);
    $("warn-seconds").textContent = String(warn);
    const body = $("buffers-body");
    const seen = new Set();
    const now = Date.parse(data.time);
    for (const b of data.buffers) {
      seen.add(b.bizTag);
      let r = rows.get(b.bizTag);
      if (!r) {
        r = newRow(b.bizTag);
        rows.set(b.bizTag, r);
      }
      body.appendChild(r.tr); // keeps the server's order
      r.issued.textContent = fmtInt(b.issued) + " issued" + (b.initOk ? "" : " · not loaded yet");
      b.segments.forEach((s, i) => drawSegment(r.segs[i], s, b));
      r.step.textContent = fmtInt(String(b.step)) + " / " + fmtInt(String(b.minStep));
      drawHistory(r.hist, b.stepHistory);
      r.load.textContent = b.lastLoad ? fmtDuration(b.lastLoadLatencySeconds) : "—";
      r.load.title = b.lastLoad ? "last load " + fmtAgo(b.lastLoad, now) : "no load yet";
      if (b.lastError) r.load.title += "\nlast error: " + b.lastError;
      r.rate.textContent = fmtRate(b.rate);
      r.runway.textContent = b.initOk ? fmtDuration(b.runwaySeconds) : "—";
      const low = b.initOk && b.runwaySeconds !== null && b.runwaySeconds < warn;
      r.tr.classList.toggle("warn", low);
      r.tr.classList.toggle("failing", b.retryAt !== null);
      r.runway.title = fmtInt(b.remaining) + " IDs buffered" + (b.nextReady ? "" : ", next segment not ready");
      if (b.ordered) {
        // An ordered tag buffers nothing: every batch of requests is one
        // database write (docs/contract.md §12).
        r.issued.textContent += " · ordered";
        r.runway.textContent = "ordered";
        r.runway.title = fmtInt(b.batches) + " database writes (one per batch of concurrent requests), no IDs buffered";
      }
    }
    for (const [tag, r] of rows) {
      if (!seen.has(tag)) {
        r.tr.remove();
        rows.delete(tag);
      }
    }
    const empty = body.querySelector("tr.empty");
    if (empty) empty.hidden = rows.size > 0;
    drawPager(data);
  }

  async function pollBuffers() {
    let next = POLL_MS;
    try {
      const asked = buffersURL();
      const resp = await fetch(asked, { cache: "no-store" });
      if (resp.status === 503 || resp.status === 404) {
        $("segment-off").hidden = false;
        $("buffers").hidden = true;
        next = MODE_OFF_POLL_MS;
      } else if (resp.ok) {
        $("segment-off").hidden = true;
        $("buffers").hidden = false;
        const data = await resp.json();
        // A page asked before the search or the page changed is stale.
        if (asked === buffersURL()) drawBuffers(data);
      } else {
        throw new Error("HTTP " + resp.status);
      }
      const r = $("refresh");
      r.textContent = "updated " + new Date().toLocaleTimeString();
      r.classList.remove("error");
    } catch (e) {
      const r = $("refresh");
      r.textContent = "disconnected: " + e.message;
      r.classList.add("error");
    }
    if (pollTimer !== null) clearTimeout(pollTimer);
    pollTimer = setTimeout(pollBuffers, next);
  }

  // ---- snowflake status ---------------------------------------------------

  function drawSnowflake(s) {
    const dl = $("sf-status");
    dl.textContent = "";
    const add = (k, v) => dl.append(el("dt", "", k), el("dd", "", v === undefined || v === "" ? "—" : String(v)));
    add("worker ID", s.workerId);
    add("source", s.source);
    if (s.sourceState !== undefined) add("source state", JSON.stringify(s.sourceState));
    add("last issued", s.lastIssued);
    add("high-water mark", s.highWater);
    add("issued", fmtInt(s.issued));
    add("clock-back events", s.clockBackwardEvents);
    add("clock-back wait", s.clockBackwardWaitMs + " ms");
    add("sequence waits", s.sequenceWaits);
    add("layout ends", s.layoutEnd);
    if (s.layout && s.layout.idBits !== undefined) add("layout", s.layout.idBits + " bits, " + s.idsPerMsPerWorker + " IDs/ms per worker, " + s.workers + " workers");
    if (s.layout && s.layout.epoch !== undefined) {
      layout.epoch = BigInt(s.layout.epoch);
      layout.timeBits = s.layout.timeBits;
      layout.workerBits = s.layout.workerBits;
      layout.seqBits = s.layout.sequenceBits;
      $("epoch-label").textContent = String(s.layout.epoch);
    }
  }

  async function pollSnowflake() {
    let on = false;
    try {
      const resp = await fetch("/api/v1/snowflake/status", { cache: "no-store" });
      if (resp.ok) {
        drawSnowflake(await resp.json());
        on = true;
      }
    } catch (e) {
      // Unreachable: shown as off; the header reports the connection.
    }
    $("sf-off").hidden = on;
    $("sf-status").hidden = !on;
    setTimeout(pollSnowflake, on ? SNOWFLAKE_POLL_MS : MODE_OFF_POLL_MS);
  }

  // ---- build and readiness (GET /api/v1/info) --------------------------------
  // The header shows the server's version, commit and Go version, and the
  // reasons /readyz gives while it is not ready.
  async function pollInfo() {
    try {
      const resp = await fetch("/api/v1/info", { cache: "no-store" });
      if (resp.ok) {
        const info = await resp.json();
        const b = info.build || {};
        let text = b.version || "";
        if (b.commit) text += " · " + b.commit.slice(0, 12) + (b.modified ? "+" : "");
        if (b.goVersion) text += " · " + b.goVersion;
        text += " · up " + fmtDuration(info.uptimeSeconds);
        $("build").textContent = text;
        const reasons = Object.entries(info.checks || {}).filter(([, v]) => v !== "ok");
        $("not-ready").hidden = info.ready;
        $("not-ready").textContent = info.ready ? "" :
          "not ready: " + reasons.map(([k, v]) => k + ": " + v).join("; ");
      }
    } catch (e) {
      // Unreachable: the buffers poll reports the connection in the header.
    }
    setTimeout(pollInfo, SNOWFLAKE_POLL_MS);
  }

  // ---- ID inspector -------------------------------------------------------

  function parseUint(name, s, bits) {
    s = String(s).trim();
    if (!/^[0-9]+$/.test(s)) throw new Error(name + " must be a non-negative integer");
    const v = BigInt(s);
    if (v >= 1n << BigInt(bits)) throw new Error(name + " " + s + " does not fit in " + bits + " bits");
    return v;
  }

  function twitterSplit() {
    return layout.workerBits === 10;
  }

  // decode splits an ID (a decimal string) into its fields.
  function decode(idStr) {
    const id = parseUint("ID", idStr, idBits());
    const seqBits = BigInt(layout.seqBits);
    const workerBits = BigInt(layout.workerBits);
    const seq = id & ((1n << seqBits) - 1n);
    const worker = (id >> seqBits) & ((1n << workerBits) - 1n);
    const ts = (id >> (seqBits + workerBits)) + layout.epoch;
    return { id, ts, worker, dc: worker >> 5n, machine: worker & 31n, seq };
  }

  // encode builds an ID from fields; the time is Unix ms.
  function encode(tsStr, dcStr, machineStr, seqStr) {
    const ts = parseUint("timestamp", tsStr, 64);
    if (ts < layout.epoch) throw new Error("timestamp is before the epoch " + layout.epoch);
    const rel = ts - layout.epoch;
    if (rel >= 1n << BigInt(layout.timeBits)) throw new Error("timestamp is past the layout's end");
    let worker;
    if (twitterSplit()) {
      worker = (parseUint("datacenter", dcStr, 5) << 5n) | parseUint("machine", machineStr, 5);
    } else {
      worker = parseUint("machine (worker)", machineStr, layout.workerBits);
    }
    const seq = parseUint("sequence", seqStr, layout.seqBits);
    const seqBits = BigInt(layout.seqBits);
    const id = (rel << (seqBits + BigInt(layout.workerBits))) | (worker << seqBits) | seq;
    return decode(id.toString());
  }

  function fieldOf(bit) {
    // bit 63 is the most significant.
    const seq = layout.seqBits;
    const worker = layout.workerBits;
    if (bit === 63) return "b-sign";
    if (bit >= idBits()) return "b-unused";
    if (bit >= seq + worker) return "b-time";
    if (bit >= seq) {
      if (twitterSplit()) return bit >= seq + 5 ? "b-dc" : "b-machine";
      return "b-machine";
    }
    return "b-seq";
  }

  function drawBits(id) {
    const box = $("bits");
    box.textContent = "";
    const bin = id.toString(2).padStart(64, "0");
    let group = null;
    let groupCls = "";
    for (let i = 0; i < 64; i++) {
      const cls = fieldOf(63 - i);
      if (cls !== groupCls) {
        group = el("div", "bit-group " + cls);
        // Grow each field with its width so the drawing is to scale.
        box.appendChild(group);
        groupCls = cls;
      }
      const b = el("span", "bit", bin[i]);
      b.title = "bit " + (63 - i);
      group.appendChild(b);
    }
    for (const g of box.children) g.style.flexGrow = String(g.children.length);
  }

  function showResult(r) {
    $("inspect-error").hidden = true;
    $("inspect-result").hidden = false;
    const ms = Number(r.ts); // < 2^53 for any 41-bit time
    $("r-id").textContent = r.id.toString();
    $("r-utc").textContent = isoUTC(ms);
    $("r-local").textContent = new Date(ms).toString();
    $("r-ts").textContent = r.ts.toString() + " ms";
    $("r-worker").textContent = r.worker.toString();
    $("r-dc").textContent = twitterSplit() ? r.dc.toString() : "—";
    $("r-machine").textContent = twitterSplit() ? r.machine.toString() : r.worker.toString();
    $("r-seq").textContent = r.seq.toString();
    drawBits(r.id);
  }

  function showError(e) {
    $("inspect-result").hidden = true;
    const p = $("inspect-error");
    p.textContent = e.message;
    p.hidden = false;
  }

  function initInspector() {
    $("decode-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      try {
        showResult(decode($("decode-id").value));
      } catch (e) {
        showError(e);
      }
    });
    $("encode-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      try {
        const r = encode($("enc-ts").value, $("enc-dc").value, $("enc-machine").value, $("enc-seq").value);
        $("decode-id").value = r.id.toString();
        showResult(r);
      } catch (e) {
        showError(e);
      }
    });
  }

  initInspector();
  setupBufferControls();
  pollBuffers();
  pollSnowflake();
  pollInfo();
})();
