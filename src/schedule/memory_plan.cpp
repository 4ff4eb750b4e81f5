// Memory planning by liveness (see memory_plan.h): greedy by size, best fit.
#include "schedule/memory_plan.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "ir/symbolic.h"

namespace kiln::schedule {

namespace {
size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
}  // namespace

ArenaPlan plan_arena(const std::vector<LiveRange>& ranges, size_t alignment) {
  ArenaPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  // largest first: the big buffers set the shape of the arena, the small ones fill its gaps
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return ranges[a].bytes > ranges[b].bytes; });
  struct Placed {
    size_t offset, size;
    int64_t first, last;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    const LiveRange& r = ranges[i];
    size_t size = align_up(std::max<size_t>(r.bytes, 1), alignment);
    plan.total += size;
    std::vector<Placed> live;
    for (auto& p : placed)
      if (p.first <= r.last && r.first <= p.last) live.push_back(p);
    std::sort(live.begin(), live.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
    size_t end = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (auto& p : live) {
      if (p.offset >= end && p.offset - end >= size && p.offset - end < best_gap) {
        best = end;
        best_gap = p.offset - end;
      }
      end = std::max(end, p.offset + p.size);
    }
    size_t at = best != SIZE_MAX ? best : end;
    plan.offsets[i] = at;
    plan.peak = std::max(plan.peak, at + size);
    placed.push_back({at, size, r.first, r.last});
  }
  return plan;
}

MemoryPlan plan_memory(const Schedule& s, const std::unordered_set<const ir::Node*>& survivors,
                       bool at_capacity) {
  MemoryPlan plan;
  plan.offset.resize(s.kernels.size());
  std::unordered_map<const ir::Node*, size_t> range_of;  // planned node -> index in ranges
  std::vector<LiveRange> ranges;
  std::vector<std::pair<size_t, size_t>> slot;  // (kernel, output) of each range
  for (size_t k = 0; k < s.kernels.size(); k++) {
    const Kernel& kern = s.kernels[k];
    plan.offset[k].assign(kern.outputs.size(), -1);
    for (auto& in : kern.inputs)
      if (auto it = range_of.find(in.get()); it != range_of.end())
        ranges[it->second].last = static_cast<int64_t>(k);
    for (size_t o = 0; o < kern.outputs.size(); o++) {
      const ir::NodeRef& n = kern.outputs[o];
      if (survivors.count(n.get()) || (o == 0 && kern.in_place))
        continue;  // the latter: no memory of its own
      range_of[n.get()] = ranges.size();
      ranges.push_back(
          {static_cast<int64_t>(k), static_cast<int64_t>(k),
           static_cast<size_t>(at_capacity ? ir::capacity(*n) : n->numel()) * dtype_size(n->dtype)});
      slot.push_back({k, o});
    }
  }
  ArenaPlan a = plan_arena(ranges);
  for (size_t i = 0; i < ranges.size(); i++)
    plan.offset[slot[i].first][slot[i].second] = static_cast<int64_t>(a.offsets[i]);
  plan.arena_bytes = a.peak;
  plan.no_reuse_bytes = a.total;
  plan.planned = ranges.size();
  return plan;
}

}  // namespace kiln::schedule
