// The page of `kernelsmith optimize`: outcome, where the forward's time went before and after, the model's
// time per mode with the prediction beside it, and every region.
"use strict";

var OPT = readData();
var PATCH = OPT.patch || {kernels: {}, times: [], modes: [], capture_times: [], prediction: null, passed: false, reason: ""};

function spanText(sp, digits) {
  if (!sp) return "\u2014";
  return fmtSig(sp.median, digits || 4) + " ms (" + fmtSig(sp.low, digits || 4) + "\u2013" + fmtSig(sp.high, digits || 4) + ")";
}

// A spread's bound: an infinite one is "inf", as the terminal writes it (optimize.json: "Infinity")
function bound(x) {
  return x === "Infinity" || x === Infinity ? "inf\u00d7" : fmtX(x);
}

// A fraction of a floor as the terminal writes it (kernelsmith/evaluate/measuring/roofline.py, fraction)
function fmtFloor(x) {
  if (!isNum(x)) return "\u2014";
  return x >= 0.1 ? (100 * x).toFixed(0) + "%" : Number((100 * x).toPrecision(2)) + "%";
}

// Before and after the patch, where both were measured
function floorText(before, after) {
  return fmtFloor(before) + (isNum(after) ? " \u2192 " + fmtFloor(after) : "");
}

// The eager forward in capture's measure: what the shares are of, before and after.
function eagerTime() {
  return PATCH.times.filter(function (t) { return t.mode === "eager" && t.measure === OPT.measure; })[0] || null;
}

function renderHeader() {
  document.getElementById("title").textContent = "kernelsmith optimize: " + OPT.entry;
  document.getElementById("subtitle").textContent = OPT.device + " \u00b7 work directory " + OPT.out +
    (OPT.speedup_note ? " \u00b7 speedups: " + OPT.speedup_note : "");
  var t = eagerTime(), searched = OPT.regions.filter(function (r) { return r.searched; });
  var inPatch = searched.filter(function (r) { return r.kernel && r.kernel.in_patch; });
  var p = PATCH.prediction;
  append(clear(document.getElementById("headline")), [
    h("div", {id: "card-patch"}, h("h3", null, "Patch"),
      h("div", {class: "big"}, OPT.patch && OPT.patch.path ? (PATCH.passed ? "passed" : "failed") : "none"),
      h("div", {class: "note"}, OPT.patch_name ? OPT.patch_name + ": its end-to-end check" : "no patch was written")),
    h("div", {id: "card-forward"}, h("h3", null, "Forward, eager (" + (OPT.measure || "time") + ")"),
      h("div", {class: "big"}, t ? fmtX(t.speedup) : "\u2014"),
      h("div", {class: "note"}, t ? spanText(t.before_ms) + " \u2192 " + spanText(t.after_ms) : "not measured"),
      // a prediction that cannot be compared with the measurement is no headline (it says so below)
      p && p.agreement !== "cannot tell" ? h("div", {class: "note"}, "predicted " + fmtX(p.speedup) + " from the verdicts") :
        null),
    h("div", {id: "card-regions"}, h("h3", null, "Regions"),
      h("div", {class: "big"}, inPatch.length + " / " + searched.length),
      h("div", {class: "note"}, "kernels in the patch, of the regions searched (" + OPT.regions.length + " captured)")),
    h("div", {id: "card-budget"}, h("h3", null, "Budget"), h("div", {class: "big"}, OPT.said.budget),
      h("div", {class: "note"}, "searched " + OPT.said.searched + " over every run (" + OPT.said.this_run + " this run)" +
        (OPT.slots > 1 ? ", " + OPT.slots + " regions at once" : "") +
        (isNum(OPT.capture_s) ? "; capture " + OPT.said.capture : "")))]);
  document.getElementById("verdict").textContent = OPT.reason;
  document.getElementById("too-small").textContent = OPT.too_small || "";
}

// Each row: [label, before share, after share or null, how the after was found, its text]. optimize's own rows
// (kernelsmith/optimize/breakdown.py: one measure, rows that add up to the whole), as shares of the whole before.
function timeRows() {
  var rows = OPT.time_rows || [], whole = rows.length ? rows[rows.length - 1].before : 0, ms = OPT.time_unit === "ms";
  function text(v) { return ms ? fmtSig(v, 3) + " ms" : fmtPct(v); }
  return rows.map(function (r) {
    var after = isNum(r.after) && whole > 0 ? r.after / whole : null;
    var said = text(r.before) + " \u2192 " + (isNum(r.after) ? text(r.after) : "\u2014") + " (" + r.how + ")";
    return [r.label, whole > 0 ? r.before / whole : 0, after, r.how, said];
  });
}

function renderTimeChart() {
  var svg = document.getElementById("time-chart"), rows = timeRows();
  var W = 980, L = 320, R = 200, T = 22, row = 30, H = T + rows.length * row + 10;
  var hi = Math.max.apply(null, rows.map(function (r) { return Math.max(r[1], isNum(r[2]) ? r[2] : 0); }).concat([0.01]));
  function X(v) { return L + v / hi * (W - L - R); }
  svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("width", W); svg.setAttribute("height", H);
  svg.appendChild(s("text", {class: "label", x: L, y: 12}, "share of the original forward: before (grey), after (green)"));
  rows.forEach(function (r, i) {
    var y = T + i * row;
    svg.appendChild(s("text", {class: "plabel", x: L - 8, y: y + 17, "text-anchor": "end"},
      r[0].length > 46 ? "\u2026" + r[0].slice(-45) : r[0], s("title", null, r[0])));
    svg.appendChild(s("rect", {class: "pbar library before", x: L, y: y + 3, width: Math.max(X(Math.max(r[1], 0)) - L, 1),
      height: 10, "data-row": r[0]}));
    if (isNum(r[2])) {
      svg.appendChild(s("rect", {class: "pbar own after", x: L, y: y + 14, width: Math.max(X(Math.max(r[2], 0)) - L, 1), height: 10,
        "data-row": r[0]}));
    }
    svg.appendChild(s("text", {class: "pvalue", x: Math.max(X(r[1]), isNum(r[2]) ? X(r[2]) : 0) + 6, y: y + 17}, r[4]));
  });
}

