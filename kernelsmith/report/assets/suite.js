// The suite report: summary metrics, per-level metrics, a bar per task, the per-task table.
"use strict";

var SUITE = readData();
// What AMSR is (kernelsmith/suite/metrics.py, as Kernel-Smith reports it).
var AMSR_MEANS = "AMSR: the mean speedup over all tasks, a failed task or a speedup below 1\u00d7 counting as 0 " +
  "(as Kernel-Smith reports it)";

function kindOf(r) {
  if (r.status === "correct") return r.flags.length ? "flagged" : "correct";
  return {incorrect: "incorrect", compile_error: "compile", runtime_error: "runtime", timeout: "runtime"}[r.status] || "none";
}

function renderSummary() {
  var sm = SUITE.summary;
  document.getElementById("title").textContent = SUITE.title;
  document.getElementById("subtitle").textContent = (SUITE.runs_dir ? "runs " + SUITE.runs_dir + " \u00b7 " : "") +
    "solutions " + SUITE.solutions + " \u00b7 " + SUITE.device + (SUITE.gpu_name ? " \u00b7 " + SUITE.gpu_name : "") +
    (SUITE.speedup_note ? " \u00b7 speedups: " + SUITE.speedup_note : "");
  append(clear(document.getElementById("headline")), [
    h("div", null, h("h3", null, "Correct"), h("div", {class: "big"}, fmtPct(sm.correct_rate)),
      h("div", {class: "note"}, sm.correct + " of " + sm.tasks + " tasks (flagged ones count as failures)")),
    h("div", null, h("h3", null, "Geomean speedup"), h("div", {class: "big"}, fmtX(sm.geomean_speedup)),
      h("div", {class: "note"}, "over the correct tasks; vs torch.compile " + fmtX(sm.geomean_speedup_vs_compile))),
    h("div", null, h("h3", {title: AMSR_MEANS}, "AMSR"), h("div", {class: "big"}, fmt(sm.amsr, 3)),
      h("div", {class: "note"}, "vs torch.compile " + fmt(sm.amsr_vs_compile, 3)),
      h("div", {class: "note", id: "amsr-means"}, AMSR_MEANS))]);
  var keys = Object.keys(sm.fast_p).sort(function (a, b) { return parseFloat(a) - parseFloat(b); });
  var fp = h("table", {class: "data compact", id: "fast-p"}, h("thead", null, h("tr", null, h("th", null, "threshold p"),
    h("th", null, "fast_p vs eager"), h("th", null, "fast_p vs torch.compile"))), h("tbody", null, keys.map(function (k) {
    return h("tr", null, h("td", null, "fast_" + k), h("td", {class: "num"}, fmtPct(sm.fast_p[k])),
      h("td", {class: "num"}, k in sm.fast_p_vs_compile ? fmtPct(sm.fast_p_vs_compile[k]) : "\u2014"));
  })));
  append(clear(document.getElementById("fastp")), fp);
  var levels = Object.keys(SUITE.levels), box = clear(document.getElementById("levels"));
  if (!levels.length) { box.appendChild(h("p", {class: "note"}, "No KernelBench levels in this suite.")); return; }
  box.appendChild(h("table", {class: "data compact", id: "level-table"}, h("thead", null, h("tr", null,
    ["level", "tasks", "correct", "fast_1", "AMSR", "geomean"].map(function (c) {
      return h("th", {title: c === "AMSR" ? AMSR_MEANS : null}, c);
    }))),
    h("tbody", null, levels.map(function (lv) {
      var m = SUITE.levels[lv];
      return h("tr", null, h("td", null, lv), h("td", {class: "num"}, m.tasks), h("td", {class: "num"}, fmtPct(m.correct_rate)),
        h("td", {class: "num"}, fmtPct(m.fast_p["1"])), h("td", {class: "num"}, fmt(m.amsr, 3)), h("td", {class: "num"}, fmtX(m.geomean_speedup)));
    }))));
}

