// Tensors and data movement: accessors, slices, asynchronous transfers between tensors and blocks.
// Part of kernel.h, which defines the macros it uses (KILN_TILE_RT, KILN_TILE_LOC).
#pragma once
#include "kiln/tile/kernel_block.h"

namespace kiln::tile {

// ---- tensors and data movement ----
template <class T>
struct TensorSlice {
  int tensor;
  abi::Slice s;
};

// A bound tensor seen as 2D (rows, cols); slices count in tiles or elements (the host decides). Id:
// its index in the program.
template <class T, Indexing I, int Id>
struct Accessor {
  static constexpr int id = Id;
  // rows [row, row + rows) x cols [col, col + cols), in the accessor's units
  TensorSlice<T> slice(long long row, long long col, long long rows = 1, long long cols = 1) const {
    return TensorSlice<T>{id, abi::Slice{row, col, rows, cols}};
  }
  TensorSlice<T> operator()(long long row, long long col) const { return slice(row, col); }
  long long rows() const {
    long long r, c;
    KILN_TILE_RT(tensor_dims)(id, &r, &c);
    return r;
  }
  long long cols() const {
    long long r, c;
    KILN_TILE_RT(tensor_dims)(id, &r, &c);
    return c;
  }
};

// An asynchronous copy; the blocks it touches may not be used until wait() returns.
struct Transfer {
  int id;
  void wait(KILN_TILE_LOC) const { KILN_TILE_RT(transfer_wait)(id, detail::loc(line, file)); }
};

// tensor slice -> block; the slice must have the block's shape in tiles (tile accessors) or fit in
// it (element accessors); elements outside the tensor or the slice read as `pad`.
template <class T, int R, int C, int TH, bool W>
Transfer dma(const TensorSlice<T>& src, const Block<T, R, C, TH, W>& dst, float pad, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_read)(src.tensor, src.s, dst.ref(), pad, detail::loc(line, file))};
}
template <class T, int R, int C, int TH, bool W>
Transfer dma(const TensorSlice<T>& src, const Block<T, R, C, TH, W>& dst, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_read)(src.tensor, src.s, dst.ref(), 0.0f, detail::loc(line, file))};
}
// block -> tensor slice; only the part of the slice inside the tensor is written.
template <class T, int R, int C, int TH, bool W>
Transfer dma(const Block<T, R, C, TH, W>& src, const TensorSlice<T>& dst, KILN_TILE_LOC) {
  return Transfer{KILN_TILE_RT(dma_write)(src.ref(), dst.tensor, dst.s, detail::loc(line, file))};
}

}  // namespace kiln::tile
