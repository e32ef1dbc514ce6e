// oncetrace: the only script. Pages work without it; it adds local times
// and the execution page's detail panel.
(function () {
  "use strict";

  // Times arrive in UTC; show them in the browser's zone, UTC on hover.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      el.textContent = d.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3,
      });
    });
  }

  // The detail panel: clicking or keyboard-focusing an attempt or effect
  // fetches its detail, rendered by the server, and shows it beside the
  // timeline. Without the script the same link opens the detail's page.
  var panel = document.getElementById("detail");
  var shown = null;
  function show(link) {
    if (!panel || !link || link === shown) return;
    shown = link;
    document.querySelectorAll(".selected").forEach(function (el) { el.classList.remove("selected"); });
    link.classList.add("selected");
    fetch(link.getAttribute("href"), { headers: { "X-Oncetrace-Fragment": "1" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        if (shown !== link) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        panel.replaceChildren.apply(panel, Array.from(doc.body.childNodes));
        localTimes(panel);
      })
      .catch(function () { window.location.href = link.getAttribute("href"); });
  }
  var detailLinks = ".attempt-link, .effect-link";
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest(detailLinks);
    if (!link || !panel) return;
    e.preventDefault();
    shown = null;
    show(link);
  });
  document.addEventListener("focusin", function (e) {
    var link = e.target.closest && e.target.closest(detailLinks);
    if (link) show(link);
  });
  // A finding's link to #attempt-… focuses that attempt, which opens it.
  function focusHash() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (el && el.matches(detailLinks)) el.focus();
  }
  window.addEventListener("hashchange", focusHash);
  localTimes(document);
  focusHash();

  // Live parts. The server renders every fragment with the components the
  // page itself uses; this only puts the HTML in place.
  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }
  function socketURL(path) {
    return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path;
  }
  // connect opens a WebSocket and reopens it after a drop; url() is asked
  // each time so a resume can name the last sequence seen. The delay
  // doubles (0.5 s to 10 s) while the server keeps dropping the page for
  // being too slow (close code 4000) soon after it opens, so that a server
  // under load is not reconnected to by every page twice a second; any
  // other close, or a drop after a good while, starts again at 0.5 s.
  function connect(url, onMessage, onState) {
    var delay = 500;
    function open() {
      var ws = new WebSocket(socketURL(url()));
      var ended = false;
      var opened = 0;
      ws.onopen = function () { opened = Date.now(); onState("live"); };
      ws.onmessage = function (e) {
        var m = JSON.parse(e.data);
        if (m.type === "end") { ended = true; onState("ended"); return; }
        if (m.type === "dropped") { onState(m.reason); return; }
        onMessage(m);
      };
      ws.onclose = function (e) {
        if (ended || e.code === 1000) { onState("ended"); return; }
        onState(e.reason || "disconnected — reconnecting");
        if (opened && (e.code !== 4000 || Date.now() - opened > 30000)) delay = 500;
        setTimeout(open, delay);
        delay = Math.min(delay * 2, 10000);
      };
    }
    open();
  }

  // A running execution's page: fragments replace themselves by id.
  var live = document.getElementById("live-execution");
  if (live) {
    connect(function () { return live.getAttribute("data-live-url"); }, function (m) {
      if (m.type !== "html") return;
      Object.keys(m.fragments || {}).forEach(function (id) {
        var old = document.getElementById(id);
        var next = fragment(m.fragments[id]);
        if (old && next) { old.replaceWith(next); localTimes(next); }
      });
      if (shown && shown.id) { // keep the selected attempt marked
        var again = document.getElementById(shown.id);
        if (again) { again.classList.add("selected"); shown = again; }
      }
    }, function () {});
  }

  // The live tail: newest first, capped, with pause and resume.
  var rows = document.getElementById("live-rows");
  if (rows) {
    var cap = parseInt(rows.getAttribute("data-cap"), 10) || 200;
    var base = rows.getAttribute("data-live-url");
    var lastSeq = parseInt(new URLSearchParams(base.split("?")[1]).get("after"), 10) || 0;
    var paused = false, held = [];
    var status = document.getElementById("live-status");
    var pause = document.getElementById("live-pause");
    pause.hidden = false;
    function insert(m) {
      var row = fragment(m.fragments.row);
      if (!row) return;
      localTimes(row);
      rows.insertBefore(row, rows.firstChild);
      while (rows.children.length > cap) rows.removeChild(rows.lastChild);
      var empty = document.getElementById("live-empty");
      if (empty) empty.remove();
    }
    pause.addEventListener("click", function () {
      paused = !paused;
      pause.textContent = paused ? "Resume" : "Pause";
      if (!paused) { held.forEach(insert); held = []; }
      status.textContent = paused ? "paused" : "live";
    });
    connect(function () {
      var u = new URL(base, location.href);
      u.searchParams.set("after", String(lastSeq));
      return u.pathname + u.search;
    }, function (m) {
      if (m.type === "event") lastSeq = Math.max(lastSeq, m.seq);
      if (!m.fragments || !m.fragments.row) return;
      if (paused) { held.push(m); held = held.slice(-cap); status.textContent = "paused, " + held.length + " new"; return; }
      insert(m);
    }, function (state) { if (!paused) status.textContent = state; });
  }
})();
