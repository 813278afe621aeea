// Inside the intranet frame: tell the host page how tall the advisor is, so it can size the
// iframe both ways, and where the current question is, so it can bring it into view. Messages
// go only to the origins allowed to frame us (EMBED_ALLOWED_ORIGINS): postMessage drops a
// message whose targetOrigin does not match the parent.
(function () {
  "use strict";
  if (window.parent === window) return;
  var data = document.getElementById("embed-origins");
  var origins = data ? JSON.parse(data.textContent) : [];
  var last = 0;

  function send(message) {
    origins.forEach(function (origin) {
      window.parent.postMessage(message, origin);
    });
  }

  function contentHeight() {
    // Not documentElement.scrollHeight: inside an iframe it is never less than the frame's
    // own height, so the frame could grow but never shrink. The body's box is the content.
    var body = document.body;
    var style = window.getComputedStyle(body);
    var height = body.getBoundingClientRect().height +
      parseFloat(style.marginTop || "0") + parseFloat(style.marginBottom || "0");
    return Math.ceil(height);
  }

  function report() {
    var height = contentHeight();
    if (height === last) return;
    last = height;
    send({ type: "allocation-triage:resize", height: height });
  }

  function reveal() {
    // The question (or the result's heading, or the page) the researcher should see now.
    var target = document.getElementById("advisor-step") ||
      document.getElementById("result-heading") || document.querySelector("main");
    if (!target) return;
    report();
    var top = target.getBoundingClientRect().top + window.scrollY;
    send({ type: "allocation-triage:reveal", top: Math.max(0, Math.floor(top)) });
  }

  function cameFromInsideTheFrame() {
    // A page reached by a link or form inside the frame (Change, Start again, a posted answer)
    // has this site as its referrer; the first page in the frame has the intranet's.
    try {
      return document.referrer !== "" &&
        new URL(document.referrer).origin === window.location.origin;
    } catch (e) {
      return false;
    }
  }

  window.addEventListener("load", function () {
    report();
    if (cameFromInsideTheFrame()) reveal();
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    if (target && (target.id === "advisor-step" || target.tagName === "MAIN")) reveal();
    else report();
  });
  document.addEventListener("toggle", report, true);
  if (window.ResizeObserver) new ResizeObserver(report).observe(document.body);
})();
