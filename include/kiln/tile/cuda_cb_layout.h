// The tile runtime on a GPU (part of cuda_device.h): where each CB's ring, barriers and counters
// lie in dynamic shared memory.
#pragma once
#include "kiln/tile/cuda_block_state.h"

namespace kiln::tile::cuda {

// ---- CB layout ----
// The generated prelude defines the program's CB layout as constants (KILN_TILE_CB_LAYOUT: id, ring
// offset, block bytes, slots, barrier offset, block rows and cols in tiles; the host computes the
// same in src/tile/cb_memory.cpp), so with the constant ids of CB handles every CB operation's
// address arithmetic folds away; ids only known at run time read the launch parameters.
struct CbLayout {
  unsigned data_offset, block_bytes, slots, barrier_offset;
  int rows, cols;  // tiles
  int shape;       // box shape: which of a tensor's maps copies this CB's blocks (-1: none does)
  int tile_rows;   // 32, or fewer for short tiles
  int height() const { return rows * tile_rows; }  // element rows of a block
};
inline CbLayout cb_layout(int cb) {
#ifdef KILN_TILE_CB_LAYOUT
#define KILN_TILE_CB_CASE(i, d, b, s, o, r, c, sh, th) \
  case i: return CbLayout{d, b, s, o, r, c, sh, th};
  switch (cb) {
    KILN_TILE_CB_LAYOUT(KILN_TILE_CB_CASE)
    default: break;
  }
#undef KILN_TILE_CB_CASE
#endif
  const cuda_abi::CBParam& p = P().cbs[cb];
  return CbLayout{p.data_offset, p.block_bytes, p.slots, p.barrier_offset, p.rows, p.cols, -1, p.tile_rows};
}
inline int num_cbs() {
#ifdef KILN_TILE_NCBS
  return KILN_TILE_NCBS;
#else
  return P().ncbs;
#endif
}
// A CB's barrier region: full[slots], empty[slots], dma[slots] (mbarriers), dma_count[slots],
// pad_sig[slots] (8 bytes each), then a WarpCounters per warp.
inline unsigned char* cb_region(int cb) { return kiln_tile_smem + cb_layout(cb).barrier_offset; }
inline unsigned full_bar(int cb, unsigned slot) { return smem_addr(cb_region(cb)) + slot * 8; }
inline unsigned empty_bar(int cb, unsigned slot) {
  return smem_addr(cb_region(cb)) + (cb_layout(cb).slots + slot) * 8;
}
inline unsigned dma_bar(int cb, unsigned slot) {
  return smem_addr(cb_region(cb)) + (2 * cb_layout(cb).slots + slot) * 8;
}
inline unsigned* dma_count(int cb, unsigned slot) {
  return reinterpret_cast<unsigned*>(cb_region(cb) + (3 * cb_layout(cb).slots + slot) * 8);
}
// What the slot's padding holds: 0, unknown; else the pad value's bits << 32 | (rows + 1) << 16 |
// cols of the slice DMA last read into it (the padding is what lies outside those rows and cols).
// Every write to the block other than a DMA read resets it.
inline unsigned long long* pad_sig(int cb, unsigned slot) {
  return reinterpret_cast<unsigned long long*>(cb_region(cb) + (4 * cb_layout(cb).slots + slot) * 8);
}
inline WarpCounters& counters(int cb) {
  return reinterpret_cast<WarpCounters*>(cb_region(cb) +
                                         cuda_abi::kBarrierBytesPerSlot * cb_layout(cb).slots)[warp()];
}
inline unsigned char* slot_data(int cb, int slot) {
  const CbLayout l = cb_layout(cb);
  return kiln_tile_smem + l.data_offset + static_cast<unsigned>(slot) * l.block_bytes;
}

}  // namespace kiln::tile::cuda
