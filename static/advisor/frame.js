// Inside the intranet frame: tell the host page how tall the advisor is, so it can size the
// iframe. Messages go only to the origins allowed to frame us (EMBED_ALLOWED_ORIGINS):
// postMessage drops a message whose targetOrigin does not match the parent.
(function () {
  "use strict";
  if (window.parent === window) return;
  var data = document.getElementById("embed-origins");
  var origins = data ? JSON.parse(data.textContent) : [];
  var last = 0;

  function report() {
    var height = Math.ceil(document.documentElement.scrollHeight);
    if (height === last) return;
    last = height;
    origins.forEach(function (origin) {
      window.parent.postMessage({ type: "allocation-triage:resize", height: height }, origin);
    });
  }

  window.addEventListener("load", report);
  document.addEventListener("htmx:afterSettle", report);
  document.addEventListener("toggle", report, true);
  if (window.ResizeObserver) new ResizeObserver(report).observe(document.body);
})();
