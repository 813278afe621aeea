/*
 * Allocation Triage intranet embed. Paste one line where the advisor should appear:
 *
 *   <script src="https://ADVISOR-HOST/static/advisor/embed.js" data-allocation-triage async></script>
 *
 * It puts an iframe of https://ADVISOR-HOST/embed/ after the script tag, resizes it to its
 * content (taller and shorter) and, after each step inside it, scrolls this page so the current
 * question is in view. Messages are accepted only from the advisor's own origin and from that
 * iframe. The advisor must list this page's origin in EMBED_ALLOWED_ORIGINS, or the browser
 * refuses to draw it (Content-Security-Policy frame-ancestors).
 */
(function () {
  "use strict";
  var script = document.currentScript ||
    document.querySelector("script[data-allocation-triage]");
  if (!script) return;
  var advisorOrigin = new URL(script.src, window.location.href).origin;
  var path = script.getAttribute("data-path") || "/embed/";
  var frame = document.createElement("iframe");
  frame.src = advisorOrigin + path;
  frame.title = script.getAttribute("data-title") || "GPU allocation advisor";
  frame.style.width = "100%";
  frame.style.border = "0";
  frame.style.minHeight = (script.getAttribute("data-min-height") || "480") + "px";
  frame.setAttribute("loading", "lazy");
  frame.className = "allocation-triage-frame";
  script.parentNode.insertBefore(frame, script.nextSibling);

  window.addEventListener("message", function (event) {
    if (event.origin !== advisorOrigin || event.source !== frame.contentWindow) return;
    var data = event.data;
    if (!data) return;
    if (data.type === "allocation-triage:resize") {
      // Both ways: the frame shrinks when its content does ("Start again", a shorter step).
      var height = Number(data.height);
      if (isFinite(height) && height > 0 && height < 100000) {
        frame.style.height = Math.ceil(height) + "px";
      }
    } else if (data.type === "allocation-triage:reveal") {
      // After a step inside the frame: bring the current question into view on this page,
      // unless it is already there.
      var offset = Number(data.top);
      if (!isFinite(offset) || offset < 0 || offset > 100000) return;
      var top = frame.getBoundingClientRect().top + offset;
      if (top < 0 || top > window.innerHeight - 80) {
        window.scrollTo({ top: Math.max(0, window.scrollY + top - 16), behavior: "auto" });
      }
    }
  });
})();
