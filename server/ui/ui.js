// flakeid console: vanilla JavaScript, no build step, no external resources.
// It talks to the JSON API next to it (relative URLs, so a proxy's path
// prefix works): /v1/status every second, /v1/decode/{id}, /v1/layout and
// /v1/snowflake/next. When the server has tokens, the token typed in the
// header is kept in sessionStorage and sent as "Authorization: Bearer".
"use strict";

(function () {
  const API = "../v1/";
  const POLL_MS = 1000;
  const POLL_TIMEOUT_MS = 3000;
  const CHART_POINTS = 121; // two minutes of one-second samples, ends included
  const MAX_ERRORS = 25; // recent errors kept client-side
  const TOKEN_KEY = "flakeid.token";

  const $ = (id) => document.getElementById(id);
  const setText = (id, v) => { const el = $(id); if (el) el.textContent = v; };

  // ---- Auth ---------------------------------------------------------------

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
  }
  function setToken(v) {
    try {
      if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage disabled: the token lasts until reload */ memToken = v; }
    showTokenState();
  }
  let memToken = "";
  function currentToken() { return token() || memToken; }
  function showTokenState() {
    setText("token-state", currentToken() ? "token set" : "no token");
  }

  // api fetches a JSON endpoint and returns its body; a non-2xx answer
  // throws an Error carrying the server's JSON error message and the status.
  async function api(path, timeoutMs, method, payload) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), timeoutMs || 5000);
    const headers = { Accept: "application/json" };
    const tok = currentToken();
    if (tok) headers.Authorization = "Bearer " + tok;
    const init = { method: method || "GET", headers, signal: ctl.signal, cache: "no-store" };
    if (payload !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(payload);
    }
    let resp;
    try {
      resp = await fetch(API + path, init);
    } catch (e) {
      throw new Error(e.name === "AbortError" ? "no answer within " + (timeoutMs || 5000) / 1000 + " s" : "network error: " + e.message);
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    const text = await resp.text();
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    if (!resp.ok) {
      const msg = body && body.error && body.error.message ? body.error.message : (text.trim() || resp.statusText);
      const err = new Error(msg);
      err.status = resp.status;
      throw err;
    }
    return body;
  }

  // ---- Formatting -----------------------------------------------------------

  // Counts are JSON numbers and are shown grouped (12,345). IDs and ID
  // bounds are JSON strings of digits and stay strings: a 64-bit ID does not
  // fit a JavaScript number, so they are never made numbers; arithmetic on them
  // is BigInt. They are shown with every digit and no grouping, as the API
  // gives them, so that they can be copied; a range is its first and last
  // ID: "1001 – 2000".
  const nf = new Intl.NumberFormat("en-US");
  function fmtInt(v) { return v === undefined || v === null ? "–" : nf.format(v); }
  function bigID(v) {
    if (typeof v !== "string" || !/^-?[0-9]+$/.test(v)) return null;
    return BigInt(v);
  }
  function fmtID(v) { const b = bigID(v); return b === null ? "–" : b.toString(); }
  // rangeLen is the number of IDs of a half-open range {start, end}, as a
  // BigInt (null when it is not one).
  function rangeLen(r) {
    const s = r ? bigID(r.start) : null, e = r ? bigID(r.end) : null;
    return s === null || e === null ? null : e - s;
  }
  // fmtRange shows a half-open range {start, end} as its first and last IDs,
  // with a no-break space before the dash, so a narrow box breaks after it.
  function fmtRange(r) {
    const n = rangeLen(r);
    if (n === null || n <= 0n) return "–";
    return bigID(r.start).toString() + "\u00a0– " + (bigID(r.end) - 1n).toString();
  }
  function fmtCompact(v) {
    if (!isFinite(v)) return "∞";
    const a = Math.abs(v);
    const units = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [n, s] of units) {
      if (a >= n) return (v / n).toFixed(a / n >= 100 ? 0 : 1).replace(/\.0$/, "") + s;
    }
    return a >= 100 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1).replace(/\.0$/, "");
  }
  // fmtMs shows a duration given in milliseconds (the _ms keys).
  function fmtMs(ms) {
    if (ms === undefined || ms === null || !isFinite(ms)) return "–";
    const a = Math.abs(ms);
    if (a === 0) return "0";
    if (a < 1e-3) return Math.round(ms * 1e6) + " ns";
    if (a < 1) return (ms * 1e3).toFixed(1) + " µs";
    if (a < 1e3) return ms.toFixed(1) + " ms";
    return (ms / 1e3).toFixed(2) + " s";
  }
  // fmtUptime shows whole seconds as "2d 3h 4m", "3h 4m 5s", "4m 5s" or "5s".
  function fmtUptime(ms) {
    if (ms === undefined || ms === null || !isFinite(ms)) return "–";
    let s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    s %= 60;
    if (d > 0) return d + "d " + h + "h " + m + "m";
    if (h > 0) return h + "h " + m + "m " + s + "s";
    if (m > 0) return m + "m " + s + "s";
    return s + "s";
  }
  function fmtAgo(ms) {
    const s = Math.abs(ms) / 1000;
    let t;
    if (s < 1) t = Math.round(Math.abs(ms)) + " ms";
    else if (s < 120) t = s.toFixed(1) + " s";
    else if (s < 7200) t = (s / 60).toFixed(0) + " min";
    else if (s < 172800) t = (s / 3600).toFixed(1) + " h";
    else t = (s / 86400).toFixed(0) + " days";
    return ms >= 0 ? t + " ago" : "in " + t;
  }
  function fmtTime(iso) {
    if (!iso) return "–";
    const d = new Date(iso);
    if (isNaN(d)) return iso;
    return d.toISOString().replace("T", " ").replace(/\.(\d{3})Z$/, ".$1Z");
  }
  function clockTime(d) { return d.toTimeString().slice(0, 8); }

  // ---- Recent errors ----------------------------------------------------------

  const errors = []; // newest first: {kind, msg, first, last, count}
  function noteError(kind, msg) {
    const now = new Date();
    const top = errors[0];
    if (top && top.kind === kind && top.msg === msg) {
      top.count++;
      top.last = now;
    } else {
      errors.unshift({ kind, msg, first: now, last: now, count: 1 });
      errors.length = Math.min(errors.length, MAX_ERRORS);
    }
    renderErrors();
  }
  function renderErrors() {
    const ol = $("errors");
    ol.replaceChildren();
    for (const e of errors) {
      const li = document.createElement("li");
      const when = document.createElement("span");
      when.className = "when";
      when.textContent = clockTime(e.last);
      const what = document.createElement("span");
      what.className = "what";
      const kind = document.createElement("span");
      kind.className = "kind";
      kind.textContent = e.kind;
      what.append(kind, document.createTextNode(e.msg));
      if (e.count > 1) {
        const c = document.createElement("span");
        c.className = "count";
        c.textContent = "×" + e.count + " since " + clockTime(e.first);
        what.append(c);
      }
      li.append(when, what);
      ol.append(li);
    }
    $("errors-empty").hidden = errors.length > 0;
  }

  // ---- Live IDs/s chart ------------------------------------------------------

  const samples = []; // IDs per second, or null for a failed poll
  let prevIssued = null;
  let prevAt = 0;

  function addRate(issued, at) {
    if (prevIssued !== null && at > prevAt) {
      let delta = issued - prevIssued;
      if (delta < 0) delta = issued; // a server restarted behind the page counts from 0
      pushSample(delta * 1000 / (at - prevAt));
    }
    prevIssued = issued;
    prevAt = at;
  }
  function pushSample(v) {
    samples.push(v);
    if (samples.length > CHART_POINTS) samples.shift();
    const real = samples.filter((x) => x !== null);
    const last = v === null ? "" : String(Math.round(v));
    const canvas = $("rate-chart");
    canvas.dataset.last = last;
    canvas.dataset.points = String(samples.length);
    setText("rate-now", v === null ? "–" : fmtCompact(v));
    setText("rate-peak", real.length ? fmtCompact(Math.max(...real)) : "–");
    drawChart();
  }

  function niceMax(v) {
    if (v <= 0) return 10;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function drawChart() {
    const canvas = $("rate-chart");
    const box = canvas.parentElement.getBoundingClientRect();
    const dpr = window.devicePixelRatio || 1;
    const W = Math.max(100, Math.floor(box.width)), H = Math.max(60, Math.floor(box.height));
    if (canvas.width !== W * dpr || canvas.height !== H * dpr) {
      canvas.width = W * dpr;
      canvas.height = H * dpr;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const css = getComputedStyle(document.documentElement);
    const ink = css.getPropertyValue("--muted").trim() || "#666";
    const line = css.getPropertyValue("--line").trim() || "#ddd";
    const accent = css.getPropertyValue("--accent").trim() || "#2f6fde";
    const left = 44, right = 10, top = 8, bottom = 22;
    const pw = W - left - right, ph = H - top - bottom;
    const real = samples.filter((x) => x !== null);
    const max = niceMax(real.length ? Math.max(...real) : 0);

    ctx.font = "11px " + (css.getPropertyValue("--sans").trim() || "sans-serif");
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      ctx.strokeStyle = line;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(left, Math.round(y) + 0.5);
      ctx.lineTo(W - right, Math.round(y) + 0.5);
      ctx.stroke();
      ctx.fillStyle = ink;
      ctx.fillText(fmtCompact((max * i) / 4), left - 6, y);
    }
    // The window grows with the data, from half a minute up to CHART_POINTS
    // seconds, so a fresh page does not show a line squeezed to the right.
    const span = Math.max(31, Math.min(CHART_POINTS, samples.length));
    ctx.textBaseline = "alphabetic";
    for (const [frac, align] of [[0, "left"], [0.5, "center"], [1, "right"]]) {
      const secs = Math.round((1 - frac) * (span - 1));
      ctx.textAlign = align;
      ctx.fillText(secs === 0 ? "now" : "−" + secs + " s", left + pw * frac, H - 5);
    }
    if (!samples.length) {
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText("waiting for data…", left + pw / 2, top + ph / 2);
      return;
    }
    const step = pw / (span - 1);
    const x0 = left + pw - (samples.length - 1) * step;
    const xy = (i) => [x0 + i * step, top + ph - (ph * samples[i]) / max];

    // Runs of consecutive real samples: filled area, then the line.
    const runs = [];
    let cur = null;
    samples.forEach((v, i) => {
      if (v === null) { cur = null; return; }
      if (!cur) { cur = []; runs.push(cur); }
      cur.push(i);
    });
    for (const run of runs) {
      ctx.beginPath();
      run.forEach((i, k) => { const [x, y] = xy(i); if (k === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y); });
      const [xe] = xy(run[run.length - 1]), [xs] = xy(run[0]);
      ctx.lineTo(xe, top + ph);
      ctx.lineTo(xs, top + ph);
      ctx.closePath();
      ctx.fillStyle = css.getPropertyValue("--accent-soft").trim() || "rgba(47,111,222,0.15)";
      ctx.fill();
      ctx.beginPath();
      run.forEach((i, k) => { const [x, y] = xy(i); if (k === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y); });
      ctx.strokeStyle = accent;
      ctx.lineWidth = 2;
      ctx.lineJoin = "round";
      ctx.stroke();
    }
    const lastI = samples.length - 1;
    if (samples[lastI] !== null) {
      const [x, y] = xy(lastI);
      ctx.fillStyle = accent;
      ctx.beginPath();
      ctx.arc(x, y, 3.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }

  // ---- Status ------------------------------------------------------------------

  let lastStatus = null;
  let lastBackwards = null;

  function pill(id, cls, text) {
    const el = $(id);
    el.className = "pill " + cls;
    el.textContent = text;
  }

  function renderStatus(st) {
    lastStatus = st;
    const sf = st.snowflake || {};
    if (st.ready) {
      pill("ready", "pill-ok", "ready");
      $("ready-reason").hidden = true;
    } else {
      pill("ready", "pill-bad", "not ready");
      $("ready-reason").hidden = false;
      setText("ready-reason", "Not ready: " + (st.reason || "unknown reason"));
      // Every non-ready poll is noted; repeats of one reason fold into a count.
      noteError("not ready:", st.reason || "unknown reason");
    }
    setText("uptime", fmtUptime(st.uptime_ms));
    setText("worker-id", String(st.worker_id));
    setText("datacenter-id", String(st.datacenter_id));
    pill("lease", st.lease_held ? "pill-ok" : "pill-bad", st.lease_held ? "held" : "lost");
    setText("leases", fmtInt(st.leases));
    if (st.reserved_until) {
      const until = new Date(st.reserved_until);
      setText("reserved-until", fmtTime(st.reserved_until));
      setText("reserved-left", "(" + fmtAgo(Date.now() - until.getTime()) + ")");
    } else {
      setText("reserved-until", "–");
      setText("reserved-left", "");
    }
    setText("high-water", fmtTime(sf.high_water));
    setText("clock-offset", fmtMs(sf.clock_offset_ms));
    setText("lead", fmtMs(sf.lead_ms));
    // Counters since the server started (they do not drop with a new lease).
    const tot = st.snowflake_totals || sf;
    setText("clock-back", fmtInt(tot.clock_backwards));
    setText("clock-fwd", fmtInt(tot.clock_forwards));
    if (lastBackwards !== null && tot.clock_backwards > lastBackwards) {
      noteError("clock:", "the wall clock stepped back (" + (tot.clock_backwards - lastBackwards) + " time(s)); IDs did not follow it");
    }
    lastBackwards = tot.clock_backwards;
    setText("issued", fmtInt(tot.issued));
    setText("waits", fmtInt(tot.waits));
    setText("borrowed", fmtInt(tot.borrowed_ticks));
    setText("layout", (st.layout || "–").replace(" since ", "\nsince "));
    setText("masking", maskingText(st.mask));
    renderSegments(st.segments || []);
  }

  // maskingText describes what the server masks (never a key: the server
  // does not send them).
  function maskingText(m) {
    if (!m) return "off";
    const what = [];
    if (m.snowflake) what.push("Snowflake IDs");
    if (m.tags && m.tags.length) what.push(m.tags.indexOf("*") >= 0 ? "all tags" : "tags " + m.tags.slice().sort().join(", "));
    return (what.length ? what.join(" and ") : "nothing (decode only)") +
      " · " + m.form + ", " + m.text_len + " characters, " + m.bits + "-bit, key id " + m.key_id;
  }

  function bar(frac, cls) {
    const b = document.createElement("div");
    b.className = "bar " + (cls || "");
    const f = document.createElement("div");
    f.className = "bar-fill";
    f.style.width = Math.max(0, Math.min(1, frac)) * 100 + "%"; // CSSOM: allowed by the CSP
    b.append(f);
    return [b, f];
  }
  function cell(cls, text) {
    const el = document.createElement("span");
    el.className = cls;
    el.textContent = text;
    return el;
  }

  function renderSegments(segs) {
    const box = $("segments");
    box.replaceChildren();
    $("segments-empty").hidden = segs.length > 0;
    $("segments-empty").textContent = SEGMENTS_EMPTY;
    segs = segs.slice().sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
    for (const s of segs) {
      const div = document.createElement("div");
      div.className = "seg" + (s.refused ? " refused" : "");
      div.dataset.tag = s.tag;
      const head = document.createElement("div");
      head.className = "seg-head";
      const step = "step " + fmtInt(s.step) + (s.min_step && s.min_step !== s.step ? " (min " + fmtInt(s.min_step) + ")" : "");
      const tag = cell("seg-tag", s.tag);
      tag.title = s.tag;
      head.append(tag, cell("seg-step muted", step));
      const rows = document.createElement("div");
      rows.className = "seg-rows";
      const left = s.size - s.used;
      const [cb, cf] = bar(s.size > 0 ? left / s.size : 0);
      if (s.size > 0 && left / s.size < 0.2) cf.classList.add("low");
      rows.append(cell("lbl", "current"), cb,
        cell("val", fmtInt(s.used) + " / " + fmtInt(s.size) + " used"));
      // Every digit of the bounds: under each bar its segment's first and
      // last ID, then the high mark (the first ID after the newest segment
      // fetched).
      const idRow = (cls, text, title) => { const el = cell("ids " + cls, text); el.title = title; return el; };
      rows.append(idRow("range-current", fmtRange(s.current), "the IDs of the segment being handed out, first to last"));
      const nextLen = rangeLen(s.next);
      const fetched = nextLen !== null && nextLen > 0n;
      const [nb] = bar(fetched ? 1 : 0, "next");
      rows.append(cell("lbl", "next"), nb, cell("val", fetched ? fmtInt(nextLen) + " fetched" : "not fetched"));
      if (fetched) rows.append(idRow("range-next", fmtRange(s.next), "the prefetched segment, first to last ID"));
      rows.append(cell("lbl", "high mark"), idRow("high-mark", fmtID(s.high_mark), "the first ID after the newest segment fetched"));
      const foot = document.createElement("div");
      foot.className = "seg-foot";
      foot.textContent = fmtInt(s.issued) + " issued · " + fmtInt(s.fetches) + (s.fetches === 1 ? " fetch, " : " fetches, ") + fmtInt(s.failures) + " failed, " +
        fmtInt(s.waits) + " waits · fetch " + fmtMs(s.mean_fetch_ms) + " mean, " + fmtMs(s.last_fetch_ms) + " last" +
        (s.regressions ? " · store went backwards " + fmtInt(s.regressions) + "×" : "");
      foot.append(" ", deleteButton(s.tag));
      div.append(head, rows, foot);
      if (s.refused) {
        const p = cell("seg-refused error", "Refused: " + s.refused);
        div.append(p);
      }
      box.append(div);
    }
  }

  // A delete button clicked once: the next click within DELETE_ARM_MS
  // deletes. Kept here, since the list is drawn anew at every poll.
  let armedDelete = null;
  const DELETE_ARM_MS = 5000;

  function deleteArmed(tag) {
    return armedDelete !== null && armedDelete.tag === tag && armedDelete.until > Date.now();
  }

  // deleteButton deletes the tag (DELETE /v1/segment/tags/{tag}, an admin
  // token's right) on a second click: the tag hands out nothing more, and
  // creating it again continues above every ID it handed out.
  function deleteButton(tag) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "small ghost seg-delete";
    b.textContent = deleteArmed(tag) ? "confirm delete" : "delete";
    b.title = "Delete the tag: it hands out nothing more; creating it again continues above every ID it handed out. Click twice.";
    b.addEventListener("click", async () => {
      if (!deleteArmed(tag)) {
        armedDelete = { tag, until: Date.now() + DELETE_ARM_MS };
        b.textContent = "confirm delete";
        return;
      }
      armedDelete = null;
      b.disabled = true;
      try {
        await api("segment/tags/" + encodeURIComponent(tag), 5000, "DELETE");
        b.textContent = "deleted";
      } catch (e) {
        b.disabled = false;
        b.textContent = "delete";
        noteError("deleting tag " + tag + " failed" + (e.status ? " (" + e.status + ")" : "") + ":", e.message);
      }
    });
    return b;
  }

  // What the segment list says when the server has no tags to show.
  const SEGMENTS_EMPTY = "No segment tags loaded (segment mode off, or no tag used yet).";

  async function poll() {
    try {
      const st = await api("status", POLL_TIMEOUT_MS);
      const tot = st.snowflake_totals || st.snowflake;
      addRate(tot ? tot.issued : 0, performance.now());
      renderStatus(st);
    } catch (e) {
      pushSample(null);
      prevIssued = null;
      pill("ready", "pill-bad", e.status === 401 || e.status === 403 ? "token needed" : "unreachable");
      // Say why nothing is shown, not that nothing is there.
      $("segments").replaceChildren();
      $("segments-empty").hidden = false;
      $("segments-empty").textContent = e.status === 401 ? "A token is needed to see the segment tags (the server answered 401): enter one above."
        : e.status === 403 ? "This token may not read the status (the server answered 403)."
        : "The segment tags cannot be read: the server is unreachable.";
      noteError("status poll failed" + (e.status ? " (" + e.status + ")" : "") + ":", e.message);
      if (e.status === 401 || e.status === 403) $("token-input").focus();
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  // ---- New tag -------------------------------------------------------------------

  // onCreate creates a tag (POST /v1/segment/tags, an admin token's right):
  // plain IDs, or with a period a series of business numbers, whose
  // template the server checks and whose capacity it answers.
  async function onCreate(ev) {
    ev.preventDefault();
    const errEl = $("c-error"), out = $("c-result");
    errEl.hidden = true;
    out.textContent = "";
    const body = { tag: $("c-tag").value.trim() };
    // Counts, not IDs: the inputs' own numbers (valueAsNumber).
    const step = $("c-step").valueAsNumber;
    if (!Number.isNaN(step)) body.step = step;
    const desc = $("c-desc").value;
    if (desc) body.description = desc;
    const period = $("c-period").value;
    if (period) {
      body.period = period;
      body.template = $("c-template").value;
      const tz = $("c-tz").value.trim();
      if (tz) body.tz = tz;
      const start = $("c-start").valueAsNumber;
      if (!Number.isNaN(start)) body.start = start;
      if ($("c-masked").checked) body.masked = true;
    }
    try {
      const t = await api("segment/tags", 5000, "POST", body);
      out.textContent = t.period
        ? "Created series " + t.tag + ": " + t.template + " every " + t.period + " (" + t.tz + "), " + t.capacity + "."
        : "Created tag " + t.tag + " (step " + fmtInt(t.step) + ").";
    } catch (e) {
      errEl.textContent = "Not created" + (e.status ? " (" + e.status + ")" : "") + ": " + e.message;
      errEl.hidden = false;
    }
  }

  // ---- Decode ------------------------------------------------------------------

  // decodeID asks the server to split an ID typed in any plain form, or a
  // masked one: the server unmasks it with its keys (which never reach the
  // browser; with tokens configured, the token must be allowed to unmask).
  // as is "" (the server tells by the text, and refuses a text that reads
  // both ways), "masked" or "plain".
  async function decodeID(text, as) {
    return api("decode/" + encodeURIComponent(text) + (as ? "?as=" + encodeURIComponent(as) : ""));
  }

  function onDecode(ev) {
    ev.preventDefault();
    showDecoded($("decode-input").value.trim(), $("decode-as").value);
  }

  // showDecoded decodes text (read as as) and shows its parts, or the error.
  async function showDecoded(text, as) {
    const errEl = $("decode-error");
    if (!text) {
      errEl.textContent = "Paste an ID first.";
      errEl.hidden = false;
      $("decode-out").hidden = true;
      return;
    }
    try {
      const d = await decodeID(text, as);
      errEl.hidden = true;
      const masked = !!d.masked;
      $("d-masked-label").hidden = !masked;
      $("d-masked-row").hidden = !masked;
      setText("d-masked", masked ? d.masked : "–");
      setText("d-key-id", masked ? String(d.key_id) : "–");
      setText("d-id", d.id);
      setText("d-time", fmtTime(d.time));
      setText("d-age", "(" + fmtAgo(Date.now() - d.unix_ms) + ")");
      setText("d-unix", String(d.unix_ms));
      setText("d-tick", String(d.tick));
      setText("d-datacenter", String(d.datacenter));
      setText("d-worker", String(d.worker));
      setText("d-sequence", String(d.sequence));
      $("decode-out").hidden = false;
    } catch (e) {
      errEl.textContent = e.message + (/reads both as/.test(e.message) ? " Choose masked or plain beside the box." : "");
      errEl.hidden = false;
      $("decode-out").hidden = true;
    }
  }

  async function onFreshID() {
    try {
      const r = await api("snowflake/next");
      // The server's own fresh ID is known to be masked or plain.
      $("decode-input").value = r.ids[0];
      await showDecoded(r.ids[0], r.masked ? "masked" : "plain");
    } catch (e) {
      const errEl = $("decode-error");
      errEl.textContent = "New ID: " + e.message;
      errEl.hidden = false;
    }
  }

  // ---- Layout calculator --------------------------------------------------------

  const layoutFields = [["l-time", "time_bits"], ["l-datacenter", "datacenter_bits"], ["l-worker", "worker_bits"], ["l-sequence", "sequence_bits"]];
  let layoutTimer = 0;
  let layoutSeq = 0;

  // layoutQuery is the calculator's fields as a query; an empty field is
  // left out (the server refuses an empty parameter) and keeps the default.
  function layoutQuery() {
    const q = new URLSearchParams();
    const set = (key, v) => { v = v.trim(); if (v !== "") q.set(key, v); };
    for (const [id, key] of layoutFields) set(key, $(id).value);
    set("epoch", $("l-epoch").value);
    set("unit", $("l-unit").value);
    return q;
  }

  function drawBits(t, d, w, s) {
    const box = $("l-bar");
    box.replaceChildren();
    const parts = [["sign", 1], ["time", t], ["datacenter", d], ["worker", w], ["sequence", s]];
    const used = 1 + t + d + w + s;
    if (used < 64) parts.splice(1, 0, ["free", 64 - used]);
    for (const [name, n] of parts) {
      if (!(n > 0)) continue;
      const el = document.createElement("div");
      el.className = "b-" + name;
      el.style.flexGrow = String(n);
      el.style.flexBasis = "0";
      el.title = name + ": " + n + " bit" + (n === 1 ? "" : "s");
      el.textContent = name === "sign" ? "" : name + " " + n;
      el.dataset.bits = String(n);
      box.append(el);
    }
    if (used > 64) {
      const el = document.createElement("div");
      el.className = "b-over";
      el.style.flexGrow = String(used - 64);
      el.style.flexBasis = "0";
      el.textContent = "+" + (used - 64) + " over";
      el.dataset.bits = "+" + (used - 64);
      box.append(el);
    }
    // Full names only where they fit, else the bit count, else nothing.
    for (const el of box.children) {
      if (el.scrollWidth > el.clientWidth) el.textContent = el.dataset.bits || "";
      if (el.scrollWidth > el.clientWidth) el.textContent = "";
    }
  }

  async function calcLayout(q) {
    const seq = ++layoutSeq;
    let r;
    const errEl = $("l-error");
    try {
      r = await api("layout?" + q.toString());
    } catch (e) {
      if (seq !== layoutSeq) return null;
      errEl.textContent = e.message;
      errEl.hidden = false;
      pill("l-valid", "pill-bad", "invalid");
      for (const id of ["l-bits", "l-ips", "l-nodes", "l-lifetime", "l-until"]) setText(id, "–");
      return null;
    }
    if (seq !== layoutSeq) return null; // a newer request is on its way
    pill("l-valid", r.valid ? "pill-ok" : "pill-bad", r.valid ? "valid" : "invalid");
    errEl.textContent = r.error || "";
    errEl.hidden = !r.error;
    setText("l-bits", r.bits);
    setText("l-ips", r.ids_per_second ? fmtInt(r.ids_per_second) + " (" + fmtInt(r.ids_per_tick) + " per tick of " + r.unit + ")" : "–");
    setText("l-nodes", r.nodes ? fmtInt(r.nodes) + " (" + fmtInt(r.datacenters) + " datacenters × " + fmtInt(r.workers_per_datacenter) + " workers)" : "–");
    setText("l-lifetime", r.lifetime_years ? (r.lifetime_years >= 1e6 ? fmtCompact(r.lifetime_years) : r.lifetime_years.toFixed(1)) + " years" : "–");
    setText("l-until", r.runs_until || "–");
    drawBits(r.time_bits, r.datacenter_bits, r.worker_bits, r.sequence_bits);
    return r;
  }

  function onLayoutInput() {
    clearTimeout(layoutTimer);
    $("l-preset").value = "";
    layoutTimer = setTimeout(() => calcLayout(layoutQuery()), 200);
  }

  function fillLayout(r) {
    if (!r || !r.epoch) return;
    $("l-time").value = r.time_bits;
    $("l-datacenter").value = r.datacenter_bits;
    $("l-worker").value = r.worker_bits;
    $("l-sequence").value = r.sequence_bits;
    $("l-epoch").value = r.epoch;
    $("l-unit").value = r.unit;
  }

  async function onPreset() {
    const name = $("l-preset").value;
    if (!name) return;
    let q = new URLSearchParams({ preset: name });
    if (name === "node") {
      // status.layout reads "41/5/5/12 × 1ms since 2025-01-01T00:00:00Z".
      const m = lastStatus && /^(\d+)\/(\d+)\/(\d+)\/(\d+) × (\S+) since (\S+)$/.exec(lastStatus.layout || "");
      if (!m) {
        $("l-error").textContent = "The node's layout is not known yet.";
        $("l-error").hidden = false;
        return;
      }
      q = new URLSearchParams({ time_bits: m[1], datacenter_bits: m[2], worker_bits: m[3], sequence_bits: m[4], unit: m[5], epoch: m[6] });
    }
    const r = await calcLayout(q);
    fillLayout(r);
    $("l-preset").value = name;
  }

  // ---- Start ---------------------------------------------------------------------

  function start() {
    showTokenState();
    $("token-input").value = currentToken();
    $("token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      setToken($("token-input").value.trim());
      prevIssued = null;
    });
    $("token-clear").addEventListener("click", () => {
      $("token-input").value = "";
      setToken("");
    });
    $("errors-clear").addEventListener("click", () => { errors.length = 0; renderErrors(); });
    $("decode-form").addEventListener("submit", onDecode);
    $("create-form").addEventListener("submit", onCreate);
    $("decode-fresh").addEventListener("click", onFreshID);
    $("layout-form").addEventListener("input", onLayoutInput);
    $("layout-form").addEventListener("submit", (ev) => { ev.preventDefault(); calcLayout(layoutQuery()); });
    $("l-preset").addEventListener("change", onPreset);
    window.addEventListener("resize", drawChart);
    renderErrors();
    drawChart();
    calcLayout(layoutQuery());
    poll();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
