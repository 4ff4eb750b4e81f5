// The compiler viewer's recorder (see viz.h): each realize becomes one JSON object, and the page
// holding all of them so far is written atomically after every realize, so a crash leaves a page.
#include "engine/viz.h"

#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/file_util.h"

namespace kiln::engine::viz {

using ir::Node;
using ir::NodeRef;

namespace {

constexpr size_t kMaxNodes = 4000;              // per realize; a larger graph is cut (the page says so)
constexpr size_t kMaxRecords = 200;             // realizes kept in the page; later ones are counted
constexpr size_t kMaxBytes = size_t{64} << 20;  // JSON kept in the page

// A JSON string literal; '<' and '>' escaped so no text can close the page's <script> element.
std::string str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <class T, class F>
std::string list(const std::vector<T>& v, F&& each) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); i++) out += (i ? "," : "") + each(v[i]);
  return out + "]";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Nodes of the tensor graphs, numbered in one table per realize (sources before users); the walk
// stops at realized nodes, which are the graph's inputs.
struct Graph {
  std::unordered_map<const Node*, int> id;
  std::vector<NodeRef> order;
  std::vector<uint8_t> in;  // bit 0: in the graph before the rewrites, bit 1: after
  bool cut = false;

  void walk(const std::vector<NodeRef>& roots, uint8_t bit) {
    std::unordered_set<const Node*> seen;
    std::vector<std::pair<NodeRef, bool>> stack;
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back({*it, false});
    while (!stack.empty()) {
      auto [n, expanded] = stack.back();
      stack.pop_back();
      if (expanded) {
        auto [it, added] = id.emplace(n.get(), static_cast<int>(order.size()));
        if (added) {
          if (order.size() >= kMaxNodes) {
            id.erase(it);
            cut = true;
            continue;
          }
          order.push_back(n);
          in.push_back(0);
        }
        in[static_cast<size_t>(it->second)] |= bit;
        continue;
      }
      if (!seen.insert(n.get()).second) continue;
      stack.push_back({n, true});
      if (!schedule::is_realized(n))
        for (auto s = n->src.rbegin(); s != n->src.rend(); ++s) stack.push_back({*s, false});
    }
  }
  std::string ids(const std::vector<NodeRef>& nodes) const {
    std::string out = "[";
    bool first = true;
    for (auto& n : nodes)
      if (auto it = id.find(n.get()); it != id.end()) {
        out += (first ? "" : ",") + std::to_string(it->second);
        first = false;
      }
    return out + "]";
  }
};

struct Page {
  std::mutex mu;
  std::vector<std::string> records;
  std::unordered_map<std::string, size_t> first_with_key;
  size_t bytes = 0, dropped = 0, realizes = 0;
};
Page& the_page() {
  static Page p;
  return p;
}

}  // namespace

bool enabled() { return !settings().viz.empty() && settings().viz != "0"; }

std::string output_path() { return settings().viz_out.empty() ? "kiln_viz.html" : settings().viz_out; }

