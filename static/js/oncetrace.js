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
})();
