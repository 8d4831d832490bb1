// The run report: overview, best-so-far chart, lineage tree, archive grids, diffs, program table.
"use strict";

var RUN = readData();
var BY_ID = {};
RUN.programs.forEach(function (p) { BY_ID[p.id] = p; });
var KIND_NAMES = {correct: "correct", flagged: "correct, flagged", incorrect: "incorrect",
  compile: "compile error", runtime: "runtime error / timeout", none: "rejected / no program"};

function programTitle(p) {
  var t = "#" + p.id + " \u00b7 iteration " + p.iteration + " \u00b7 " + p.operator + " \u00b7 " + p.status;
  if (isNum(p.speedup)) t += " \u00b7 " + fmtX(p.speedup) + " vs eager";
  if (p.flags.length) t += " \u00b7 flags: " + p.flags.join(", ");
  if (p.error_line) t += "\n" + p.error_line;
  return t;
}

function linkTo(id) {
  if (id === null || id === undefined) return "\u2014";
  return h("a", {href: "#", class: "plink", "data-id": id, onclick: function (e) { e.preventDefault(); select(id); }},
    "#" + id);
}

// ---- overview
function renderOverview() {
  var sum = RUN.summary, cfg = RUN.config, best = BY_ID[RUN.best_id];
  document.getElementById("title").textContent = "kernelsmith run: " + (RUN.task_name || "(unknown task)");
  document.getElementById("subtitle").textContent = RUN.run_dir + (RUN.speedup_note ? " \u00b7 speedups: " + RUN.speedup_note : "");
  var bestBox = clear(document.getElementById("best"));
  if (best) {
    append(bestBox, [h("div", {class: "big", id: "best-speedup"}, fmtX(best.speedup)), h("div", null, "vs eager PyTorch"),
      h("div", {class: "mid", id: "best-vs-compile"}, fmtX(best.speedup_vs_compile)), h("div", null, "vs torch.compile"),
      h("div", {class: "note"}, "program ", linkTo(best.id), " (iteration " + best.iteration + ", " + best.operator + ")")]);
  } else {
    append(bestBox, h("div", {class: "big", id: "best-speedup"}, "none"), h("div", null, "no correct program"));
  }
  var counts = clear(document.getElementById("status-counts"));
  var tb = h("tbody");
  Object.keys(RUN.status_counts).forEach(function (st) {
    tb.appendChild(h("tr", null, h("td", null, st), h("td", {class: "num"}, fmtInt(RUN.status_counts[st]))));
  });
  tb.appendChild(h("tr", {class: "total"}, h("td", null, "programs"), h("td", {class: "num"}, fmtInt(RUN.programs.length))));
  counts.appendChild(h("table", {class: "kv"}, tb));
  var t = RUN.totals;
  append(clear(document.getElementById("usage")), h("table", {class: "kv"}, h("tbody", null,
    h("tr", null, h("td", null, "prompt tokens"), h("td", {class: "num"}, fmtInt(t.prompt_tokens))),
    h("tr", null, h("td", null, "completion tokens"), h("td", {class: "num"}, fmtInt(t.completion_tokens))),
    h("tr", null, h("td", null, "cost"), h("td", {class: "num"}, "$" + fmt(t.cost, 4))))));
  var rows = [];
  if (sum) {
    rows.push(["iterations asked", sum.iterations_asked], ["iterations done", sum.iterations_done],
      ["stop reason", sum.stop_reason], ["elapsed", isNum(sum.elapsed_s) ? fmt(sum.elapsed_s, 1) + " s" : null]);
  } else {
    rows.push(["summary", "no summary.json yet (the run has not ended)"]);
  }
  if (cfg) {
    var ops = Object.keys(cfg.operators).filter(function (k) { return cfg.operators[k] > 0; })
      .map(function (k) { return k + " " + cfg.operators[k]; });
    rows.push(["config iterations", cfg.iterations], ["mutator", cfg.mutator], ["operators", ops.join(", ")],
      ["in flight", cfg.max_in_flight], ["device", cfg.device], ["max cost", cfg.max_cost], ["max tokens", cfg.max_tokens],
      ["time limit", cfg.time_limit], ["early stop", cfg.early_stop]);
  }
  var bt = h("tbody");
  rows.forEach(function (r) {
    if (r[1] !== null && r[1] !== undefined) bt.appendChild(h("tr", null, h("td", null, r[0]), h("td", null, String(r[1]))));
  });
  append(clear(document.getElementById("budget")), h("table", {class: "kv"}, bt));
  var task = clear(document.getElementById("task"));
  append(task, h("p", null, h("b", null, RUN.task_name || "(unknown task)")));
  if (RUN.task_source) task.appendChild(h("details", null, h("summary", null, "task source"), h("pre", {class: "code"}, RUN.task_source)));
}

