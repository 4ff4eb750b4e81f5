// Kernel optimizations on the AST, before linearization (KILN_NOOPT=1 turns them off).
#pragma once
#include <string>
#include <vector>

#include "ir/node.h"

namespace kiln::codegen {

// Folds one-hot sums into indexed loads: sum over r of where(r == e && c, v(r), 0), e free of r,
// becomes where(0 <= e < n && c, v(e), 0) (gather, embedding, a class-index loss's target term).
ir::NodeRef fold_onehot_sums(const ir::NodeRef& ast, std::vector<std::string>& log);
// The value of sum over r of `body` when body is a one-hot selection along r (possibly scaled by
// factors free of r, or cast): body with r := e, kept to the selection's condition and to
// 0 <= e < size of r; `index`, if given, gets that e (0 where out of range). nullptr otherwise.
ir::NodeRef select_onehot(const ir::NodeRef& body, const ir::NodeRef& r, ir::NodeRef* index = nullptr);
// Merges adjacent output loops when that makes index math no more expensive (contiguous access
// becomes one flat loop). Returns the new AST; `log` collects the opts taken (KILN_DEBUG=3).
ir::NodeRef collapse_loops(const ir::NodeRef& ast, std::vector<std::string>& log);
// A reduce loop whose indices divide it by c (a matmul reading heads merged back into a row: k / 32,
// k % 32) becomes two loops, outer and inner c, where that makes the index math cheaper: the inner
// loop then steps through memory one element at a time. So does the innermost output loop.
ir::NodeRef split_reduce_loops(const ir::NodeRef& ast, std::vector<std::string>& log);
// Adjacent loops of one reduce become one loop where the indices stay as simple (a sum over
// (batch, time) rows of a contiguous tensor is one long loop, which the GPU splits over blocks).
// With split_long_sums (the GPU), a long reduce with few outputs is collapsed even where that costs
// a division and a modulo per element (an input broadcast over the batch): as one loop it is split
// over blocks, where two loops run in one thread per output.
ir::NodeRef collapse_reduce_loops(const ir::NodeRef& ast, std::vector<std::string>& log,
                                  bool split_long_sums = false);
// Makes independent reduces over loops of the same sizes share one set of reduce ranges, so they
// run in one loop (x.sum(1) + x.max(1) reads x once).
ir::NodeRef merge_reduces(const ir::NodeRef& ast, std::vector<std::string>& log);
// SWAP (loop_order.cpp, CPU): a reduce whose outermost output loop does not move a large operand
// that a later output loop moves (x @ w.T with a few rows of x: every row streams all of w from
// memory) gets that later loop outermost, so each part of the large operand is read from memory once
// and the former outer loop's steps reuse it from cache. Where the large operand has at least
// kSwapMinBytes and 16 times the bytes of every operand the outer loop moves.
constexpr int64_t kSwapMinBytes = int64_t{1} << 20;
ir::NodeRef order_output_loops(const ir::NodeRef& ast, std::vector<std::string>& log);
// PACK (pack_operand.cpp, CPU): a matmul operand that steps along the reduce by one element but
// along the output's last loop by many (x @ w.T) is copied into a per-thread scratch (a global one
// past the kernel's, which the launcher provides: Program::scratch_bytes) with that loop innermost;
// the kernel reads the copy, which register tiles load as vectors. The copy is a STORE to the scratch
// under loops of kind kPackRange, made inside the output loops it depends on (a prefix of them), and
// only where the loops between reuse it at least kPackMinReuse times.
constexpr int64_t kPackMinReuse = 16, kPackMaxBytes = int64_t{4} << 20, kPackBlock = 16;
struct Packed {
  ir::NodeRef ast;
  int64_t scratch_bytes = 0;  // 0: nothing packed
};
Packed pack_operand(const ir::NodeRef& ast, std::vector<std::string>& log);
// Register tiling for reduces: the innermost output loop is split into (n/k, k) and the k lanes
// become an upcast loop inside the reduce loops, each lane with its own accumulator, so the
// reduce's loads are shared and the lanes vectorize (matmul, convolution).
// The tile is up to rows x cols (the largest of cols, 16, 8, 4 columns and rows, 8, 4 rows that
// divide the loops), sized to the vector registers; CPU only.
struct RegisterTile {
  int64_t rows, cols;
};
constexpr int64_t kMinTileCols = 4;
// The tile for vector registers of `vector_bytes`: 16 x 32 floats with AVX-512 (32 registers of
// 16), 8 x 16 with AVX2 (16 of 8; 16 x 32 would spill), 8 x 8 with 16-byte vectors (by register
// count). Measured in bench/RESULTS.md.
RegisterTile register_tile(int vector_bytes);
ir::NodeRef upcast_reduce_output(const ir::NodeRef& ast, RegisterTile tile, std::vector<std::string>& log);
// DOT (dot_lanes.cpp, CPU): where no register tile applies because the large operand steps along
// the sum, not along an output loop (x @ w.T with few rows of x: each output is a dot product of
// contiguous rows, as in every matrix-vector product of a decoding step), the sum's one loop whose
// loads all step by one element is split into (k / v, v) with the v lanes (a vector) as one more
// loop of the REDUCE (kind kUpcastRange: an accumulator per lane, added up after the loop), and up to
// kDotRows rows of the innermost output loop it moves with become unrolled lanes: kDotRows
// independent chains of vector fused multiply-adds that share the loads that do not move with the
// rows (a vector of x for 8 rows of w; a vector of w for 8 rows of x), where one chain waited on the
// last add of each row. Where no power of two up to kDotRows divides the innermost output loop (an
// odd vocabulary), that loop is padded to a multiple of kDotRows (PAD_ROWS): the rows past its end
// read its last row again (clamped indices keep the loads plain vector loads) and store nothing.
// Only for one float sum of at least kDotMinVectors vectors that moves with every output loop: in a
// shorter one adding the lanes up costs about what the loop does (attention scores over a head of 64,
// one query against a cache of keys, took 1.4x as long with the lanes; bench/RESULTS.md).
constexpr int64_t kDotRows = 8, kDotMinVectors = 16;
ir::NodeRef dot_lanes(const ir::NodeRef& ast, int vector_bytes, std::vector<std::string>& log);
// The CPU's threads split a kernel's outermost output loop; while it has fewer than
// kStepsPerThread steps a thread, it is merged with the next output loop (thread_loops.cpp).
constexpr int64_t kStepsPerThread = 4;
ir::NodeRef thread_outer_loops(const ir::NodeRef& ast, int threads, std::vector<std::string>& log);
// Long float sums accumulate in chunks: a sum over more than 2 * kSumChunk elements becomes a sum
// of per-chunk sums (each about kSumChunk long), so rounding error grows with about
// log(N) / log(kSumChunk) chunk levels of about kSumChunk additions each instead of N. Runs after
// the other opts (its nested sums keep their lanes).
constexpr int64_t kSumChunk = 1024;
ir::NodeRef chunk_long_sums(const ir::NodeRef& ast, std::vector<std::string>& log);
// Whether every op-node (LOAD or STORE) under roots whose index moves with range r moves by one.
bool unit_stride(const std::vector<ir::NodeRef>& roots, const ir::NodeRef& r, ir::Op op);
// Whether n depends on range r.
bool moves_with(const ir::NodeRef& n, const ir::NodeRef& r);
// Renumbers RANGE ids: output loops 0..n-1 in order, then reduce loops, upcast loops, pack loops.
ir::NodeRef renumber_ranges(const ir::NodeRef& ast);

}  // namespace kiln::codegen
