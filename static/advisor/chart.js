// Draw the flowchart with the vendored Mermaid (static/vendor/mermaid, no CDN). Without
// JavaScript the drawing stays hidden and the page lists the chart's steps in words.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.mermaid) return;
    var figure = document.getElementById("chart-drawing");
    if (figure) figure.hidden = false;
    window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
    window.mermaid.run({ querySelector: ".mermaid" });
  });
})();
