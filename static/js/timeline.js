// oncetrace timeline: a link to an attempt, an effect or a lane opens the
// group that holds it, scrolls it into view and outlines its lane; a drag
// on the overview zooms (the zoom form does the same without a script).
(function () {
  "use strict";

  // reveal opens the <details> around el, scrolls its lane into view inside
  // the timeline's box and the page, and outlines the lane.
  function reveal(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === "DETAILS" && !p.open) p.open = true;
    }
    var lane = el.closest(".lane") || el.closest(".tl-row") || el;
    var box = lane.closest(".tl-scroll");
    if (box && lane.classList.contains("lane")) {
      var head = box.querySelector(".tl-head");
      var top = lane.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
      box.scrollTop = Math.max(0, top - (head ? head.offsetHeight : 0) - 8);
    }
    if (box) {
      var r = box.getBoundingClientRect();
      if (r.top < 0 || r.bottom > window.innerHeight) box.scrollIntoView({ block: "start" });
    }
    if (lane.classList.contains("lane")) {
      document.querySelectorAll(".lane.tl-target").forEach(function (l) { l.classList.remove("tl-target"); });
      void lane.offsetWidth; // restart the fading outline
      lane.classList.add("tl-target");
    }
    // The bar itself scrolled into the box's visible part sideways too.
    if (box && el !== lane && el.getBoundingClientRect) {
      var er = el.getBoundingClientRect(), br = box.getBoundingClientRect();
      var name = lane.querySelector(".tl-name");
      var left = br.left + (name ? name.offsetWidth : 0);
      if (er.width > 0 && (er.left < left || er.right > br.right)) box.scrollLeft += er.left - left - 40;
    }
    if (el.matches && el.matches(".attempt-link, .effect-link")) el.focus({ preventScroll: true });
  }

  function target(hash) {
    if (!hash || hash.length < 2) return null;
    var el = document.getElementById(decodeURIComponent(hash.slice(1)));
    return el && el.closest(".tl-scroll") ? el : null;
  }

  // Before oncetrace.js's own hashchange listener (capture runs first at
  // the target), so the element it focuses is no longer in a closed group.
  window.addEventListener("hashchange", function () {
    var el = target(location.hash);
    if (el) reveal(el);
  }, true);
  // A click on a link to the hash already in the URL fires no hashchange.
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest('a[href^="#"]');
    if (!a || a.getAttribute("href") !== location.hash) return;
    var el = target(a.getAttribute("href"));
    if (el) { e.preventDefault(); reveal(el); }
  });
  var first = target(location.hash);
  if (first) reveal(first);
  else openAtIncident();

  // openAtIncident: where the timeline is wider than its box (a phone) and
  // the first incident is out of view, it opens scrolled sideways to it:
  // the first culprit outline and the duplicated effects of its step,
  // centred beside the pinned lane names when they fit, else ending at the
  // last of them (the extra effect).
  function openAtIncident() {
    var box = document.querySelector("#timeline .tl-scroll");
    if (!box || box.scrollWidth <= box.clientWidth + 1) return;
    var br = box.getBoundingClientRect(), name = box.querySelector(".tl-name");
    var pinned = name ? name.offsetWidth : 0, view = box.clientWidth - pinned - 16;
    function span(els) {
      var lo = Infinity, hi = -Infinity;
      els.forEach(function (m) {
        var r = m.getBoundingClientRect();
        lo = Math.min(lo, r.left - br.left + box.scrollLeft);
        hi = Math.max(hi, r.right - br.left + box.scrollLeft);
      });
      return { lo: lo, hi: hi };
    }
    var culprits = Array.prototype.slice.call(box.querySelectorAll(".culprit-outline"));
    var first = culprits.sort(function (a, b) { return span([a]).lo - span([b]).lo; })[0];
    var lane = first && first.closest(".lane");
    var dups = Array.prototype.filter.call(box.querySelectorAll(".effect-link[data-state=duplicate]"), function (a) {
      return !lane || a.getAttribute("data-lane") === lane.id;
    });
    var marks = (first ? [first] : []).concat(dups.map(function (a) { return a.querySelector("rect"); }).filter(Boolean));
    if (!marks.length) return;
    var s = span(marks);
    if (s.lo - box.scrollLeft >= pinned && s.hi - box.scrollLeft <= box.clientWidth) return; // in view already
    var x = s.hi - s.lo <= view ? s.lo - pinned - 8 - (view - (s.hi - s.lo)) / 2 : s.hi - pinned - 8 - view;
    box.scrollLeft = Math.max(0, x);
  }

  // An effect in the outbox lane outlines the lane of the step that caused
  // it while hovered or focused.
  function linked(e, on) {
    var a = e.target.closest && e.target.closest(".effect-link[data-lane]");
    if (!a || !a.getAttribute("data-lane")) return;
    var lane = document.getElementById(a.getAttribute("data-lane"));
    if (lane) lane.classList.toggle("tl-linked", on);
  }
  document.addEventListener("mouseover", function (e) { linked(e, true); });
  document.addEventListener("mouseout", function (e) { linked(e, false); });
  document.addEventListener("focusin", function (e) { linked(e, true); });
  document.addEventListener("focusout", function (e) { linked(e, false); });

  // A live page replaces the whole timeline every second: keep the reader's
  // scroll position and the groups they opened or closed across it.
  var kept = { top: 0, left: 0, open: {} };
  document.addEventListener("scroll", function (e) {
    var box = e.target;
    if (box.classList && box.classList.contains("tl-scroll")) { kept.top = box.scrollTop; kept.left = box.scrollLeft; }
  }, true);
  document.addEventListener("toggle", function (e) {
    if (e.target.classList && e.target.classList.contains("tl-group")) kept.open[e.target.id] = e.target.open;
  }, true);
  var current = document.querySelector("#timeline .tl-scroll");
  new MutationObserver(function () {
    var box = document.querySelector("#timeline .tl-scroll");
    if (!box || box === current) return;
    current = box;
    Object.keys(kept.open).forEach(function (id) {
      var g = document.getElementById(id);
      if (g && g.open !== kept.open[id]) g.open = kept.open[id];
    });
    box.scrollTop = kept.top;
    box.scrollLeft = kept.left;
    // The new timeline's "show more" slots load as the old ones did.
    box.querySelectorAll(".tl-more[data-more-slot]").forEach(watch);
  }).observe(document.body, { childList: true, subtree: true });

  // "Show more" links: the page's first answer is bounded, and each such
  // link names a fragment the server renders. Without the script it opens
  // as a page; with it, the fragment's items replace the link's slot. A
  // collapsed group of lanes loads when opened, and lanes load as the
  // reader scrolls to the end of those shown.
  function loadMore(a) {
    var slot = a.closest("[data-more-slot]");
    if (!slot || slot.getAttribute("data-loading")) return;
    slot.setAttribute("data-loading", "1");
    fetch(a.getAttribute("href"), { headers: { "X-Oncetrace-Fragment": "1" } })
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.text(); })
      .then(function (html) {
        var t = document.createElement("template");
        t.innerHTML = html;
        var added = Array.prototype.slice.call(t.content.querySelectorAll("[data-more-slot]"));
        slot.replaceWith(t.content);
        added.forEach(watch);
      })
      .catch(function () { window.location.href = a.getAttribute("href"); });
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[data-more]");
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey || e.button > 0) return;
    e.preventDefault();
    loadMore(a);
  });
  document.addEventListener("toggle", function (e) {
    var g = e.target;
    if (!g.classList || !g.classList.contains("tl-group") || !g.open) return;
    if (g.querySelector(".lane")) return;
    var a = g.querySelector(".tl-more a[data-more]");
    if (a) loadMore(a);
  }, true);
  var seen = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (en) {
      if (!en.isIntersecting) return;
      var g = en.target.closest("details");
      if (g && !g.open) return;
      seen.unobserve(en.target);
      var a = en.target.querySelector("a[data-more]");
      if (a) loadMore(a);
    });
  }, { rootMargin: "400px" }) : null;
  function watch(slot) {
    if (seen && slot.classList.contains("tl-more") && slot.closest(".tl-group") && slot.previousElementSibling && slot.previousElementSibling.classList.contains("lane")) seen.observe(slot);
  }
  document.querySelectorAll(".tl-more[data-more-slot]").forEach(watch);

  // The overview: a drag selects a range and loads ?from=&to= (seconds
  // since the start). data-pieces maps x to time: "x0 x1 ms0 ms1,…".
  var ov = document.querySelector(".tl-overview[data-pieces]");
  if (!ov) return;
  var pieces = ov.getAttribute("data-pieces").split(",").map(function (p) {
    return p.split(" ").map(Number);
  });
  function msAt(x) {
    for (var i = 0; i < pieces.length; i++) {
      var p = pieces[i];
      if (x <= p[1] || i === pieces.length - 1) {
        var f = p[1] > p[0] ? Math.min(Math.max((x - p[0]) / (p[1] - p[0]), 0), 1) : 0;
        return p[2] + f * (p[3] - p[2]);
      }
    }
    return 0;
  }
  function svgX(e) {
    var r = ov.getBoundingClientRect();
    return (e.clientX - r.left) * (ov.viewBox.baseVal.width / r.width);
  }
  var start = null, band = null;
  ov.addEventListener("pointerdown", function (e) {
    start = svgX(e);
    ov.setPointerCapture(e.pointerId);
    band = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    band.setAttribute("class", "ov-drag");
    band.setAttribute("y", "0");
    band.setAttribute("height", ov.viewBox.baseVal.height);
    band.setAttribute("x", start);
    band.setAttribute("width", "0");
    ov.appendChild(band);
  });
  ov.addEventListener("pointermove", function (e) {
    if (start === null) return;
    var x = svgX(e);
    band.setAttribute("x", Math.min(start, x));
    band.setAttribute("width", Math.abs(x - start));
  });
  ov.addEventListener("pointerup", function (e) {
    if (start === null) return;
    var x = svgX(e), a = Math.min(start, x), b = Math.max(start, x);
    start = null;
    band.remove();
    if (b - a < 3) return; // a click, not a drag
    var q = new URLSearchParams(location.search);
    q.set("from", (msAt(a) / 1000).toFixed(3));
    q.set("to", (msAt(b) / 1000).toFixed(3));
    location.href = location.pathname + "?" + q.toString() + "#timeline";
  });
})();
