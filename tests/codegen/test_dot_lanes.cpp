// DOT (dot_lanes): dot products of contiguous rows (x @ w.T with few rows of x) summed in vector lanes,
// several output rows at once; the opts taken and results against the reference interpreter.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <array>

#include "codegen/cpu_opts.h"
#include "codegen/passes.h"
#include "helpers.h"
#include "ir/graph_rewrite.h"
#include "schedule/schedule.h"

using namespace kiln;
using kiln::testing::expect_matches_reference;
using kiln::testing::opts_of;

namespace {

// The last kernel lowered for the CPU with AVX2's 32-byte vectors (8 f32 lanes).
codegen::Lowered lower_last(const Tensor& t) {
  auto sched = schedule::make_schedule(ir::rewrite_graph({t.node()}));
  return codegen::lower(sched.kernels.back().ast, codegen::Target::CPU,
                        {.vector_bytes = 32, .scratch = true});
}

Tensor rand(const Shape& s, uint64_t seed) { return kiln::testing::rand_f32(s, seed); }

Tensor linear(const Tensor& x, const Tensor& w) { return x.matmul(w.transpose(0, 1)); }

}  // namespace

// One row of x (a decoding step): the sum over k in 8 lanes, 8 rows of w at once where 8 divides
// them, fewer (4, 2) where those do; otherwise 8, the rows padded (an odd vocabulary): the rows past
// the end read the last row and store nothing.
TEST(DotLanes, MatrixVectorProducts) {
  for (auto [n, rows] :
       std::vector<std::array<int64_t, 2>>{{48, 8}, {36, 4}, {10, 2}, {37, 8}, {9, 8}, {5, 0}}) {
    Tensor y = linear(rand({1, 128}, 1), rand({n, 128}, 2));
    std::string opts = opts_of(lower_last(y));
    EXPECT_NE(opts.find("DOT 8 "), std::string::npos) << n << ": " << opts;
    EXPECT_EQ(opts.find("UPCAST " + std::to_string(rows) + " ") != std::string::npos, rows != 0)
        << n << ": " << opts;
    EXPECT_EQ(opts.find("PAD_ROWS") != std::string::npos, n % 2 != 0 && n > 8) << n << ": " << opts;
    EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5)) << n;
  }
  // a bias and an epilogue on padded rows
  Tensor w = rand({37, 128}, 3), b = rand({37}, 4);
  Tensor z = (linear(rand({1, 128}, 5), w) + b).relu();
  EXPECT_NE(opts_of(lower_last(z)).find("PAD_ROWS 37->40"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(z, 1e-5, 1e-5));
}

// A few rows of x (a batch of sequences decoding): the rows of x are the lanes, sharing each vector
// of w; odd counts of rows and columns.
TEST(DotLanes, FewRowsOfX) {
  for (auto [m, n] : std::vector<std::array<int64_t, 2>>{{8, 40}, {3, 17}, {5, 1}, {2, 96}}) {
    Tensor y = linear(rand({m, 160}, 3), rand({n, 160}, 4));
    EXPECT_NE(opts_of(lower_last(y)).find("DOT 8"), std::string::npos) << m << "x" << n;
    EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5)) << m << "x" << n;
  }
}

// Sums of fewer than 16 vectors, or not a whole number of vectors, are left alone; a sum long enough to
// be chunked (CHUNK_SUM) keeps its lanes inside each chunk.
TEST(DotLanes, ShortUnevenAndChunkedSums) {
  for (int64_t k : {24, 64, 100, 132}) {
    Tensor y = linear(rand({1, k}, 5), rand({16, k}, 6));
    EXPECT_EQ(opts_of(lower_last(y)).find("DOT"), std::string::npos) << k;
    EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5)) << k;
  }
  Tensor y = linear(rand({2, 3072}, 7), rand({12, 3072}, 8));
  std::string opts = opts_of(lower_last(y));
  EXPECT_NE(opts.find("DOT 8"), std::string::npos) << opts;
  EXPECT_NE(opts.find("CHUNK_SUM"), std::string::npos) << opts;
  EXPECT_TRUE(expect_matches_reference(y, 1e-5, 1e-5));
  // 5000: 625 vectors, in chunks of 125; every element counted once (integers sum exactly)
  Tensor s = rand({6, 5000}, 9).sum(1);
  EXPECT_NE(opts_of(lower_last(s)).find("DOT 8"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(s, 1e-4, 1e-4));
  // 3112: 389 vectors, chunks of 128 and a last chunk of 5
  for (int64_t k : {5000, 3112}) {
    Tensor ones = (rand({6, k}, 10) * 0 + 1).sum(1);
    for (float v : ones.to_vector<float>()) EXPECT_EQ(v, static_cast<float>(k));
    EXPECT_TRUE(expect_matches_reference(rand({3, k}, 11).sum(1), 1e-4, 1e-4));
  }
}

// As in a transformer's decoding step: a layer norm computed in the product, bias and gelu after it;
// attention scores of one query against a cache; f64 (4 lanes) and bf16 operands.
TEST(DotLanes, FusedDecodingShapes) {
  Tensor x = rand({1, 128}, 10), w = rand({24, 128}, 11), b = rand({24}, 12);
  Tensor h = (linear(F::layer_norm(x, {128}, rand({128}, 13), rand({128}, 14)), w) + b).gelu(true);
  EXPECT_NE(opts_of(lower_last(h)).find("DOT 8"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(h, 1e-5, 1e-5));
  Tensor q = rand({2, 3, 1, 32}, 15), k = rand({2, 3, 40, 32}, 16);
  Tensor att = (q.matmul(k.transpose(2, 3)) * 0.125).softmax(-1);
  EXPECT_TRUE(expect_matches_reference(att, 1e-5, 1e-6));
  Tensor y64 = linear(rand({3, 64}, 17).to(DType::F64), rand({20, 64}, 18).to(DType::F64));
  EXPECT_NE(opts_of(lower_last(y64)).find("DOT 4"), std::string::npos);
  EXPECT_TRUE(expect_matches_reference(y64, 1e-12, 1e-12));
  Tensor yh = linear(rand({1, 64}, 19).to(DType::BF16), rand({24, 64}, 20).to(DType::BF16));
  EXPECT_TRUE(expect_matches_reference(yh, 1e-2, 1e-2));
}
