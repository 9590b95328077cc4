// Switchboard console: live regions over Server-Sent Events, expand and
// collapse for document sections, and confirmation prompts. Everything
// works without it except live updates.
(function () {
  "use strict";

  // Live regions: the server sends the region's HTML (rendered and escaped
  // by its templates) whenever it changes.
  function openDetails(root) {
    var open = {};
    root.querySelectorAll("details[id]").forEach(function (d) { open[d.id] = d.open; });
    return open;
  }
  function restoreDetails(root, open) {
    root.querySelectorAll("details[id]").forEach(function (d) {
      if (Object.prototype.hasOwnProperty.call(open, d.id)) d.open = open[d.id];
    });
  }
  function setStatus(text, off) {
    document.querySelectorAll("[data-live-status]").forEach(function (el) {
      el.textContent = text;
      el.classList.toggle("off", !!off);
    });
  }
  document.querySelectorAll("[data-live]").forEach(function (region) {
    var src = region.getAttribute("data-live");
    if (!src || !window.EventSource) return;
    var es = new EventSource(src);
    es.addEventListener("update", function (ev) {
      var open = openDetails(region);
      var focused = document.activeElement && document.activeElement.id;
      region.setAttribute("aria-busy", "true");
      region.innerHTML = ev.data;
      restoreDetails(region, open);
      region.setAttribute("aria-busy", "false");
      if (focused) {
        var again = document.getElementById(focused);
        if (again) again.focus();
      }
      region.dispatchEvent(new CustomEvent("console:updated"));
      setStatus("live updates on", false);
    });
    es.addEventListener("end", function () {
      es.close();
      setStatus("signed out: live updates stopped", true);
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) setStatus("live updates stopped (reload the page)", true);
      else setStatus("reconnecting…", true);
    };
  });

  // Expand / collapse every section inside a container.
  document.addEventListener("click", function (ev) {
    var t = ev.target;
    if (!(t instanceof Element)) return;
    var sel = t.getAttribute("data-expand") || t.getAttribute("data-collapse");
    if (!sel) return;
    var open = t.hasAttribute("data-expand");
    var box = document.querySelector(sel);
    if (box) box.querySelectorAll("details").forEach(function (d) { d.open = open; });
  });

  // Forms with data-confirm ask first.
  document.addEventListener("submit", function (ev) {
    var f = ev.target;
    if (f instanceof HTMLFormElement && f.hasAttribute("data-confirm") && !window.confirm(f.getAttribute("data-confirm"))) {
      ev.preventDefault();
    }
  });
})();
