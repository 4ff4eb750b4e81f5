// The compiler viewer's page (see viz.h): one self-contained HTML file, its style and script inline
// and the recorded realizes embedded as JSON; it needs no network and no server.
#include "engine/viz.h"

namespace kiln::engine::viz {

namespace {

const char* kHead = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>kiln compiler viewer</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { padding: 8px 14px; background: #2d3142; color: #fff; }
header h1 { font-size: 17px; margin: 0 0 2px 0; }
#meta { font-size: 12px; color: #cfd3e0; }
#error:not(:empty) { background: #fdd; color: #900; padding: 8px 14px; white-space: pre-wrap; }
main { display: flex; align-items: flex-start; }
nav { width: 250px; flex: none; max-height: calc(100vh - 60px); overflow: auto; border-right: 1px solid #ddd; }
nav .realize { padding: 5px 10px; border-bottom: 1px solid #eee; cursor: pointer; }
nav .realize.sel { background: #e3e9ff; }
nav .realize small { color: #666; display: block; overflow-wrap: anywhere; }
#view { flex: 1; padding: 8px 14px; min-width: 0; }
h2 { font-size: 15px; margin: 4px 0 8px 0; } h3 { font-size: 13px; margin: 10px 0 4px 0; }
table { border-collapse: collapse; width: 100%; background: #fff; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
tr.kernel { cursor: pointer; } tr.kernel.sel { background: #fff3c4; }
.cols { display: flex; gap: 12px; align-items: flex-start; }
.cols > div { flex: 1; min-width: 0; }
.graph { position: relative; background: #fff; border: 1px solid #ddd; max-height: 420px; overflow: auto; font: 12px monospace; }
.node { padding: 1px 6px; white-space: nowrap; }
.node.realized { color: #666; }
.node.hl { background: #fff3c4; } .node.hl-out { background: #ffd666; font-weight: bold; }
.node.hl-in { outline: 2px solid #6c8cff; outline-offset: -2px; }
.badge { display: inline-block; padding: 0 4px; margin-left: 4px; border-radius: 3px; background: #e3e9ff;
  color: #223; cursor: pointer; font-size: 11px; }
.card { background: #fff; border: 1px solid #ddd; margin: 6px 0; padding: 4px 8px; }
.card.sel { border-color: #e0a800; box-shadow: 0 0 0 2px #ffd666; }
pre { background: #f4f4f4; padding: 6px; overflow: auto; max-height: 360px; margin: 4px 0; }
.note { color: #666; font-size: 12px; }
</style></head>
<body><header><h1>kiln compiler viewer</h1><div id="meta"></div></header>
<div id="error"></div>
<main><nav id="realizes"></nav><section id="view"></section></main>
<script id="data" type="application/json">)HTML";

const char* kTail = R"HTML(</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const R = D.realizes;
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) e.append(k === null || k === undefined ? "" : k);
  return e;
}
const full = i => (R[i].repeat_of === undefined ? R[i] : R[R[i].repeat_of]);
const fmt = (v, d) => (v === null || v === undefined ? "-" : v.toFixed(d));
function details(title, text) {
  const d = el("details", null, el("summary", null, title), el("pre", null, text));
  return d;
}
function nodeText(n, i) {
  return "n" + i + " " + n.label + (n.src.length ? "  <- " + n.src.map(s => "n" + s).join(" ") : "");
}
let current = -1;
function highlight(ri, k) {
  const g = full(ri), kn = g.kernels[k];
  const fused = new Set(kn.fused), outs = new Set(kn.outputs), ins = new Set(kn.inputs);
  for (const e of document.querySelectorAll(".node")) {
    const id = +e.dataset.node;
    e.classList.toggle("hl", fused.has(id));
    e.classList.toggle("hl-out", outs.has(id));
    e.classList.toggle("hl-in", ins.has(id));
  }
  for (const e of document.querySelectorAll("[data-kernel]")) e.classList.toggle("sel", +e.dataset.kernel === k);
  for (const box of document.querySelectorAll(".graph")) {  // each list shows the kernel's output
    const row = box.querySelector(".node.hl-out");
    if (row) box.scrollTop = row.offsetTop - box.clientHeight / 3;
  }
}
function graphList(ri, g, bit) {
  const box = el("div", "graph");
  g.nodes.forEach((n, i) => {
    if (!(n.in & bit)) return;
    const row = el("div", "node" + (n.realized ? " realized" : ""), nodeText(n, i));
    row.dataset.node = i;
    if (bit === 2)
      for (const k of n.kernels) {
        const b = el("span", "badge", "k" + k + (n.out === k ? " out" : ""));
        b.onclick = () => highlight(ri, k);
        row.append(b);
      }
    box.append(row);
  });
  return box;
}
function select(ri) {
  current = ri;
  for (const e of document.querySelectorAll("nav .realize")) e.classList.toggle("sel", +e.dataset.realize === ri);
  const r = R[ri], g = full(ri), view = document.getElementById("view");
  view.replaceChildren();
  view.append(el("h2", null, "realize #" + r.index + " on " + r.device + ": " + g.kernels.length + " kernel" +
                                 (g.kernels.length === 1 ? "" : "s") + ", " + fmt(r.schedule_ms, 3) +
                                 " ms to rewrite, schedule and compile"));
  if (r.repeat_of !== undefined)
    view.append(el("p", "note", "same kernels as realize #" + R[r.repeat_of].index +
                                    " (graph shown from there); the times below are this realize's"));
  if (g.cut) view.append(el("p", "note", "graph cut at its first 4000 nodes"));
  const table = el("table", null, el("tr", null, ...["kernel", "name", "outputs", "why realized (fusion decision)",
                                                      "reads", "opts", "ms", "GB/s", "GFLOP/s"].map(h => el("th", null, h))));
  g.kernels.forEach((k, i) => {
    const t = r.times[i];
    const ms = t ? t.ms : null;
    const tr = el("tr", "kernel", el("td", null, "k" + i), el("td", null, k.name),
                  el("td", null, k.outputs.map(o => "n" + o).join(" ")),
                  el("td", null, ...k.why.map(w => el("div", null, w))),
                  el("td", null, k.inputs.map(o => "n" + o).join(" ") || "-"),
                  el("td", null, k.opts.join(" ") || "none"), el("td", null, fmt(ms, 4)),
                  el("td", null, t && ms > 0 ? fmt(t.bytes / ms * 1e-6, 2) : "-"),
                  el("td", null, t && ms > 0 ? fmt(k.flops / ms * 1e-6, 2) : "-"));
    tr.dataset.kernel = i;
    tr.onclick = () => highlight(ri, i);
    table.append(tr);
  });
  view.append(el("h3", null, "schedule (click a kernel to highlight its nodes)"), table);
  view.append(el("div", "cols", el("div", null, el("h3", null, "tensor graph before the rewrites"), graphList(ri, g, 1)),
                 el("div", null, el("h3", null, "after the rewrites (badges: the kernels computing a node)"),
                    graphList(ri, g, 2))));
  view.append(el("h3", null, "kernels"));
  g.kernels.forEach((k, i) => {
    const t = r.times[i];
    const card = el("div", "card", el("b", null, "k" + i + " " + k.name), " ", el("span", "note", k.symbol),
                    el("div", null, "opts: " + (k.opts.join(" ") || "none") + "; outer loop " + k.outer +
                                        "; " + k.flops + " ALU ops; time " + (t ? fmt(t.ms, 4) + " ms" : "-")),
                    details("kernel AST (as scheduled)", k.ast), details("linear program (after opts)", k.program),
                    details("generated source", k.source));
    card.dataset.kernel = i;
    card.onclick = e => { if (e.target.tagName !== "SUMMARY") highlight(ri, i); };
    view.append(card);
  });
  if (g.kernels.length) highlight(ri, 0);
}
try {
  document.getElementById("meta").textContent =
      R.length + " realize" + (R.length === 1 ? "" : "s") + " recorded" +
      (D.full ? " (recording stopped: the page is full)" : "") +
      ". Times: wall time of each kernel's launch, synchronized alone (KILN_VIZ times every kernel as " +
      "KILN_DEBUG=2 does; compiling happens before and is not included).";
  const nav = document.getElementById("realizes");
  R.forEach((r, i) => {
    const g = full(i);
    const item = el("div", "realize", "#" + r.index + " (" + g.kernels.length + " kernel" +
                                          (g.kernels.length === 1 ? "" : "s") + ")" + (r.repeat_of === undefined ? "" : " repeat"),
                    el("small", null, g.kernels.map(k => k.name).join(" ")));
    item.dataset.realize = i;
    item.onclick = () => { location.hash = "r=" + i; select(i); };
    nav.append(item);
  });
  const m = /r=(\d+)/.exec(location.hash);
  // #r=N picks a realize; else the first with the most kernels
  let pick = 0;
  R.forEach((r, i) => { if (full(i).kernels.length > full(pick).kernels.length) pick = i; });
  if (R.length) select(m && +m[1] < R.length ? +m[1] : pick);
  else document.getElementById("view").textContent = "no realize recorded yet";
  document.body.dataset.ready = "1";
} catch (e) {
  document.getElementById("error").textContent = "the viewer failed: " + e + "\n" + (e.stack || "");
}
</script></body></html>
)HTML";

}  // namespace

std::string page(const std::string& data_json) { return kHead + data_json + kTail; }

}  // namespace kiln::engine::viz
