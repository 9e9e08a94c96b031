// leaf-go dashboard: the grouped-tags card (issue 14). Polls /api/v1/groups
// every 2 s; the card stays hidden while no tag is grouped. Numbers are
// strings and BigInt: capacities pass 2^53.
"use strict";

(function () {
  const POLL_MS = 2000;
  const $ = (id) => document.getElementById(id);

  function cell(tr, cls, text) {
    const td = document.createElement("td");
    if (cls) td.className = cls;
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function fmtInt(s) {
    try {
      return BigInt(s).toLocaleString("en-US");
    } catch (e) {
      return String(s);
    }
  }

  function percent(last, cap) {
    try {
      const c = BigInt(cap);
      if (c === 0n) return "";
      return " (" + (Number((BigInt(last) * 10000n) / c) / 100).toFixed(2) + "%)";
    } catch (e) {
      return "";
    }
  }

  function draw(data) {
    const card = $("groups");
    const body = $("groups-body");
    card.hidden = data.groups.length === 0;
    body.textContent = "";
    for (const g of data.groups) {
      const tr = document.createElement("tr");
      tr.dataset.tag = g.bizTag;
      cell(tr, "tag", g.bizTag);
      cell(tr, "format", g.format + " · " + g.group + " in " + g.timeZone);
      cell(tr, "period", g.period ? g.period + " until " + g.periodEnd : "not served yet");
      cell(tr, "num used", fmtInt(g.last) + " / " + fmtInt(g.capacity) + percent(g.last, g.capacity));
      cell(tr, "next", g.nextPeriod + (g.nextPrepared ? " · row prepared " + g.nextPrepared : " · row not prepared yet"));
      body.appendChild(tr);
    }
  }

  async function poll() {
    try {
      const resp = await fetch("/api/v1/groups", { cache: "no-store" });
      if (resp.ok) draw(await resp.json());
    } catch (e) {
      // The server is away; the segment card already says so.
    }
    setTimeout(poll, POLL_MS);
  }

  poll();
})();
