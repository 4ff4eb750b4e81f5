// KILN_TILE_TRACE=<core>: the timeline one core of a GPU launch records (cuda_watchdog.h: trace),
// summed up per role: where it waited and for how long, how long its stores took (and the barrier
// that starts each), how many DMAs it issued. Times are clock cycles of the core's multiprocessor.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kiln/debug.h"
#include "tile/cuda/launch_state.h"

namespace kiln::tile::cuda {

namespace {

struct Role {
  std::map<std::pair<int, int>, std::pair<unsigned long long, long>> waits;  // (kind, object) -> time, count
  unsigned long long store = 0, barrier = 0;
  long stores = 0, reads = 0, writes = 0;
};

std::string wait_name(const Program::Desc& d, int kind, int object) {
  switch (kind) {
    case cuda_abi::kWaitReserve: return "reserve() on " + cb_name(d, object);
    case cuda_abi::kWaitBlock: return "wait() on " + cb_name(d, object);
    case cuda_abi::kWaitDma: return "DMA wait on " + cb_name(d, object);
    case cuda_abi::kWaitMcastSend: return "mcast() into " + cb_name(d, object);
    case cuda_abi::kWaitMcastReceive: return "multicast receive into " + cb_name(d, object);
    case cuda_abi::kWaitSemaphore: return "wait() on " + semaphore_name(d, object);
    default: return "wait of kind " + std::to_string(kind);
  }
}

std::string percent(unsigned long long part, unsigned long long whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%",
                whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return b;
}

}  // namespace

std::string describe_trace(const Program::Desc& d, int core, const std::vector<unsigned long long>& recs,
                           unsigned long long recorded) {
  std::string out = "kiln.tile trace of kernel '" + d.name + "', core " + std::to_string(core) + ": ";
  if (recs.empty()) return out + "no slow waits, stores or DMAs recorded\n";
  // clocks are 32 bits: times count from the first record (a kernel shorter than 2^32 cycles)
  const unsigned first = static_cast<unsigned>(recs[0] >> 32);
  std::vector<std::tuple<unsigned, int, int, int>> ev;  // time, event, warp, object
  for (unsigned long long r : recs)
    ev.emplace_back(static_cast<unsigned>(r >> 32) - first, static_cast<int>((r >> 24) & 0xff),
                    static_cast<int>((r >> 16) & 0xff), static_cast<int>(r & 0xffff));
  std::stable_sort(ev.begin(), ev.end());
  const unsigned long long span = std::get<0>(ev.back()) - std::get<0>(ev.front());
  std::map<int, Role> roles;                           // by warp
  std::map<std::tuple<int, int, int>, unsigned> open;  // (warp, kind or -1, object) -> start
  for (auto [t, e, w, o] : ev) {
    Role& r = roles[w];
    if (e < static_cast<int>(cuda_abi::kTraceStore)) {
      if (e % 2 == 0) {
        open[{w, e / 2, o}] = t;
      } else if (auto it = open.find({w, e / 2, o}); it != open.end()) {
        auto& [time, n] = r.waits[{e / 2, o}];
        time += t - it->second;
        n++;
        open.erase(it);
      }
    } else if (e == static_cast<int>(cuda_abi::kTraceStore)) {
      open[{w, -1, 0}] = t;
    } else if (e == static_cast<int>(cuda_abi::kTraceStoreBarrier)) {
      if (auto it = open.find({w, -1, 0}); it != open.end()) r.barrier += t - it->second;
    } else if (e == static_cast<int>(cuda_abi::kTraceStoreEnd)) {
      if (auto it = open.find({w, -1, 0}); it != open.end()) {
        r.store += t - it->second;
        r.stores++;
        open.erase(it);
      }
    } else {
      (e == static_cast<int>(cuda_abi::kTraceDmaRead) ? r.reads : r.writes)++;
    }
  }
  out += std::to_string(recorded) + " events over " + std::to_string(span) + " cycles\n";
  const int compute_warps = cuda_compute_warps(d);
  for (auto& [w, r] : roles) {
    const bool compute = w < compute_warps;  // warps: compute, then one per data-movement role
    out += "  " + (compute ? d.compute_role + " (its first warp)" : role_name(d, w - compute_warps)) + ":";
    if (r.stores)
      out += " " + std::to_string(r.stores) + " stores, " + percent(r.store, span) + " of the time (" +
             percent(r.barrier, span) + " in the barrier that starts each);";
    if (r.reads) out += " " + std::to_string(r.reads) + " DMA reads issued;";
    if (r.writes) out += " " + std::to_string(r.writes) + " DMA writes issued;";
    out += "\n";
    std::vector<std::pair<std::pair<int, int>, std::pair<unsigned long long, long>>> waits(r.waits.begin(),
                                                                                           r.waits.end());
    std::sort(waits.begin(), waits.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
    for (auto& [key, value] : waits)
      out += "    " + wait_name(d, key.first, key.second) + ": " + percent(value.first, span) + " (" +
             std::to_string(value.second) + " slow waits)\n";
  }
  if (recorded > recs.size())
    out += "  (" + std::to_string(recorded - recs.size()) + " later records not kept)\n";
  // KILN_TILE_TRACE_LAST=<n>: the core's last n events in order (where its kernel's end goes)
  const size_t n = std::min<size_t>(static_cast<size_t>(settings().tile_trace_last), ev.size());
  if (n > 0) out += "  its last " + std::to_string(n) + " events (cycles from its first):\n";
  for (size_t i = ev.size() - n; i < ev.size(); i++) {
    auto [t, e, w, o] = ev[i];
    std::string what;
    if (e < static_cast<int>(cuda_abi::kTraceStore))
      what = wait_name(d, e / 2, o) + (e % 2 == 0 ? ": waits" : ": done waiting");
    else if (e == static_cast<int>(cuda_abi::kTraceStore))
      what = "store begins";
    else if (e == static_cast<int>(cuda_abi::kTraceStoreBarrier))
      what = "store's barrier passed";
    else if (e == static_cast<int>(cuda_abi::kTraceStoreEnd))
      what = "store ends";
    else
      what =
          std::string(e == static_cast<int>(cuda_abi::kTraceDmaRead) ? "DMA read into " : "DMA write from ") +
          cb_name(d, o);
    out += "    " + std::to_string(t) + " " +
           (w < compute_warps ? d.compute_role : role_name(d, w - compute_warps)) + ": " + what + "\n";
  }
  return out;
}

}  // namespace kiln::tile::cuda
