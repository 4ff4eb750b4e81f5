// CUDA graphs of replayed work (see graph.h).
#include "runtime/cuda/graph.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/cuda/context.h"

namespace kiln::runtime::cuda {

namespace {

// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: while this thread captures, the calls that cannot be
// captured (cuMemAlloc, synchronizing, copies from pageable memory) fail on it and invalidate the
// capture; other threads are not affected.
constexpr int kCaptureModeThreadLocal = 1;

std::string failure(int rc, const char* what) {
  try {
    check(rc, what);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// What `issue` queues on the stream, as a graph; nullptr (and why) when it cannot be captured.
CUgraph capture(Context& c, const std::function<void()>& issue, std::string& why) {
  if (int rc = c.api->cuStreamBeginCapture(c.stream, kCaptureModeThreadLocal)) {
    why = failure(rc, "cuStreamBeginCapture");
    return nullptr;
  }
  capturing_on_this_thread() = true;
  try {
    issue();
  } catch (const std::exception& e) {
    why = e.what();
  }
  capturing_on_this_thread() = false;
  CUgraph g = nullptr;
  int rc = c.api->cuStreamEndCapture(c.stream, &g);  // ends the capture whatever happened in it
  if (why.empty() && rc) why = failure(rc, "cuStreamEndCapture");
  if (why.empty() && !g) why = "the capture recorded no graph";
  if (!why.empty() && g) {
    c.api->cuGraphDestroy(g);
    g = nullptr;
  }
  return g;
}

}  // namespace

GraphCache::GraphCache(int ordinal) : ordinal_(ordinal) {}

GraphCache::~GraphCache() {
  if (entries_.empty()) return;
  const Api* a = api();
  for (Entry& e : entries_) a->cuGraphExecDestroy(e.exec);  // errors at process exit are ignored
}

bool GraphCache::run(const std::vector<void*>& key, const std::function<void()>& issue, std::string& why) {
  Context& c = context(ordinal_);
  auto found = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  Entry* e = found == entries_.end() ? nullptr : &*found;
  if (!e) {
    CUgraph g = capture(c, issue, why);
    if (!g) return false;
    size_t nodes = 0;  // for the message
    if (settings().debug >= 1) c.api->cuGraphGetNodes(g, nullptr, &nodes);
    // a new entry while there is room, else the least recently used one
    bool updated = false;
    if (entries_.size() < kCapacity) {
      e = &entries_.emplace_back();
    } else {
      e = &*std::min_element(entries_.begin(), entries_.end(),
                             [](const Entry& x, const Entry& y) { return x.used < y.used; });
      CUgraphExecUpdateResultInfo info{};
      updated = c.api->cuGraphExecUpdate && c.api->cuGraphExecUpdate(e->exec, g, &info) == 0;
      if (!updated) c.api->cuGraphExecDestroy(e->exec);
    }
    int rc = updated ? 0 : c.api->cuGraphInstantiate(&e->exec, g, 0);
    c.api->cuGraphDestroy(g);
    if (rc) {
      why = failure(rc, "cuGraphInstantiateWithFlags");
      entries_.erase(entries_.begin() + (e - entries_.data()));
      return false;
    }
    e->key = key;
    stats().graph_captures++;
    if (settings().debug >= 1)
      std::fprintf(stderr, "kiln: captured a CUDA graph of %zu nodes (%s; %zu kept for this step)\n", nodes,
                   updated ? "updated the least recently used one in place" : "instantiated",
                   entries_.size());
  }
  e->used = ++clock_;
  check(c.api->cuGraphLaunch(e->exec, c.stream), "cuGraphLaunch");
  stats().graph_launches++;
  return true;
}

}  // namespace kiln::runtime::cuda