Record::Record(const std::vector<NodeRef>& roots, const std::vector<NodeRef>& rewritten,
               const schedule::Schedule& sched,
               const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered, Device device)
    : times_(sched.kernels.size(), "null"), device_(device.str()) {
  Graph g;
  g.walk(roots, 1);
  g.walk(rewritten, 2);

  // which kernels compute each node: from a kernel's outputs down to realized nodes and the outputs
  // of other kernels (a node fused into several kernels is recomputed by each)
  std::unordered_map<const Node*, int> output_of;
  for (size_t k = 0; k < sched.kernels.size(); k++)
    for (auto& o : sched.kernels[k].outputs) output_of[o.get()] = static_cast<int>(k);
  std::vector<std::vector<int>> kernels_of(g.order.size());
  std::vector<std::vector<NodeRef>> fused(sched.kernels.size());
  for (size_t k = 0; k < sched.kernels.size(); k++) {
    std::unordered_set<const Node*> seen;
    std::vector<NodeRef> stack(sched.kernels[k].outputs.begin(), sched.kernels[k].outputs.end());
    while (!stack.empty()) {
      NodeRef n = stack.back();
      stack.pop_back();
      if (!seen.insert(n.get()).second) continue;
      fused[k].push_back(n);
      if (auto it = g.id.find(n.get()); it != g.id.end())
        kernels_of[static_cast<size_t>(it->second)].push_back(static_cast<int>(k));
      for (auto& s : n->src) {
        auto o = output_of.find(s.get());
        if (!schedule::is_realized(s) && (o == output_of.end() || o->second == static_cast<int>(k)))
          stack.push_back(s);
      }
    }
    key_ += lowered[k]->program.symbol + ";";
  }

  std::string nodes = "[";
  for (size_t i = 0; i < g.order.size(); i++) {
    const NodeRef& n = g.order[i];
    auto o = output_of.find(n.get());
    nodes += (i ? ",\n" : "") + std::string("{\"op\":") + str(ir::op_name(n->op)) +
             ",\"dtype\":" + str(dtype_name(n->dtype)) + ",\"shape\":" + str(shape_str(n->shape)) +
             ",\"label\":" + str(n->str()) + ",\"src\":" + g.ids(n->src) +
             ",\"in\":" + std::to_string(g.in[i]) +
             ",\"realized\":" + (schedule::is_realized(n) ? "true" : "false") +
             ",\"out\":" + std::to_string(o == output_of.end() ? -1 : o->second) +
             ",\"kernels\":" + list(kernels_of[i], [](int k) { return std::to_string(k); }) + "}";
  }
  nodes += "]";

  std::string kernels = "[";
  for (size_t k = 0; k < sched.kernels.size(); k++) {
    const schedule::Kernel& kn = sched.kernels[k];
    const codegen::Lowered& l = *lowered[k];
    kernels += (k ? ",\n" : "") + std::string("{\"name\":") + str(l.program.name) +
               ",\"symbol\":" + str(l.program.symbol) + ",\"outputs\":" + g.ids(kn.outputs) +
               ",\"inputs\":" + g.ids(kn.inputs) + ",\"fused\":" + g.ids(fused[k]) +
               ",\"why\":" + list(kn.why, str) + ",\"opts\":" + list(l.opts, str) +
               ",\"ast\":" + str(ir::dump({kn.ast})) + ",\"program\":" + str(codegen::to_string(l.program)) +
               ",\"source\":" + str(l.source) + ",\"flops\":" + num(l.program.flops) +
               ",\"outer\":" + std::to_string(l.program.outer_size) + "}";
  }
  kernels += "]";
  graph_ = "\"nodes\":" + nodes + ",\n\"before\":" + g.ids(roots) + ",\"after\":" + g.ids(rewritten) +
           ",\"cut\":" + (g.cut ? "true" : "false") + ",\n\"kernels\":" + kernels;
}

void Record::kernel_time(size_t kernel, double ms, int64_t bytes) {
  times_.at(kernel) = "{\"ms\":" + num(ms) + ",\"bytes\":" + std::to_string(bytes) + "}";
}

void Record::finish(double schedule_ms) {
  Page& p = the_page();
  std::lock_guard<std::mutex> lock(p.mu);
  size_t index = p.realizes++;
  if (p.records.size() >= kMaxRecords || p.bytes >= kMaxBytes) {
    p.dropped++;  // the page keeps what it has; it already says recording stopped
    return;
  }
  std::string head = "{\"index\":" + std::to_string(index) + ",\"device\":" + str(device_) +
                     ",\"schedule_ms\":" + num(schedule_ms) +
                     ",\"times\":" + list(times_, [](auto& t) { return t; });
  auto [it, first] = p.first_with_key.emplace(key_, p.records.size());
  std::string rec = first || key_.empty() ? head + ",\n" + graph_ + "}"
                                          : head + ",\"repeat_of\":" + std::to_string(it->second) + "}";
  p.bytes += rec.size();
  p.records.push_back(std::move(rec));
  bool full = p.records.size() >= kMaxRecords || p.bytes >= kMaxBytes;
  std::string data = "{\"full\":" + std::string(full ? "true" : "false") +
                     ",\"debug\":" + std::to_string(settings().debug) +
                     ",\"realizes\":" + list(p.records, [](auto& r) { return r; }) + "}";
  try {
    runtime::write_file_atomic(output_path(), page(data));
  } catch (const Error& e) {
    throw Error(std::string("kiln.viz: cannot write the compiler viewer page (KILN_VIZ_OUT): ") + e.what());
  }
}

}  // namespace kiln::engine::viz
