// Live updates for the console: events from the journal's stream refresh
// the live part of the page, and countdowns tick. Everything works without
// this script too; it only saves the reloads.
(() => {
  "use strict";
  function byId(id) { return document.getElementById(id); }
  var body = document.body;
  var live = byId("live");
  var link = byId("link");
  var kinds = (body.dataset.kinds || "").split(",").filter(Boolean);

  function countdowns() {
    var now = Date.now();
    document.querySelectorAll("time.countdown").forEach((el) => {
      var left = Math.round((Date.parse(el.dataset.expires) - now) / 1000);
      if (left <= 0) { el.textContent = "expired"; return; }
      var m = Math.floor(left / 60), s = left % 60;
      el.textContent = "in " + (m > 0 ? m + " min " : "") + s + " s";
    });
  }
  // The age of every reading ticks, and a reading older than its
  // threshold (data-stale, in ms) is marked stale: readings that stop send
  // no event, so the page must not wait for one. Ages are told by the
  // gateway's clock (data-now, when the page was drawn), not the browser's.
  var skew = body.dataset.now ? Number(body.dataset.now) - Date.now() : 0;
  function ago(ms) {
    var s = Math.floor(ms / 1000), m = Math.round(s / 60);
    return s < 0 ? "just now" : s < 60 ? s + "s ago" : s < 3600 ? Math.floor(s / 60) + "m ago" : Math.floor(m / 60) + "h" + m % 60 + "m0s ago";
  }
  function ages() {
    var now = Date.now() + skew;
    document.querySelectorAll("[data-read]").forEach((el) => {
      var age = now - Number(el.dataset.read), limit = Number(el.dataset.stale);
      var a = el.classList.contains("age") ? el : el.querySelector(".age"), mark = el.querySelector(".stale");
      if (a && a.textContent !== ago(age)) { a.textContent = ago(age); }
      if (limit && age > limit && !mark) {
        mark = document.createElement("span");
        mark.className = "stale";
        mark.textContent = "⚠ stale";
        el.append(" · ", mark);
      } else if (limit && mark && age <= limit) {
        if (mark.previousSibling && mark.previousSibling.nodeValue === " · ") { mark.previousSibling.remove(); }
        mark.remove();
      }
    });
  }
  function tick() { countdowns(); ages(); }
  setInterval(tick, 1000);
  tick();

  // Times are written by the gateway with their date and zone; here they
  // are shown in the browser's zone, the date only when it is not today,
  // and the full moment on hover. (A countdown says how long is left.)
  var fmt = { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  function localTimes(root) {
    if (!window.Intl) { return; }
    var now = new Date();
    (root || document).querySelectorAll("time[datetime]:not(.countdown)").forEach((el) => {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) { return; }
      var o = Object.assign({}, fmt);
      if (d.toDateString() !== now.toDateString()) {
        o.day = "numeric"; o.month = "short";
        if (d.getFullYear() !== now.getFullYear()) { o.year = "numeric"; }
      }
      el.textContent = d.toLocaleString(undefined, o);
      el.title = d.toLocaleString(undefined, { dateStyle: "full", timeStyle: "long" });
    });
    var zone = byId("zone");
    if (zone) {
      zone.textContent = "Times are in your zone, " + Intl.DateTimeFormat().resolvedOptions().timeZone + ".";
    }
  }
  localTimes();

  // Forms inside the live part post in place: the answer and its receipt
  // appear where the request was, without leaving the page.
  function showNote(text, isError) {
    var note = document.querySelector("main > p.note");
    if (!note) {
      note = document.createElement("p");
      live.parentNode.insertBefore(note, live);
    }
    note.className = isError ? "note error" : "note";
    note.setAttribute("role", isError ? "alert" : "status");
    note.textContent = isError === true ? "Not done: " + text : text;
    note.scrollIntoView({ block: "nearest" });
  }
  // A note the gateway sent the person back with is said once: a reload
  // or Back does not say it again.
  (() => {
    var q = new URLSearchParams(location.search);
    if (!q.has("note") || !window.history || !history.replaceState) { return; }
    ["note", "sig", "error", "field"].forEach((k) => { q.delete(k); });
    history.replaceState(history.state, "", location.pathname + (q.toString() ? "?" + q : "") + location.hash);
  })();
  // When the session ends (it expires, or the person logs out here or in
  // another tab) the page says so and goes to the login, which brings the
  // person back here; the login page is never drawn inside this one.
  var es = null, ended = false;
  function sessionEnded() {
    if (ended) { return; }
    ended = true;
    if (es) { es.close(); }
    if (relay) { relay.postMessage({ kind: "session_ended" }); }
    if (link) { link.textContent = "session ended"; }
    // Back to this page, without the note of a form answered before.
    var q = new URLSearchParams(location.search);
    ["note", "error", "field"].forEach((k) => { q.delete(k); });
    var here = location.pathname + (q.toString() ? "?" + q : "");
    var next = "/login?next=" + encodeURIComponent(here);
    var p = document.createElement("p");
    p.className = "note error session-ended";
    p.setAttribute("role", "alert");
    p.appendChild(document.createTextNode("Your session has ended. "));
    var a = document.createElement("a");
    a.href = next;
    a.textContent = "Log in again";
    p.appendChild(a);
    var main = byId("main");
    main.insertBefore(p, main.firstChild);
    p.scrollIntoView({ block: "nearest" });
    setTimeout(() => { location.assign(next); }, 1500);
  }
  // isLogin reports whether a response is the login (or says to log in).
  function isLogin(r) { return r.status === 401 || (r.redirected && new URL(r.url).pathname === "/login"); }
  // get asks the gateway for a page's part (or JSON, when json) and
  // gives it, or null; a session that ended ends the page's.
  function get(url, json) {
    return fetch(url, { headers: { "Accept": json ? "application/json" : "text/html" } }).then((r) => {
      if (isLogin(r)) { sessionEnded(); return null; }
      return !r.ok ? null : json ? r.json() : r.text();
    });
  }

  // A form's error goes where the person is: next to the field it is
  // about (or the form's buttons), marked for assistive technology, in
  // view. It is the script's own, and a live update leaves it.
  var errors = 0;
  function clearErrors(f) {
    f.querySelectorAll("p.field-error[data-client]").forEach((p) => { p.remove(); });
    f.querySelectorAll("[aria-invalid]").forEach((el) => {
      el.removeAttribute("aria-invalid");
      var ids = (el.getAttribute("aria-describedby") || "").split(" ").filter((id) => { return id && id.indexOf("form-error-") !== 0; });
      if (ids.length) { el.setAttribute("aria-describedby", ids.join(" ")); } else { el.removeAttribute("aria-describedby"); }
    });
  }
  function showError(f, field, text) {
    clearErrors(f);
    var p = document.createElement("p");
    p.className = "field-error";
    p.id = "form-error-" + (++errors);
    p.setAttribute("role", "alert");
    p.setAttribute("data-client", "");
    p.textContent = "Not done: " + text;
    var el = field ? f.elements.namedItem(field) : null;
    if (el && el.nodeType === 1 && el.type !== "hidden") {
      el.setAttribute("aria-invalid", "true");
      el.setAttribute("aria-describedby", ((el.getAttribute("aria-describedby") || "") + " " + p.id).trim());
      el.parentNode.insertBefore(p, el.nextSibling);
      el.focus({ preventScroll: true });
    } else {
      var buttons = f.querySelector(".buttons") || f.lastElementChild;
      buttons.parentNode.insertBefore(p, buttons.nextSibling);
    }
    p.scrollIntoView({ block: "center" });
  }
  // What came of a form is shown by the form, in view: the person sees
  // it where they tapped. A bad outcome (refused, failed) looks like an
  // error and is said as one. A form in a row of buttons says it under
  // the row, where it stays when the form goes (a run's Cancel).
  function outcomeHost(f) { return f.classList.contains("inline-form") ? f.parentNode : f; }
  function showOutcome(f, text, bad) {
    var host = outcomeHost(f), p = host.querySelector("p.outcome[data-client]");
    if (!p) {
      p = document.createElement("p");
      p.setAttribute("data-client", "");
      host.appendChild(p);
    }
    p.className = bad ? "outcome bad" : "outcome";
    p.setAttribute("role", bad ? "alert" : "status");
    p.textContent = new Date().toLocaleTimeString(undefined, fmt) + ": " + (bad ? "✗ " : "") + text;
    p.scrollIntoView({ block: "nearest" });
    return p;
  }
  document.addEventListener("submit", (e) => {
    var f = e.target;
    if (!live || !byId("main").contains(f) || f.method.toLowerCase() !== "post" || !window.fetch) { return; }
    e.preventDefault();
    var data = new FormData(f);
    if (e.submitter && e.submitter.name) { data.append(e.submitter.name, e.submitter.value); }
    f.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    // Where the outcome goes if the form goes with the update: an
    // approval's card, answered, to the answered card; anything else to
    // the nearest card or item around it that stays.
    var asked = f.closest("[id^='approval-']"), homes = [];
    for (var n = outcomeHost(f).parentNode; n && n !== live && n.id !== "main"; n = n.parentNode) {
      if (/^(ARTICLE|SECTION|LI)$/.test(n.nodeName)) { homes.push(n); }
    }
    fetch(f.action, { method: "POST", body: new URLSearchParams(data) })
      .then((r) => {
        if (isLogin(r)) { sessionEnded(); return; }
        var q = new URL(r.url).searchParams, note = q.get("note"), failed = q.get("error") === "1" || !r.ok, bad = q.get("bad") === "1", p;
        if (failed) {
          note = note || (r.status === 413 ? "the form is too large" : "HTTP " + r.status);
          var old = outcomeHost(f).querySelector("p.outcome[data-client]");
          if (old) { old.remove(); }
          showError(f, q.get("field"), note);
        } else {
          clearErrors(f);
          p = showOutcome(f, note || "Done.", bad);
        }
        f.querySelectorAll("button").forEach((b) => { b.disabled = false; });
        // The form may go with the update. An answer's outcome goes to
        // the answered card, which takes the focus; an error of a form
        // that went (a card another person answered first) is said at
        // the top, as is anything else that has nowhere to go.
        refresh().then(() => {
          if (failed) {
            if (!document.contains(f)) { showNote(note, true); }
            return;
          }
          // The update may have moved it.
          if (document.contains(p)) { p.scrollIntoView({ block: "nearest" }); return; }
          var card = asked && byId("answered-" + asked.id.slice(9));
          var home = card || homes.filter((n) => { return document.contains(n); })[0];
          if (!home) { showNote(p.textContent, bad); return; }
          home.appendChild(p);
          if (card) { card.focus(); }
          p.scrollIntoView({ block: "nearest" });
        });
        scheduleAlarms();
        scheduleStatus();
      })
      .catch(() => {
        showError(f, "", "not sent: the gateway cannot be reached.");
        f.querySelectorAll("button").forEach((b) => { b.disabled = false; });
        refresh();
      });
  });

  // The header's alarm counts: unacknowledged and active, not shelved.
  var badge = byId("alarms-badge");
  var alarmTimer = null;
  function alarmCounts() {
    alarmTimer = null;
    if (!badge || !window.fetch) { return; }
    get("/api/v1/alarms", true)
      .then((body) => {
        if (!body || !body.counts) { return; }
        var c = body.counts;
        byId("alarms-unacked").textContent = c.unacknowledged;
        byId("alarms-active").textContent = c.active;
        badge.className = "alarms-badge " + (c.unacknowledged > 0 ? "loud" : c.active > 0 ? "warn" : "quiet");
      })
      .catch(() => {});
  }
  function scheduleAlarms() { if (!alarmTimer) { alarmTimer = setTimeout(alarmCounts, 150); } }

  // The count of requests waiting, in the navigation, and the banners:
  // a mode that asks nobody, a journal that cannot witness. A journal
  // that fails sends no event, so they are also asked for twice a minute.
  var statusTimer = null;
  function status() {
    statusTimer = null;
    if (!window.fetch || !byId("banners")) { return; }
    get("/status?page=" + encodeURIComponent(body.dataset.page || ""))
      .then((html) => {
        if (html === null || ended) { return; }
        var t = document.createElement("template");
        t.innerHTML = html;
        localTimes(t.content);
        ["banners", "pending-count"].forEach((id) => {
          var now = byId(id), next = t.content.getElementById(id);
          if (now && next) { update(now, next, []); }
        });
      })
      .catch(() => {});
  }
  function scheduleStatus() { if (!statusTimer) { statusTimer = setTimeout(status, 150); } }
  setInterval(scheduleStatus, 30000);

  // A refresh changes only what changed: nodes that match are kept, so a
  // choice made, a reason typed and the focus survive it. A node with an
  // id matches the node with that id; any other matches the node of its
  // kind in its place, or the next one of its kind. What the script added
  // to the page (an error next to a field) is left alone. New cards that
  // ask to be announced are read out, and nothing else: the live part is
  // no aria-live region.
  var announcer = byId("announce");
  function sameKind(a, b) {
    return a.nodeType === b.nodeType && a.nodeName === b.nodeName && !(a.nodeType === 1 && (a.id || b.id));
  }
  function morph(to, from) {
    var want = Array.from(from.childNodes), added = [];
    var at = to.firstChild;
    want.forEach((n) => {
      while (at && at.nodeType === 1 && at.hasAttribute("data-client")) { at = at.nextSibling; }
      var keep = null;
      if (n.nodeType === 1 && n.id) {
        var old = byId(n.id);
        if (old && old.parentNode === to) { keep = old; }
      } else {
        // The node of its kind in its place, or else the next of its
        // kind: a line that went before it (a request answered) does not
        // cost a form below it what a person chose in it.
        for (var m = at; m && !keep; m = m.nextSibling) {
          if (!(m.nodeType === 1 && m.hasAttribute("data-client")) && sameKind(m, n)) { keep = m; }
        }
      }
      if (keep) {
        if (keep !== at) { to.insertBefore(keep, at); } else { at = at.nextSibling; }
        update(keep, n, added);
      } else {
        to.insertBefore(n, at);
        added.push(n);
      }
    });
    while (at) {
      var next = at.nextSibling;
      if (!(at.nodeType === 1 && at.hasAttribute("data-client"))) { to.removeChild(at); }
      at = next;
    }
    return added;
  }
  function update(a, b, added) {
    if (a.nodeType !== 1) {
      if (a.nodeValue !== b.nodeValue) { a.nodeValue = b.nodeValue; }
      return;
    }
    // A control keeps what the script marked on it (aria-invalid, say),
    // and a disclosure the person opened stays open.
    var control = /^(INPUT|SELECT|TEXTAREA)$/.test(a.nodeName);
    Array.from(a.attributes).forEach((at) => {
      if (!b.hasAttribute(at.name) && !control && !(at.name === "open" && a.nodeName === "DETAILS")) { a.removeAttribute(at.name); }
    });
    Array.from(b.attributes).forEach((at) => {
      if (a.getAttribute(at.name) !== at.value) { a.setAttribute(at.name, at.value); }
    });
    if (a.nodeName !== "TEXTAREA") { Array.prototype.push.apply(added, morph(a, b)); }
  }
  function announce(nodes) {
    if (!announcer) { return; }
    var said = [];
    nodes.forEach((n) => {
      if (n.nodeType !== 1) { return; }
      if (n.hasAttribute("data-announce")) { said.push(n.getAttribute("data-announce")); }
      n.querySelectorAll("[data-announce]").forEach((m) => { said.push(m.getAttribute("data-announce")); });
    });
    if (said.length) { announcer.textContent = said.join(" "); }
  }

  var timer = null;
  function refresh() {
    timer = null;
    var url = location.pathname + location.search + (location.search ? "&" : "?") + "fragment=1";
    return get(url)
      .then((html) => {
        if (html === null || !live || ended) { return; }
        var t = document.createElement("template");
        t.innerHTML = html;
        localTimes(t.content);
        announce(morph(live, t.content));
        countdowns();
      })
      .catch(() => {
        if (link && !ended) { link.textContent = "offline"; }
      });
  }
  function schedule(ms) { if (!timer) { timer = setTimeout(refresh, ms || 150); } }

  if (!window.EventSource || !link) { return; }
  // One event stream for the whole browser: the tab that holds the lock
  // holds the stream and passes what it hears to the other tabs. Over
  // HTTP/1.1 a browser keeps six connections a host, and a stream a tab,
  // kept open, would leave a seventh tab waiting. Without locks or
  // broadcast channels, each tab has its own.
  var lastId = "", relay = null, release = null;
  // The kinds any page needs, the same on every page (the gateway's
  // streamKinds; a test keeps them so).
  var streamKinds = ["acted", "alarm", "approval_answered", "approval_expired", "approval_requested", "config_changed", "device_offline", "device_online", "ended", "failed", "link", "mode_changed", "observed", "reconciled", "recovered", "refused", "rule_added", "rule_revoked", "safe_drive", "started"];
  function heard(m) {
    if (m.id) { lastId = m.id; }
    if (m.kind === "session_ended") { sessionEnded(); return; }
    if (ended) { return; }
    if (m.kind === "bye") { link.textContent = "gateway stopped"; return; }
    if (m.status) {
      link.textContent = m.status;
      if (m.status === "live") { scheduleAlarms(); scheduleStatus(); }
      return;
    }
    if (m.kind === "alarm") { scheduleAlarms(); }
    if (/^(approval_|mode_changed$)/.test(m.kind)) { scheduleStatus(); }
    // A reading as it is taken redraws a page that shows readings at
    // most once a second, however fast the sensors are polled.
    if (m.kind === "reading" && kinds.indexOf("observed") >= 0) { schedule(1000); return; }
    if (kinds.indexOf(m.kind) >= 0) { schedule(); }
  }
  function say(m) {
    heard(m);
    if (relay) { relay.postMessage(m); }
  }
  function openStream() {
    es = new EventSource("/api/v1/events/stream" + (lastId ? "?since=" + encodeURIComponent(lastId) : ""));
    es.onopen = () => { say({ status: "live" }); };
    es.onerror = () => {
      if (ended) { return; }
      // A stream refused (a session gone while the page slept, say) is
      // not tried again by the browser: ask the page why.
      if (es.readyState === EventSource.CLOSED) { say({ status: "offline" }); refresh(); } else { say({ status: "reconnecting" }); }
    };
    es.addEventListener("session_ended", () => { say({ kind: "session_ended" }); });
    es.addEventListener("bye", () => { es.close(); say({ kind: "bye" }); });
    streamKinds.forEach((k) => {
      es.addEventListener(k, (e) => { say({ kind: k, id: e.lastEventId }); });
    });
    // A reading as it is taken, before the journal writes it: no id.
    es.addEventListener("reading", () => { say({ kind: "reading" }); });
  }
  var bc = window.BroadcastChannel && navigator.locks ? new BroadcastChannel("shadowgate-stream") : null;
  if (bc) {
    bc.onmessage = (e) => {
      var m = e.data || {};
      if (m.hello) {
        if (relay) { bc.postMessage({ status: link.textContent }); }
        return;
      }
      if (!relay) { heard(m); }
    };
    navigator.locks.request("shadowgate-stream", () => {
      if (ended) { return null; }
      relay = bc;
      openStream();
      return new Promise((r) => { release = r; });
    });
    bc.postMessage({ hello: true });
  } else {
    openStream();
  }
  // Leaving the page ends its stream at once, and another tab takes it
  // over. A page the browser brings back from its cache, or wakes from
  // a freeze, is loaded again, so that nothing it shows is stale.
  function leave() {
    if (es) { es.close(); }
    if (timer) { clearTimeout(timer); timer = null; }
    relay = null;
    if (release) { release(); release = null; }
  }
  window.addEventListener("pagehide", leave);
  document.addEventListener("freeze", leave);
  document.addEventListener("resume", () => { location.reload(); });
  window.addEventListener("pageshow", (e) => { if (e.persisted) { location.reload(); } });
})();
