// The question explorer's index (kgir_lib/book/pages.py): its filters hide the rows that do not match.
(function () {
  "use strict";
  function apply() {
    var table = document.getElementById("kg-index");
    if (!table) { return; }
    var want = {};
    document.querySelectorAll("#kg-filters select").forEach(function (s) { want[s.dataset.filter] = s.value; });
    var shown = 0, rows = table.querySelectorAll("tr[data-run]");
    rows.forEach(function (tr) {
      var ok = (!want["run"] || tr.dataset.run === want["run"]) &&
        (!want["dataset"] || tr.dataset.dataset === want["dataset"]) &&
        (!want["broke at"] || tr.dataset.broke === want["broke at"]) &&
        (!want["right"] || tr.dataset.right.split("|").indexOf(want["right"]) >= 0);
      tr.style.display = ok ? "" : "none";
      if (ok) { shown += 1; }
    });
    var count = document.getElementById("kg-count");
    if (count) { count.textContent = shown + " of " + rows.length + " questions"; }
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("#kg-filters select").forEach(function (s) { s.addEventListener("change", apply); });
    apply();
  });
}());
