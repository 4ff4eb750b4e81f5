// When a GPU store needs a barrier over the compute warps (kernel_eval.h: row_local, Reach; kernel_expr.h:
// crosses): the rules checked on the expression types the layernorm rows kernels and others store.
#include <gtest/gtest.h>

#include "kiln/tile/kernel.h"

namespace kiln::testing {
namespace {

using namespace kiln::tile::detail;

// blocks of 1 x 24 tiles of BR x 32 (a row block of C = 768), BR x 32 column vectors, 1 x 768 row
// vectors; W: taken with wait() (through the CB protocol), else stored into by the role itself
template <int BR, bool W>
using Rows = BoundBlock<float, 1, 24, BR, W>;
template <int BR, bool W>
using Col = BoundBlock<float, 1, 1, BR, W>;
template <bool W>
using RowVec = BoundBlock<float, 1, 24, 1, W>;

template <class E>
constexpr bool crosses(int dest_height, int dest_width, int warps) {
  return E::crosses(kAtElement, row_local(dest_height, dest_width, warps), warps);
}

TEST(TileStoreSync, RowLocalBlocksAreRowsPerWarp) {
  EXPECT_TRUE(row_local(8, 768, 8));   // one row per warp
  EXPECT_TRUE(row_local(16, 768, 8));  // two
  EXPECT_FALSE(row_local(4, 768, 8));  // a row over two warps
  EXPECT_TRUE(row_local(4, 32, 8));    // a column vector: its row is one warp's 32 elements
  EXPECT_FALSE(row_local(1, 768, 8));
  EXPECT_TRUE(row_local(1, 768, 1));
}

TEST(TileStoreSync, WaitedBlocksNeverNeedABarrier) {
  // reduce over rows and a broadcast row of blocks another role filled
  using E = Binary<MulOp, Reduce<0, false, Rows<8, true>>, Bcast<true, false, RowVec<true>>>;
  EXPECT_FALSE((crosses<E>(1, 768, 8)));
}

TEST(TileStoreSync, OwnBlocksReadAtTheElementNeedNone) {
  using E = Binary<AddOp, RowVec<false>, Reduce<0, false, Rows<4, true>>>;  // acc + reduce_sum<0>(x)
  EXPECT_FALSE((crosses<E>(1, 768, 4)));
}

TEST(TileStoreSync, OwnColumnVectorsBroadcastAlongRowsStayInTheWarp) {
  // out = (x - bcast_cols(mean)) * bcast_cols(rstd): mean and rstd stored by this role
  using E = Binary<MulOp, Binary<SubOp, Rows<8, true>, Bcast<false, true, Col<8, false>>>,
                   Bcast<false, true, Col<8, false>>>;
  EXPECT_FALSE((crosses<E>(8, 768, 8)));  // warp w owns row w of every block
  EXPECT_FALSE((crosses<E>(8, 768, 4)));  // rows w and w + 4
  EXPECT_TRUE((crosses<E>(8, 768, 16)));  // 16 warps on 8 rows: a row is shared
}

TEST(TileStoreSync, RowReductionsOfOwnBlocksNeedRowLocalBlocks) {
  using Sq = Binary<MulOp, Rows<8, false>, Rows<8, false>>;  // a block this role stored
  EXPECT_FALSE((crosses<Reduce<1, false, Sq>>(8, 32, 8)));   // into a column vector, row by warp
  EXPECT_TRUE((crosses<Reduce<1, false, Binary<MulOp, Rows<4, false>, Rows<4, false>>>>(4, 32, 8)));
}

TEST(TileStoreSync, ReadingOwnBlocksAnywhereElseNeedsABarrier) {
  EXPECT_TRUE((crosses<Reduce<0, false, Rows<8, false>>>(1, 768, 8)));
  EXPECT_TRUE((crosses<Bcast<true, false, RowVec<false>>>(8, 768, 8)));  // row 0 is warp 0's
  EXPECT_TRUE((crosses<Bcast<true, true, Col<8, false>>>(8, 768, 8)));
}

}  // namespace
}  // namespace kiln::testing
