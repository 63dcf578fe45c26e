// t2s-studio: small behaviours shared by all pages (no framework; htmx does the live parts).
(function () {
  function highlight(root) {
    if (!window.hljs) return;
    root.querySelectorAll("code.language-sql:not(.hljs)").forEach(function (el) { window.hljs.highlightElement(el); });
  }
  document.addEventListener("DOMContentLoaded", function () { highlight(document); });
  document.addEventListener("htmx:afterSwap", function (e) { highlight(e.target); });
  // <select data-autosubmit> submits its form when changed (the CSP refuses inline onchange= handlers).
  document.addEventListener("change", function (e) {
    var field = e.target.closest("[data-autosubmit]");
    if (field && field.form) field.form.submit();
  });
  document.addEventListener("click", function (e) {
    var button = e.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.innerText).then(function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1200);
    });
  });
})();
