// Review page keyboard: 1-9 toggle a category, n next question, u undo the last label action.
// Buttons are re-rendered by htmx after each toggle, so they are looked up at each key press.
(function () {
  "use strict";
  const undo = [];

  function buttonFor(key) {
    return document.querySelector('#label-buttons button.label-toggle[data-key="' + key + '"]');
  }

  // A button swapped in a moment ago may not be wired by htmx yet; process it first (idempotent).
  function press(button) {
    if (window.htmx) {
      window.htmx.process(button);
    }
    button.click();
  }

  // The note is saved by its own debounced request; leaving the page first saves a change not yet sent.
  const note = document.getElementById("label-note");
  let noteDirty = false;
  if (note) {
    note.addEventListener("input", function () { noteDirty = true; });
    document.body.addEventListener("htmx:afterRequest", function (event) {
      if (event.detail.elt === note && event.detail.successful) {
        noteDirty = false;
      }
    });
  }

  // Moving on: save a pending note, give the question back (its reservation), then navigate.
  function go(link) {
    const href = link.href;
    let chain = Promise.resolve();
    if (note && noteDirty && window.htmx) {
      chain = chain.then(function () {
        return window.htmx.ajax("POST", note.getAttribute("hx-post"), {source: note, target: "#note-status", swap: "innerHTML"});
      });
    }
    if (link.dataset.leave && window.htmx) {
      chain = chain.then(function () {
        return window.htmx.ajax("POST", link.dataset.leave, {source: link, swap: "none"});
      });
    }
    chain.catch(function () {}).then(function () { window.location.href = href; });
  }

  document.addEventListener("click", function (event) {
    const link = event.target.closest && event.target.closest("#next-link");
    if (link && !event.ctrlKey && !event.metaKey && !event.shiftKey) {
      event.preventDefault();
      go(link);
    }
  });

  function typing(target) {
    const tag = (target && target.tagName) || "";
    return tag === "TEXTAREA" || tag === "INPUT" || tag === "SELECT" || (target && target.isContentEditable);
  }

  // Every toggle (mouse or keyboard) is remembered, so "u" can press the same button again.
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button.label-toggle");
    if (button && !button.disabled && !button.dataset.undoing) {
      undo.push(button.dataset.key);
    }
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) {
      return;
    }
    if (event.key >= "1" && event.key <= "9") {
      const button = document.querySelector('#label-buttons button.label-toggle[data-shortcut="' + event.key + '"]');
      if (button && !button.disabled) {
        event.preventDefault();
        press(button);
      }
    } else if (event.key === "n") {
      const next = document.getElementById("next-link");
      if (next) {
        event.preventDefault();
        go(next);
      }
    } else if (event.key === "u") {
      const key = undo.pop();
      const button = key && buttonFor(key);
      if (button && !button.disabled) {
        event.preventDefault();
        button.dataset.undoing = "1";
        press(button);
      }
    }
  });
})();

// Dashboard charts (vendored Chart.js); each bar links to the questions behind it.
(function () {
  "use strict";
  const source = document.getElementById("chart-data");
  if (!source || typeof window.Chart === "undefined") {
    return;
  }
  const data = JSON.parse(source.textContent);
  document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
    const chart = data[canvas.dataset.chart];
    if (!chart) {
      return;
    }
    new window.Chart(canvas, {
      type: "bar",
      data: {labels: chart.labels, datasets: [{label: chart.unit, data: chart.values, backgroundColor: "#1f6feb"}]},
      options: {
        maintainAspectRatio: false,
        plugins: {legend: {display: false}},
        onClick: function (_event, elements) {
          if (elements.length) {
            window.location.href = chart.urls[elements[0].index];
          }
        },
        onHover: function (event, elements) {
          event.native.target.style.cursor = elements.length ? "pointer" : "default";
        },
      },
    });
  });
})();
