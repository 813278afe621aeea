// Draw the flowchart with the vendored Mermaid (static/vendor/mermaid, no CDN).
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.mermaid) return;
    window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral" });
    window.mermaid.run({ querySelector: ".mermaid" });
  });
})();
