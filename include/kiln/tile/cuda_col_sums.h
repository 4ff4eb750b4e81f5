// ColSums' state on a GPU: each compute thread's sums of the columns its stores write, in registers.
// The CPU's: cpu_col_sums.h. Part of kernel.h, which defines the macros it uses (KILN_TILE_RT).
#pragma once
#include "kiln/tile/cuda_device.h"
#include "kiln/tile/kernel_eval.h"

namespace kiln::tile::detail {

template <int H, int W>
class ColSumsState {
  static constexpr int kWarps = KILN_TILE_COMPUTE_WARPS;
  // Blocks of fewer rows than warps share each row among kQ warps (each a part of the columns), in
  // kP groups of rows; a warp's lanes take kV consecutive columns, 32 * kV apart.
  static constexpr int kQ =
      H % kWarps == 0 || kWarps % H != 0 || W % (kTile * (kWarps / H)) != 0 ? 1 : kWarps / H;
  static constexpr int kP = kWarps / kQ, kPart = W / kQ, kV = kPart % 128 == 0 ? 4 : 1,
                       kChunks = kPart / (32 * kV);
  // the threads take the elements the stores into a row-local block give them (for_rows)
  static constexpr bool kOwn = kQ == 1 && detail::row_local(H, W, kWarps);
  float s_[kChunks * kV] = {};
  // column of the thread's sum k
  static int col(int k) { return cuda::warp() / kP * kPart + kV * cuda::lane() + k / kV * 32 * kV + k % kV; }

 public:
  // add() of an expression (as_expr already applied) on behalf of the call at l.
  template <class X>
  void add_at(const X& ex, abi::Loc l) {
    KILN_TILE_RT(compute_only)("ColSums::add", l);
    auto b = ex.bind(l);
    cuda::compute_begin(decltype(b)::crosses(kOwn ? detail::kAtElement : detail::kAnywhere, kOwn, kWarps));
    const int c0 = col(0);
    for (int i = cuda::warp() % kP; i < H; i += kP) {
#pragma unroll
      for (int k = 0; k < kChunks; k++) {
        if constexpr (kV == 4)
          add4(k, b.at4(i, c0 + k * 128));
        else
          s_[k] += b.at(i, c0 + k * 32);
      }
    }
    cuda::trace(cuda_abi::kTraceStoreEnd, 0);
  }
  // A store of a block of H x W elements going through cuda::for_rows four columns at a time hands
  // each thread the elements this thread sums (sum_into: the sums then join the store's pass).
  static constexpr bool kJoinsStores = kOwn && kV == 4;
  // Adds four consecutive columns of a row at chunk k (columns col(4k) to col(4k + 3); kV == 4).
  void add4(int k, const detail::F4& x) {
#pragma unroll
    for (int c = 0; c < 4; c++) s_[4 * k + c] += x.v[c];
  }
  // Writes the sums into element row 0 of `out` (width W, `rows` element rows; the rest are 0).
  void write(float* out, int rows, abi::Loc l) const {
    KILN_TILE_RT(compute_only)("ColSums store", l);
    cuda::compute_begin(true);  // every warp is done reading the block
    for (int e = cuda::role_rank(); e < (rows - 1) * W; e += cuda::role_size()) out[W + e] = 0.0f;
    for (int g = 0; g < kP; g++) {  // the row groups in turn: the first writes, the others add
      if (cuda::warp() % kP == g)
#pragma unroll
        for (int k = 0; k < kChunks * kV; k++) out[col(k)] = g == 0 ? s_[k] : out[col(k)] + s_[k];
      cuda::role_sync();
    }
    cuda::compute_end(false);
  }
};

}  // namespace kiln::tile::detail
