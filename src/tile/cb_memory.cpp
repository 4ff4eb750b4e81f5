// A program's CB memory per core: the layout the GPU backend gives the CBs in a thread block's
// shared memory, and the check, run by every backend before a launch, that it fits.
#include <algorithm>

#include "kiln/error.h"
#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

CBLayout layout_cbs(const Program::Desc& d) {
  CBLayout l;
  l.cbs.resize(d.cbs.size());
  // every CB's barriers and per-warp counters first, then each ring, 128-byte aligned
  size_t off = 0;
  const size_t counters = kCounterBytesPerWarp * static_cast<size_t>(cuda_warps(d));
  for (size_t i = 0; i < d.cbs.size(); i++) {
    l.cbs[i].barrier_offset = off;
    off += kBarrierBytesPerSlot * static_cast<size_t>(d.cbs[i].buffer_factor) + counters;
  }
  off = align_up(off, 128);
  l.barrier_bytes = off;
  for (size_t i = 0; i < d.cbs.size(); i++) {
    const CBDecl& c = d.cbs[i];
    l.cbs[i].block_bytes = c.block_bytes();
    l.cbs[i].data_offset = off;
    off = align_up(off + l.cbs[i].block_bytes * c.buffer_factor, 128);
    l.cbs[i].shape = -1;
    // a box is at most 256 elements wide; blocks of short tiles move through element accessors,
    // which have no maps
    if (c.cols * kTileSize > 256 || c.tile_rows != kTileSize) continue;
    std::pair<int, int> shape{static_cast<int>(c.rows), static_cast<int>(c.cols)};
    auto it = std::find(l.box_shapes.begin(), l.box_shapes.end(), shape);
    l.cbs[i].shape = static_cast<int>(it - l.box_shapes.begin());
    if (it == l.box_shapes.end()) l.box_shapes.push_back(shape);
  }
  l.total = off;
  return l;
}

int64_t cb_memory_limit(int64_t shared_per_block) { return shared_per_block - kStaticSharedReserve; }

void check_cb_memory(const Program::Desc& d, const CBLayout& l, int64_t shared_per_block,
                     const std::string& device) {
  const int64_t limit = cb_memory_limit(shared_per_block);
  if (static_cast<int64_t>(l.total) <= limit) return;
  const bool cpu = device.empty();
  std::string msg = "kiln.tile: kernel '" + d.name + "': its CBs need " + std::to_string(l.total) +
                    " bytes of shared memory per core, over the limit of " + std::to_string(limit) +
                    " bytes (" + std::to_string(shared_per_block) + " per thread block on " +
                    (cpu ? std::string("an H100 or H200") : device) + " less " +
                    std::to_string(kStaticSharedReserve) + " for the runtime's own state" +
                    (cpu ? "; the CPU backend checks the GPU's limit too" : "") +
                    "): use smaller blocks or buffer factors, or stream long rows in chunks";
  size_t slots = 0;
  for (size_t i = 0; i < d.cbs.size(); i++) {
    const CBDecl& c = d.cbs[i];
    slots += static_cast<size_t>(c.buffer_factor);
    msg += "\n  CB '" + c.name + "': " + c.shape_str() + " " + dtype_name(c.dtype) + " x buffer factor " +
           std::to_string(c.buffer_factor) + " = " + std::to_string(l.cbs[i].block_bytes * c.buffer_factor) +
           " bytes";
  }
  msg += "\n  barriers and counters: " + std::to_string(kBarrierBytesPerSlot) + " bytes per buffer slot x " +
         std::to_string(slots) + " slots + " + std::to_string(kCounterBytesPerWarp) +
         " bytes per CB per warp x " + std::to_string(d.cbs.size()) + " CBs x " +
         std::to_string(cuda_warps(d)) + " warps, 128-byte aligned = " + std::to_string(l.barrier_bytes) +
         " bytes";
  msg += "\n  total " + std::to_string(l.total) + " bytes, limit " + std::to_string(limit) + " bytes";
  throw Error(msg);
}

}  // namespace kiln::tile