function agreementText(kind) {
  return kind === "agrees" ? "they agree within the spreads" : kind === "disagrees" ? "they disagree beyond the spreads" :
    "cannot tell: a spread is too wide to compare";
}

function renderModes() {
  var table = document.getElementById("mode-table");
  var cols = ["mode", "measure", "before", "after", "speedup", "of its speed of light", ""];
  table.tHead.appendChild(h("tr", null, cols.map(function (c) { return h("th", null, c); })));
  if (!PATCH.times.length) {
    table.tBodies[0].appendChild(h("tr", null, h("td", {colspan: 7, class: "note"}, "no patched forward was measured")));
  }
  PATCH.times.forEach(function (t) {
    var rel = t.measure.indexOf("CPU") === 0 ? "relative only (CPU)" : "";
    table.tBodies[0].appendChild(h("tr", {"data-mode": t.mode}, cell(t.mode, t.mode), cell(t.measure, t.measure),
      cell(spanText(t.before_ms), t.before_ms.median, {class: "num"}), cell(spanText(t.after_ms), t.after_ms.median, {class: "num"}),
      cell(fmtX(t.speedup), t.speedup, {class: "num"}),
      cell(floorText(t.of_floor_before, t.of_floor_after), t.of_floor_after, {class: "num of-floor"}),
      cell([t.within_noise ? "within noise" : "", rel].filter(Boolean).join("; "), null, {class: "note"})));
  });
  // The floor every "of its speed of light" is of (capture's; on the CPU, no card and no floor)
  document.getElementById("speed-of-light").textContent = OPT.speed_of_light ? OPT.speed_of_light.said : "";
  // Each mode as the patch serves it: with the kernels that make it faster, or the model as it was, and why.
  document.getElementById("served").textContent = (PATCH.modes || []).length ? "Served: " +
    PATCH.modes.map(function (m) { return m.said; }).join("; ") : "";
  var p = PATCH.prediction;
  document.getElementById("prediction").textContent = p ? "Eager " + p.measure + ": predicted " + fmtX(p.speedup) +
    " (" + bound(p.low) + "\u2013" + bound(p.high) + ") from the verdicts over " + fmtPct(p.covered) + " of the forward; measured " +
    fmtX(p.measured) + " (" + bound(p.measured_low) + "\u2013" + bound(p.measured_high) + "): " + agreementText(p.agreement) :
    "No prediction: no kernel of the patch took its regions in an eager forward measured as capture measured it.";
  document.getElementById("capture-times").textContent = PATCH.capture_times.length ? "Capture's original forward against the " +
    "check's: " + PATCH.capture_times.map(function (c) {
      return c.measure + " " + spanText(c.capture_ms) + " against " + spanText(c.here_ms) + " (" + c.agreement + ")";
    }).join("; ") : "";
}

// As the terminal's table says it (optimize's own text), with how it ended
function searchText(r) {
  return r.searched ? OPT.said.search[r.name] || "\u2014" : "\u2014";
}

function patchText(r) {
  var k = r.kernel;
  if (!k) return "\u2014";
  if (!k.in_patch) return "not in the patch";
  if (k.served_by) return "served by " + k.served_by;
  if (k.modes && !k.modes.length && Object.keys(k.left_out || {}).length) return "serves no mode";
  var modes = Object.keys(k.taken).filter(function (m) { return !k.modes || k.modes.indexOf(m) >= 0; });
  return modes.length ? modes.map(function (m) { return m + ": " + fmtSig(k.taken[m], 3) + " per forward"; }).join(", ") :
    "in the patch";
}

function renderRegions() {
  var table = document.getElementById("region-table");
  var cols = ["rank", "region", "share", "of SoL", "calls", "start", "search", "kernel", "start's", "in the patch", "note"];
  table.tHead.appendChild(h("tr", null, cols.map(function (c) { return h("th", null, c); })));
  OPT.regions.forEach(function (r) {
    var name = r.run_report ? h("a", {href: r.run_report, class: "run-link"}, r.name) : r.name;
    var range = r.share_range.length === 2 ? " (" + fmtPct(r.share_range[0]) + "\u2013" + fmtPct(r.share_range[1]) + ")" : "";
    var kernel = isNum(r.speedup) ? fmtX(r.speedup) + " (#" + r.program + ")" : r.verdict || "\u2014";
    table.tBodies[0].appendChild(h("tr", {"data-region": r.name, class: r.searched ? "searched" : "not-searched"},
      cell(String(r.rank), r.rank, {class: "num"}), cell(name, r.name), cell(fmtPct(r.share) + range, r.share, {class: "num"}),
      cell(floorText(r.of_floor, r.of_floor_after), r.of_floor, {class: "num of-floor"}),
      cell(String(r.calls), r.calls, {class: "num"}), cell(r.start || "\u2014", r.start),
      cell(searchText(r), r.iterations, {class: "search"}), cell(kernel, r.speedup, {class: "num kernel"}),
      cell(fmtX(r.start_speedup), r.start_speedup, {class: "num"}), cell(patchText(r), null, {class: "in-patch"}),
      cell(r.note || "", r.note, {class: "note region-note"})));
  });
  makeSortable(table);
  document.getElementById("start-advice").textContent = OPT.start_advice || "";
}

renderHeader();
renderTimeChart();
renderModes();
renderRegions();
