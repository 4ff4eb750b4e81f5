// CUDA graphs for replayed work (kiln::Jit's captured steps): the work a replay queues on the
// device's stream is recorded once with stream capture, instantiated, and from then on runs as one
// cuGraphLaunch. A graph holds its kernels' argument pointers, so it is kept per set of pointers
// (the key): a replay with another set captures again, into a new graph while the cache has room,
// else into the least recently used one, updated in place (cuGraphExecUpdate) or instantiated anew.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/cuda/api.h"

namespace kiln::runtime::cuda {

class GraphCache {
 public:
  static constexpr size_t kCapacity = 4;

  explicit GraphCache(int ordinal);
  ~GraphCache();  // destroys the graphs (one still running finishes first: the driver frees it then)
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs the work that `issue` queues on the stream as a graph: the one captured for `key` (the
  // pointers the work reads and writes), else a new capture of `issue`. While capturing, `issue` must
  // only queue work (kernels, cuBLASLt, memsets on memory that outlives the graph): no allocation,
  // copy from the host or synchronization. Returns false, having run nothing, when the capture or
  // its instantiation fails (`why` says why); the caller then queues the work itself.
  bool run(const std::vector<void*>& key, const std::function<void()>& issue, std::string& why);

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<void*> key;
    CUgraphExec exec = nullptr;
    uint64_t used = 0;  // the clock at its last launch
  };
  int ordinal_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace kiln::runtime::cuda
