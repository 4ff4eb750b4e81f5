// Circular buffers: the CB handle a kernel names, and the scoped and scratch blocks that push or pop
// when their scope ends. Part of kernel.h, which defines the macros it uses (KILN_TILE_RT,
// KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_block.h"

namespace kiln::tile {

// A block that pushes (producer) or pops (consumer) when it goes out of scope.
template <class CBT, bool Producer>
class ScopedBlock : public Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th, !Producer> {
 public:
  ScopedBlock(abi::BlockRef ref, abi::Loc l)
      : Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th, !Producer>(ref),
        loc_(detail::scope_end(l)) {}
  ScopedBlock(const ScopedBlock&) = delete;
  ScopedBlock& operator=(const ScopedBlock&) = delete;
  ~ScopedBlock() {
    if (Producer)
      KILN_TILE_RT(cb_push)(CBT::id, loc_);
    else
      KILN_TILE_RT(cb_pop)(CBT::id, loc_);
  }

 private:
  abi::Loc loc_;
};

// A block one role fills and reads itself (intermediate values of a compute, e.g. an f32 copy of
// a centered row): reserved on construction, pushed and taken back (wait + pop) on destruction, so
// the CB protocol holds with no other role involved. Built on the plain CB ops only.
template <class CBT>
class ScratchBlock : public Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th> {
 public:
  ScratchBlock(abi::BlockRef ref, abi::Loc l)
      : Block<typename CBT::value_type, CBT::rows, CBT::cols, CBT::th>(ref), loc_(detail::scope_end(l)) {}
  ScratchBlock(const ScratchBlock&) = delete;
  ScratchBlock& operator=(const ScratchBlock&) = delete;
  ~ScratchBlock() {
    KILN_TILE_RT(cb_push)(CBT::id, loc_);
    KILN_TILE_RT(cb_wait)(CBT::id, loc_);
    KILN_TILE_RT(cb_pop)(CBT::id, loc_);
  }

 private:
  abi::Loc loc_;
};

// A circular buffer of blocks of R x C tiles of T, tiles of TH x 32 elements (ring depth = the
// host's buffer factor); Id is its index in the program (a constant, so the runtime's CB
// bookkeeping folds into the kernel).
template <class T, int R, int C, int Id, int TH = kTile>
struct CB {
  using value_type = T;
  using block_type = Block<T, R, C, TH>;
  using waited_type = Block<T, R, C, TH, true>;
  static constexpr int rows = R, cols = C, id = Id, th = TH;

  block_type reserve(KILN_TILE_LOC) const {
    return block_type(KILN_TILE_RT(cb_reserve)(id, detail::loc(line, file)));
  }
  void push(KILN_TILE_LOC) const { KILN_TILE_RT(cb_push)(id, detail::loc(line, file)); }
  waited_type wait(KILN_TILE_LOC) const {
    return waited_type(KILN_TILE_RT(cb_wait)(id, detail::loc(line, file)));
  }
  void pop(KILN_TILE_LOC) const { KILN_TILE_RT(cb_pop)(id, detail::loc(line, file)); }
  ScopedBlock<CB, true> scoped_reserve(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScopedBlock<CB, true>(KILN_TILE_RT(cb_reserve)(id, l), l);
  }
  ScopedBlock<CB, false> scoped_wait(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScopedBlock<CB, false>(KILN_TILE_RT(cb_wait)(id, l), l);
  }
  // A compute-local block (see ScratchBlock); the CB needs no other user.
  ScratchBlock<CB> scoped_scratch(KILN_TILE_LOC) const {
    abi::Loc l = detail::loc(line, file);
    return ScratchBlock<CB>(KILN_TILE_RT(cb_reserve)(id, l), l);
  }
};

}  // namespace kiln::tile