// One row per task; bars start at 1x on a log scale: right when faster than eager, left when slower.
function renderChart() {
  var svg = document.getElementById("suite-chart"), rows = SUITE.rows;
  var W = 820, L = 260, R = 70, T = 24, row = 18, H = T + Math.max(rows.length, 1) * row + 26;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("width", W); svg.setAttribute("height", H);
  var sp = rows.filter(function (r) { return isNum(r.speedup) && r.speedup > 0; }).map(function (r) { return r.speedup; });
  // The axis runs from a round tick at or below the slowest task to one at or above the fastest
  // (a CPU run's 0.0003x included), never narrower than 0.5x-2x.
  var xt = logTicks(Math.min.apply(null, sp.concat([0.5])), Math.max.apply(null, sp.concat([2])));
  var lo = xt[0], hi = xt[xt.length - 1];
  function X(v) { return L + (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) * (W - L - R); }
  xt.forEach(function (v) {
    svg.appendChild(s("line", {class: v === 1 ? "ref" : "grid", x1: X(v), y1: T - 4, x2: X(v), y2: H - 22}));
    svg.appendChild(s("text", {class: "tick", x: X(v), y: H - 8, "text-anchor": "middle"}, v + "\u00d7"));
  });
  svg.appendChild(s("text", {class: "label", x: X(1), y: 12, "text-anchor": "middle"}, "speedup vs eager (log scale)"));
  if (!rows.length) {
    svg.appendChild(s("text", {class: "empty-note", x: (L + W - R) / 2, y: T + 14, "text-anchor": "middle"}, "no tasks"));
    return;
  }
  rows.forEach(function (r, i) {
    var y = T + i * row, k = kindOf(r), tip = r.task + ": " + r.status + (isNum(r.speedup) ? ", " + fmtX(r.speedup) : "") +
      (r.flags.length ? ", flags: " + r.flags.join(", ") : "") + (r.error ? "\n" + r.error : "");
    svg.appendChild(s("text", {class: "bar-label", x: L - 6, y: y + row / 2 + 3, "text-anchor": "end"},
      r.task.length > 42 ? "\u2026" + r.task.slice(-41) : r.task));
    if (isNum(r.speedup) && r.speedup > 0 && (k === "correct" || k === "flagged")) {
      var a = X(1), b = X(r.speedup);
      svg.appendChild(s("rect", {class: "bar k-" + k, x: Math.min(a, b), y: y + 3, width: Math.max(Math.abs(b - a), 1.5),
        height: row - 6, "data-task": r.task}, s("title", null, tip)));
      svg.appendChild(s("text", {class: "tick", x: Math.max(a, b) + 4, y: y + row / 2 + 3}, fmtX(r.speedup)));
    } else {
      svg.appendChild(s("text", {class: "bar k-" + k, x: X(1) + 4, y: y + row / 2 + 4, "data-task": r.task},
        "\u2716 " + r.status, s("title", null, tip)));
    }
  });
}

// evolve-suite: each task's starting program against the best its search found, linked to its run report.
function renderSearches() {
  var table = document.getElementById("search-table");
  if (!table) return;
  var bench = {};
  SUITE.rows.forEach(function (r) { bench[r.task] = r; });
  var cols = ["task", "iterations", "stop reason", "seed", "best found", "gain", "best, evaluated afresh", "note"];
  table.tHead.appendChild(h("tr", null, cols.map(function (c) { return h("th", null, c); })));
  SUITE.searches.forEach(function (t) {
    var seed = t.seed, best = t.best, b = bench[t.task];
    var seedX = seed && seed.status === "correct" && isNum(seed.speedup) ? seed.speedup : null;
    var bestX = best && isNum(best.speedup) ? best.speedup : null;
    var gain = seedX !== null && bestX !== null && seedX > 0 ? bestX / seedX : null;
    var name = t.report ? h("a", {href: t.report, class: "run-link"}, t.task) : t.task;
    table.tBodies[0].appendChild(h("tr", {"data-task": t.task}, cell(name, t.task),
      cell(isNum(t.iterations_done) ? String(t.iterations_done) : "\u2014", t.iterations_done, {class: "num"}),
      cell(t.stop_reason || "\u2014", t.stop_reason),
      cell(seedX !== null ? fmtX(seedX) : seed ? seed.status : "\u2014", seedX, {class: "num seed"}),
      cell(best ? fmtX(bestX) + " (#" + best.program_id + ", iteration " + best.iteration + ")" :
        isNum(t.iterations_done) ? "none correct" : "\u2014", bestX,
        {class: "num best"}),
      cell(fmtX(gain), gain, {class: "num gain"}),
      cell(!b ? "\u2014" : b.status !== "correct" ? b.status : fmtX(b.speedup) + (b.flags.length ? " (flagged)" : ""),
        b ? b.speedup : null, {class: "num"}),
      cell(t.note || "", t.note, {class: "note"})));
  });
  makeSortable(table);
}

function renderTable() {
  var table = document.getElementById("suite-table");
  var cols = ["task", "level", "status", "speedup", "vs compile", "roofline", "candidate ms", "reference ms", "flags", "error"];
  table.tHead.appendChild(h("tr", null, cols.map(function (c) { return h("th", null, c); })));
  SUITE.rows.forEach(function (r) {
    table.tBodies[0].appendChild(h("tr", null, cell(r.task, r.task), cell(r.level || "\u2014", r.level),
      cell(h("span", {class: "status k-" + kindOf(r)}, r.status), r.status),
      cell(fmtX(r.speedup), r.speedup, {class: "num"}), cell(fmtX(r.speedup_vs_compile), r.speedup_vs_compile, {class: "num"}),
      cell(fmtPct(r.roofline_fraction), r.roofline_fraction, {class: "num"}),
      cell(fmt(r.candidate_ms, 4), r.candidate_ms, {class: "num"}), cell(fmt(r.reference_ms, 4), r.reference_ms, {class: "num"}),
      cell(r.flags.join(", "), r.flags.join(",")), cell(r.error || "", r.error, {class: "err"})));
  });
  makeSortable(table);
  var sk = clear(document.getElementById("skipped"));
  if (SUITE.skipped.length) sk.appendChild(h("p", {class: "note"}, "Not tasks (skipped): " + SUITE.skipped.join(", ")));
}

renderSummary();
renderSearches();
renderChart();
renderTable();
