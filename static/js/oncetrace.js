// oncetrace: the only script. Pages work without it; it adds the time
// zone toggle and the execution page's detail panel.
(function () {
  "use strict";

  // Times are rendered by the server in the zone the oncetrace_tz cookie
  // names (UTC without it), each followed by its zone's name; the toggle
  // stores "utc" or the browser's IANA zone and reloads. Nothing here
  // rewrites a time, so no time is ever converted twice.
  var tz = document.getElementById("tz-toggle");
  if (tz) {
    var browserZone = "";
    try { browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { /* no Intl */ }
    if (browserZone) {
      tz.hidden = false;
      tz.title = tz.getAttribute("data-zone") === "UTC" ? "Show times in " + browserZone : "Show times in UTC";
      tz.addEventListener("click", function () {
        var next = tz.getAttribute("data-zone") === "UTC" ? browserZone : "utc";
        // IANA names are cookie-safe as they are; the server reads them verbatim.
        if (!/^[A-Za-z0-9_+\/-]+$/.test(next)) next = "utc";
        document.cookie = "oncetrace_tz=" + next + "; path=/; max-age=31536000; samesite=lax";
        location.reload();
      });
    }
  }

  // The detail panel: clicking or keyboard-focusing an attempt or effect
  // fetches its detail, rendered by the server, and shows it beside the
  // timeline. Without the script the same link opens the detail's page.
  // On a narrow screen the panel is a bottom sheet (the stylesheet's
  // media query, repeated here): it opens on click only, takes the focus,
  // and gives it back to the link when closed by its button or Escape.
  var panel = document.getElementById("detail");
  var body = document.getElementById("detail-body");
  var closeButton = panel && panel.querySelector(".detail-close");
  var narrow = window.matchMedia("(max-width: 1260px)");
  var shown = null;
  // Each show numbered: only the latest one's answer is drawn. Setting the
  // hash fires popstate, then hashchange; the second show (which takes the
  // focus on a sheet) must not be overtaken by the first's answer.
  var showing = 0;
  var closing = false; // giving the focus back must not reopen the detail
  function isSheet() { return narrow.matches; }
  function select(link) {
    document.querySelectorAll(".selected").forEach(function (el) { el.classList.remove("selected"); });
    link.classList.add("selected");
  }
  function show(link, takeFocus) {
    if (!panel || !body || !link || link === shown) return;
    shown = link;
    select(link);
    var mine = ++showing;
    fetch(link.getAttribute("href"), { headers: { "X-Oncetrace-Fragment": "1" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        if (shown !== link || mine !== showing) return;
        var doc = new DOMParser().parseFromString(html, "text/html");
        body.replaceChildren.apply(body, Array.from(doc.body.childNodes));
        panel.classList.add("open");
        panel.scrollTop = 0;
        if (takeFocus) {
          panel.focus({ preventScroll: true });
          keepAboveSheet(link);
        }
      })
      .catch(function () { window.location.href = link.getAttribute("href"); });
  }
  // The sheet covers the bottom of the screen: scroll the clicked link
  // into the part still visible.
  function keepAboveSheet(link) {
    var r = link.getBoundingClientRect();
    var top = window.innerHeight - panel.getBoundingClientRect().height;
    if (r.bottom > top - 8) window.scrollBy(0, r.bottom - top + 16);
    else if (r.top < 0) window.scrollBy(0, r.top - 16);
  }
  function close() {
    if (!panel || !panel.classList.contains("open")) return;
    panel.classList.remove("open");
    var back = shown;
    shown = null;
    if (back && document.contains(back)) {
      closing = true;
      back.focus({ preventScroll: true });
      closing = false;
    }
  }
  if (closeButton) {
    closeButton.hidden = false;
    closeButton.addEventListener("click", close);
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && isSheet() && panel && panel.classList.contains("open")) {
      e.preventDefault();
      close();
    }
  });
  var detailLinks = ".attempt-link, .effect-link, .step-detail-link";
  // The URL names the selected attempt or effect (views/selection.go):
  // ?step=&n= or ?provider=&effect=, and its bar's anchor, so that a reload
  // or a shared link opens the same detail. A click adds a history entry;
  // Tab and a finding's link only update the current one.
  function selectionURL(link) {
    var from = new URL(link.getAttribute("href"), location.href).searchParams;
    var u = new URL(location.href);
    ["step", "n", "provider", "effect"].forEach(function (p) { u.searchParams.delete(p); });
    // In the order Go's url.Values writes them, so that the URL reads as
    // the server's own links to a selection (views.SelectAttemptURL).
    if (from.has("n")) {
      u.searchParams.set("n", from.get("n"));
      u.searchParams.set("step", from.get("step") || "");
    } else if (from.has("provider")) {
      u.searchParams.set("effect", from.get("id") || "");
      u.searchParams.set("provider", from.get("provider"));
    } else {
      return null;
    }
    u.hash = link.id ? "#" + link.id : "";
    return u.href;
  }
  function remember(link, push) {
    var u = selectionURL(link);
    if (!u || u === location.href) return;
    history[push ? "pushState" : "replaceState"](null, "", u);
  }
  // The server rendered the URL's selection into the panel already.
  var preselected = panel && panel.getAttribute("data-selected");
  if (preselected && document.getElementById(preselected)) {
    shown = document.getElementById(preselected);
    select(shown);
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest(detailLinks);
    if (!link || !panel) return;
    if (e.ctrlKey || e.metaKey || e.shiftKey || e.button > 0) return; // a new tab gets the page
    e.preventDefault();
    shown = null;
    show(link, isSheet());
    remember(link, true);
  });
  // Tabbing through the bars opens each beside the timeline; a sheet would
  // cover the page at every Tab, so there a link opens on Enter (a click).
  document.addEventListener("focusin", function (e) {
    var link = e.target.closest && e.target.closest(detailLinks);
    if (link && !closing && !isSheet()) {
      show(link, false);
      remember(link, false);
    }
  });
  // Back and Forward select what the URL then names.
  window.addEventListener("popstate", function () {
    var el = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (el && el.matches(detailLinks)) show(el, false);
  });
  // A finding's link to #attempt-… focuses that attempt, which opens it
  // beside the timeline; on a narrow screen it opens the sheet, since the
  // reader asked for that attempt.
  function focusHash() {
    if (!location.hash) return;
    var el = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!el || !el.matches(detailLinks)) return;
    el.focus();
    // Shown here, not only through focusin: a page that does not have the
    // window's focus gets no focus events.
    if (isSheet()) shown = null;
    show(el, isSheet());
    remember(el, false);
  }
  window.addEventListener("hashchange", focusHash);
  focusHash();

  // Copy buttons (views/ids.templ, views/selection.templ), shown by the
  // stylesheet once this script has marked the page: data-copy is copied
  // as it is, data-copy-url as an absolute URL. Beside an id cut in the
  // middle, the button also opens the whole id in place (a tap has no
  // hover and no focus to show it).
  document.documentElement.classList.add("js");
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return copyBySelection(text); });
    }
    return copyBySelection(text);
  }
  // The older way, for a page served over plain HTTP on another host
  // (no navigator.clipboard) or a browser that refused it.
  function copyBySelection(text) {
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { /* refused */ }
      area.remove();
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest(".copy-button");
    if (!b) return;
    var text = b.hasAttribute("data-copy-url") ? new URL(b.getAttribute("data-copy-url"), location.href).href : b.getAttribute("data-copy");
    var prev = b.previousElementSibling;
    var sid = prev && prev.querySelector(".sid");
    if (sid) sid.classList.add("sid-open");
    copyText(text).then(function () {
      b.classList.add("copied");
      b.setAttribute("data-copied", text);
      setTimeout(function () { b.classList.remove("copied"); }, 1500);
    }, function () { b.setAttribute("data-copied", ""); });
  });

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
        if (opened) { retry(); return; }
        // Refused before it opened: the browser shows no status or reason
        // for a refused handshake, so ask the server whether this page's
        // origin may connect; if not, say why and stop retrying.
        fetch("/api/v1/live/origin?origin=" + encodeURIComponent(location.origin), { credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (v) {
            if (v && v.allowed === false) { onState(v.reason, true); return; }
            retry();
          }, retry);
      };
    }
    function retry() {
      setTimeout(open, delay);
      delay = Math.min(delay * 2, 10000);
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
        if (old && next) old.replaceWith(next);
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
    }, function (state, refused) {
      if (refused) { status.textContent = state; status.setAttribute("data-refused", ""); pause.hidden = true; return; }
      if (!paused) status.textContent = state;
    });
  }
})();
