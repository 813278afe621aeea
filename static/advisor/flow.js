// Focus and copy helpers for the advisor flow. The pages work without this file.
(function () {
  "use strict";

  function focusStep(root) {
    // After a swap: the first error message if there is one, else the question's heading.
    var error = root.querySelector(".errorlist");
    if (error) {
      error.setAttribute("tabindex", "-1");
      error.focus();
      return;
    }
    var heading = root.querySelector("h2[tabindex='-1']");
    if (heading) heading.focus();
  }

  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    var step = document.getElementById("advisor-step");
    if (step && (target === step || (target && target.id === "advisor-step"))) focusStep(step);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var step = document.getElementById("advisor-step");
    if (step && step.querySelector(".errorlist")) focusStep(step);
    document.querySelectorAll(".copy-button").forEach(function (button) {
      if (!navigator.clipboard) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        var source = document.getElementById(button.dataset.copyTarget);
        var status = button.parentElement.querySelector(".copy-status");
        navigator.clipboard.writeText(source.textContent).then(function () {
          if (status) status.textContent = "Copied to the clipboard.";
        }, function () {
          if (status) status.textContent = "Could not copy: select the script and copy it by hand.";
        });
      });
    });
  });
})();
