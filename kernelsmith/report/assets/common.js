// Helpers shared by the reports. User text only ever enters the page as text nodes
// (createTextNode / textContent), never as markup.
"use strict";

var SVG_NS = "http://www.w3.org/2000/svg";

function readData() {
  return JSON.parse(document.getElementById("data").textContent);
}

// append(node, child, [child, ...], ...): text, nodes and (nested) arrays of them; null is skipped
function append(node) {
  for (var i = 1; i < arguments.length; i++) {
    var c = arguments[i];
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) { append.apply(null, [node].concat(c)); continue; }
    node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (var k in attrs || {}) {
    var v = attrs[k];
    if (v === null || v === undefined) continue;
    if (k === "onclick") node.addEventListener("click", v);
    else node.setAttribute(k, String(v));
  }
  return node;
}

// h("td", {class: "x"}, "text", child, ...): an HTML element
function h(tag, attrs) {
  return append(setAttrs(document.createElement(tag), attrs), Array.prototype.slice.call(arguments, 2));
}

// s("circle", {cx: 1}, ...): an SVG element
function s(tag, attrs) {
  return append(setAttrs(document.createElementNS(SVG_NS, tag), attrs), Array.prototype.slice.call(arguments, 2));
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function isNum(x) { return typeof x === "number" && isFinite(x); }

function fmt(x, digits) {
  if (!isNum(x)) return "\u2014";
  return x.toFixed(digits === undefined ? 2 : digits);
}

// a speedup: 2 decimals, or 2 significant digits below 0.1 (CPU runs are far slower than eager)
function fmtX(x) {
  if (!isNum(x)) return "\u2014";
  return (x >= 100 ? x.toFixed(0) : x >= 0.1 || x === 0 ? x.toFixed(2) : x.toPrecision(2)) + "\u00d7";
}

// n significant digits, trailing zeros dropped: 0.000965, 1.5, 123 (a score of a CPU run is ~0.001)
function fmtSig(x, n) {
  if (!isNum(x)) return "\u2014";
  return String(Number(x.toPrecision(n === undefined ? 3 : n)));
}

// a tick label with as many decimals as the tick step needs
function fmtTick(v, step) {
  var digits = step > 0 ? Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) : 0;
  return v.toFixed(Math.min(digits, 6));
}

function fmtPct(x) { return isNum(x) ? (100 * x).toFixed(1) + "%" : "\u2014"; }

function fmtInt(x) { return isNum(x) ? Math.round(x).toLocaleString("en-US") : "\u2014"; }

// Round tick values covering [lo, hi], about n of them.
function ticks(lo, hi, n) {
  var span = hi - lo;
  if (!(span > 0)) return [lo];
  var step = Math.pow(10, Math.floor(Math.log10(span / n)));
  var err = span / n / step;
  if (err >= 7.5) step *= 10; else if (err >= 3.5) step *= 5; else if (err >= 1.5) step *= 2;
  var out = [];
  for (var t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step) out.push(+t.toFixed(10));
  return out;
}

// Round ticks of a log axis that reach past both ends of [lo, hi] (lo > 0): 1-2-5 steps over up to
// two decades, else powers of ten (more labels than that would overlap). The first and last ticks
// are the axis' ends, so the axis always covers the data.
function logTicks(lo, hi) {
  var steps = Math.log10(hi / lo) <= 2 ? [1, 2, 5] : [1], out = [];
  for (var d = Math.floor(Math.log10(lo)) - 1; d <= Math.ceil(Math.log10(hi)) + 1; d++) {
    steps.forEach(function (m) { out.push(Number((m * Math.pow(10, d)).toPrecision(1))); });
  }
  var first = out.filter(function (v) { return v <= lo; }).pop(), last = out.filter(function (v) { return v >= hi; })[0];
  return out.filter(function (v) { return v >= first && v <= last; });
}

// The widest of `labels` drawn as an SVG text of `cls` inside `svg` (which must be in the page).
function textWidth(svg, labels, cls) {
  var probe = s("text", {class: cls, x: 0, y: -100}), w = 0;
  svg.appendChild(probe);
  labels.forEach(function (l) {
    probe.textContent = l;
    w = Math.max(w, probe.getComputedTextLength() || 6.5 * l.length);  // 0 when not laid out: a guess
  });
  svg.removeChild(probe);
  return w;
}

// A table whose header cells sort its body when clicked (numbers by value, missing values last).
function makeSortable(table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.classList.add("sortable");
    th.addEventListener("click", function () {
      var asc = th.getAttribute("data-sort") !== "asc";
      Array.prototype.forEach.call(heads, function (o) { o.removeAttribute("data-sort"); });
      th.setAttribute("data-sort", asc ? "asc" : "desc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
        if (x === "" || x === null) return (y === "" || y === null) ? 0 : 1;
        if (y === "" || y === null) return -1;
        var nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny) && String(nx) === x && String(ny) === y) ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
}

// A table cell carrying its sort key.
function cell(text, sortValue, attrs) {
  var a = attrs || {};
  a["data-v"] = sortValue === null || sortValue === undefined ? "" : String(sortValue);
  return h("td", a, text);
}