// ---- best speedup so far
function renderChart() {
  var svg = document.getElementById("chart-best");
  document.getElementById("chart-noise").textContent = RUN.noise_note;
  var W = 760, H = 300, R = 20, T = 16, B = 44;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  var pts = RUN.programs.filter(function (p) { return (p.kind === "correct" || p.kind === "flagged") && isNum(p.speedup); });
  var its = RUN.programs.map(function (p) { return p.iteration; });
  var x0 = Math.min.apply(null, its.concat([0])), x1 = Math.max.apply(null, its.concat([1]));
  // Keep 1x (as fast as eager) in view unless every speedup is far below it (a CPU run).
  var top = Math.max.apply(null, pts.map(function (p) { return p.speedup; }).concat([0]));
  var ymax = (top > 0 && top < 0.6 ? top : Math.max(top, 1)) * 1.12;
  var yt = ticks(0, ymax, 5), ytLabels = yt.map(function (v) { return fmtTick(v, yt[1] - yt[0]); });
  // The plot starts right of the widest tick label, and the axis title left of it: a CPU run's
  // ticks (0.0008) are twice as wide as a GPU run's (1.5).
  var titleX = 14, L = titleX + 8 + textWidth(svg, ytLabels, "tick") + 6;
  function X(v) { return L + (v - x0) / (x1 - x0) * (W - L - R); }
  function Y(v) { return H - B - v / ymax * (H - T - B); }
  svg.appendChild(s("line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}));
  svg.appendChild(s("line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}));
  yt.forEach(function (v, i) {
    svg.appendChild(s("line", {class: "grid", x1: L, y1: Y(v), x2: W - R, y2: Y(v)}));
    svg.appendChild(s("text", {class: "tick", x: L - 6, y: Y(v) + 4, "text-anchor": "end"}, ytLabels[i]));
  });
  ticks(x0, x1, 8).filter(function (v) { return v === Math.round(v); }).forEach(function (v) {
    svg.appendChild(s("text", {class: "tick", x: X(v), y: H - B + 16, "text-anchor": "middle"}, String(v)));
  });
  svg.appendChild(s("text", {class: "label", x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle"}, "iteration"));
  svg.appendChild(s("text", {class: "label", transform: "translate(" + titleX + "," + (H - B + T) / 2 + ") rotate(-90)", "text-anchor": "middle"},
    "speedup vs eager"));
  if (ymax >= 1) svg.appendChild(s("line", {class: "ref", x1: L, y1: Y(1), x2: W - R, y2: Y(1)}, s("title", null, "1\u00d7: as fast as eager PyTorch")));
  if (!pts.length) {
    svg.appendChild(s("text", {class: "empty-note", id: "chart-empty", x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle"},
      "no correct program yet: nothing to plot"));
    return;
  }
  var best = RUN.best_so_far, d = "";
  best.forEach(function (b, i) {
    d += (i === 0 ? "M" + X(b[0]) + "," + Y(b[1]) : "H" + X(b[0]) + "V" + Y(b[1]));
  });
  if (best.length) d += "H" + X(x1);
  if (d) svg.appendChild(s("path", {class: "best-line", id: "best-line", d: d}, s("title", null, "best speedup so far")));
  pts.forEach(function (p) {
    svg.appendChild(s("circle", {class: "pt k-" + p.kind, cx: X(p.iteration), cy: Y(p.speedup), r: 4.5, "data-id": p.id,
      onclick: function () { select(p.id); }}, s("title", null, programTitle(p))));
  });
}

// ---- lineage: one layer per depth, one column per program in stored order
function renderLineage() {
  var svg = document.getElementById("lineage"), ps = RUN.programs, n = ps.length;
  var dx = Math.max(14, Math.min(64, 860 / Math.max(n - 1, 1))), dy = 56, pad = 24;
  var r = Math.max(4, Math.min(9, dx / 2.6));
  var depth = Math.max.apply(null, ps.map(function (p) { return p.depth; }).concat([0]));
  var W = Math.max(pad * 2 + Math.max(n - 1, 0) * dx, 200), H = pad * 2 + depth * dy + 14;
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  if (!n) svg.appendChild(s("text", {class: "empty-note", x: pad, y: pad}, "no program stored yet"));
  var pos = {};
  ps.forEach(function (p, i) { pos[p.id] = [pad + i * dx, pad + p.depth * dy]; });
  var edges = s("g", {class: "edges"}), nodes = s("g", {class: "nodes"});
  ps.forEach(function (p) {
    var a = pos[p.parent_id], b = pos[p.id];
    if (!a) return;
    var my = (a[1] + b[1]) / 2;
    edges.appendChild(s("path", {class: "edge", "data-from": p.parent_id, "data-to": p.id,
      d: "M" + a[0] + "," + a[1] + "C" + a[0] + "," + my + " " + b[0] + "," + my + " " + b[0] + "," + b[1]}));
  });
  ps.forEach(function (p) {
    var g = s("g", {class: "lnode", "data-id": p.id, onclick: function () { select(p.id); }},
      s("title", null, programTitle(p)),
      s("circle", {class: "node k-" + p.kind + (p.id === RUN.best_id ? " best" : ""), cx: pos[p.id][0], cy: pos[p.id][1], r: r}));
    if (dx >= 26) g.appendChild(s("text", {class: "nlabel", x: pos[p.id][0], y: pos[p.id][1] + r + 11, "text-anchor": "middle"}, String(p.id)));
    nodes.appendChild(g);
  });
  svg.appendChild(edges); svg.appendChild(nodes);
  var legend = clear(document.getElementById("legend"));
  Object.keys(KIND_NAMES).forEach(function (k) {
    legend.appendChild(h("span", {class: "key"}, h("span", {class: "swatch k-" + k}), KIND_NAMES[k]));
  });
}

// ---- the archive: one grid per island
function renderArchive() {
  var box = clear(document.getElementById("archive-grid")), A = RUN.archive;
  if (!A) { box.appendChild(h("p", {class: "note"}, RUN.config_error || "no archive")); return; }
  var maxScore = 0;
  A.islands.forEach(function (isl) { isl.cells.forEach(function (c) { if (c.ok) maxScore = Math.max(maxScore, c.score); }); });
  function label(f, b) { var l = A.labels[f][b]; return l === null ? "bin " + b : l; }
  var colNames = A.columns.map(function (col) {
    return col.length ? col.map(function (b, j) { return A.features[j + 1] + " " + label(j + 1, b); }).join(" \u00b7 ") : "\u2014";
  });
  box.appendChild(h("p", {class: "note"}, "Cells: the elite (best program) of each descriptor bin; rows: " + A.features[0] +
    "; " + A.migrations + " migration(s). The number in a cell is the elite's score, what the search ranks programs by."));
  A.islands.forEach(function (isl) {
    var at = {};
    isl.cells.forEach(function (c) { at[c.cell.join(",")] = c; });
    var head = h("tr", null, h("th", {class: "corner"}, A.features[0]), colNames.map(function (n) { return h("th", null, n); }));
    var body = h("tbody");
    A.rows.forEach(function (rb) {
      var tr = h("tr", null, h("th", null, label(0, rb)));
      A.columns.forEach(function (col) {
        var c = at[[rb].concat(col).join(",")];
        if (!c) { tr.appendChild(h("td", {class: "empty"})); return; }
        var p = BY_ID[c.id], light = c.ok && maxScore > 0 ? 88 - 48 * (c.score / maxScore) : 93;
        tr.appendChild(h("td", {class: "cell" + (c.ok ? " ok" : " miss") + (light < 60 ? " dark" : ""), "data-id": c.id,
          style: "background: hsl(" + (c.ok ? 140 : 0) + "," + (c.ok ? 55 : 0) + "%," + light.toFixed(0) + "%)",
          title: p ? programTitle(p) : "#" + c.id, onclick: function () { select(c.id); }},
          h("div", {class: "cid"}, "#" + c.id), h("div", {class: "cscore"}, fmtSig(c.score, 3))));
      });
      body.appendChild(tr);
    });
    box.appendChild(h("div", {class: "island"}, h("h3", null, "island " + isl.island + " (" + isl.members + " programs)"),
      h("table", {class: "grid"}, h("thead", null, head), body)));
  });
}

// ---- the best program and its diffs
function renderBest() {
  var box = clear(document.getElementById("best-code")), best = BY_ID[RUN.best_id];
  if (!best) { box.appendChild(h("p", {class: "note"}, "No correct program: no best kernel to show.")); return; }
  box.appendChild(h("details", null, h("summary", null, "code of program #" + best.id), h("pre", {class: "code"}, best.code || "")));
  RUN.diffs.forEach(function (d) {
    var pre = h("pre", {class: "diff"});
    d.lines.forEach(function (l) { pre.appendChild(h("span", {class: "d-" + l[0]}, l[1])); });
    if (!d.lines.length) pre.appendChild(h("span", {class: "d-ctx"}, "(identical)"));
    box.appendChild(h("h3", null, d.title)); box.appendChild(pre);
  });
}

// ---- where the time goes: one horizontal bar per kernel, every program on the same scale
function renderProfiles() {
  var box = clear(document.getElementById("profiles"));
  if (!RUN.profiles.length) {
    box.appendChild(h("p", {class: "note"}, "No kernel breakdown: it is recorded for correct programs on CUDA."));
    return;
  }
  var top = Math.max.apply(null, RUN.profiles.map(function (v) {
    return Math.max.apply(null, v.kernels.map(function (k) { return k.ms; }).concat([0]));
  }).concat([1e-9]));
  RUN.profiles.forEach(function (v) {
    var W = 820, L = 350, R = 160, row = 20, H = v.kernels.length * row + 8;
    var svg = s("svg", {class: "profile", "data-id": v.id, width: W, height: H, role: "img",
      "aria-label": "device time per kernel of program " + v.id});
    v.kernels.forEach(function (k, i) {
      var y = 4 + i * row, w = Math.max(1, k.ms / top * (W - L - R));
      var label = k.name.length > 44 ? k.name.slice(0, 43) + "\u2026" : k.name;
      svg.appendChild(s("text", {x: L - 6, y: y + 13, "text-anchor": "end", class: "plabel"}, label));
      svg.appendChild(s("rect", {x: L, y: y + 2, width: w, height: row - 6, class: "pbar " + (k.own ? "own" : "library")},
        s("title", null, k.full + "\n" + (k.own ? "own kernel" : "library kernel") + ", " + fmt(k.calls, 3) + " launches per call")));
      svg.appendChild(s("text", {x: L + w + 6, y: y + 13, class: "pvalue"}, fmt(k.ms, 4) + " ms \u00b7 " + fmtPct(k.share)));
    });
    var head = v.title + ": " + (isNum(v.kernel_ms) ? fmt(v.kernel_ms, 4) + " ms of kernels" : "")
      + (isNum(v.candidate_ms) ? " in a measured " + fmt(v.candidate_ms, 4) + " ms" : "");
    append(box, [h("h3", null, head), svg]);
    if (v.counters.length) {  // Nsight Compute on the heaviest kernels (profiled programs)
      var t = h("table", {class: "counters", "data-id": v.id});
      t.appendChild(h("tr", null, ["kernel", "launches", "bottleneck", "counters"].map(function (c) { return h("th", null, c); })));
      v.counters.forEach(function (c) {
        t.appendChild(h("tr", null, h("td", {title: c.full}, c.name), h("td", {class: "num"}, String(c.launches)),
          h("td", {class: "bottleneck"}, c.bottleneck), h("td", null, c.counters)));
      });
      append(box, [t]);
    } else if (v.counters_note) {
      append(box, [h("p", {class: "note counters-note"}, v.counters_note)]);
    }
  });
  append(box, [h("p", {class: "legend"}, h("span", {class: "swatch own"}), " own kernel ",
    h("span", {class: "swatch library"}), " library kernel")]);
}

// ---- every program
function renderTable() {
  var table = document.getElementById("programs");
  var cols = ["id", "iteration", "island", "operator", "parent", "status", "speedup", "vs compile", "flags", "error"];
  table.tHead.appendChild(h("tr", null, cols.map(function (c) { return h("th", null, c); })));
  var body = table.tBodies[0];
  RUN.programs.forEach(function (p) {
    body.appendChild(h("tr", {"data-id": p.id, onclick: function (e) { if (e.target.tagName !== "A") select(p.id); }},
      cell(String(p.id), p.id), cell(String(p.iteration), p.iteration), cell(String(p.island), p.island),
      cell(p.operator, p.operator), cell(linkTo(p.parent_id), p.parent_id),
      cell(h("span", {class: "status k-" + p.kind}, p.status), p.status),
      cell(fmtX(p.speedup), p.speedup, {class: "num"}), cell(fmtX(p.speedup_vs_compile), p.speedup_vs_compile, {class: "num"}),
      cell(p.flags.join(", "), p.flags.join(",")), cell(p.error_line, p.error_line, {class: "err"})));
  });
  makeSortable(table);
}

// ---- the detail panel
function select(id) {
  var p = BY_ID[id];
  if (!p) return;
  Array.prototype.forEach.call(document.querySelectorAll(".selected"), function (n) { n.classList.remove("selected"); });
  Array.prototype.forEach.call(document.querySelectorAll('[data-id="' + id + '"]'), function (n) {
    if (!n.classList.contains("plink")) n.classList.add("selected");
  });
  var d = clear(document.getElementById("detail"));
  var rows = [["status", h("span", {class: "status k-" + p.kind}, p.status)], ["speedup vs eager", fmtX(p.speedup)],
    ["vs torch.compile", fmtX(p.speedup_vs_compile)], ["runtime", isNum(p.candidate_ms) ? fmt(p.candidate_ms, 4) + " ms" : null],
    ["score", fmtSig(p.score, 3)], ["iteration", p.iteration], ["island", p.island], ["operator", p.operator], ["model", p.model],
    ["parent", linkTo(p.parent_id)], ["inspirations", p.inspiration_ids.length ? p.inspiration_ids.map(linkTo) : null],
    ["flags", p.flags.join(", ") || null], ["tokens", fmtInt(p.prompt_tokens) + " + " + fmtInt(p.completion_tokens)],
    ["cost", "$" + fmt(p.cost, 5)], ["latency", isNum(p.latency_s) ? fmt(p.latency_s, 2) + " s" : null],
    ["descriptors", Object.keys(p.descriptors).map(function (k) { return k + "=" + p.descriptors[k]; }).join(", ") || null]];
  var tb = h("tbody");
  rows.forEach(function (r) { if (r[1] !== null && r[1] !== undefined) tb.appendChild(h("tr", null, h("td", null, r[0]), h("td", null, r[1]))); });
  append(d, [h("h3", {id: "detail-title"}, "program #" + p.id + (p.id === RUN.best_id ? " (best)" : "")), h("table", {class: "kv"}, tb)]);
  if (p.error) d.appendChild(h("div", null, h("h4", null, "error"), h("pre", {class: "error", id: "detail-error"}, p.error)));
  if (p.code) d.appendChild(h("details", null, h("summary", null, "code"), h("pre", {class: "code"}, p.code)));
  if (p.response) d.appendChild(h("details", null, h("summary", null, "LLM reply"), h("pre", {class: "code"}, p.response)));
}

renderOverview();
renderChart();
renderLineage();
renderArchive();
renderBest();
renderProfiles();
renderTable();
if (RUN.programs.length) select(RUN.best_id !== null ? RUN.best_id : RUN.programs[RUN.programs.length - 1].id);
