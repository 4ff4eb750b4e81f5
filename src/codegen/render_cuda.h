// CUDA C++ renderer: linear program -> one `extern "C" __global__` kernel, compiled by NVRTC.
// The output loops map onto threads in one of two ways, chosen from the program's shape:
// - Elementwise: the output loops flatten into one index that a grid-stride loop of threads walks.
// - BlockReduce: one thread block per output element (grid-stride over blocks); each reduce loop is
//   split over the block's threads and their partial results combined with warp shuffles and shared
//   memory, so a row reduction (sum, max, softmax's denominators) is one coalesced pass. With few
//   outputs and a long reduce (a loss, a norm), several blocks share one output (CudaLaunch::split).
// - ColumnReduce: a reduce whose loads are contiguous along the outputs, not along the reduce (a sum
//   over rows, a bias gradient): a warp's lanes take 32 consecutive outputs, so its loads are
//   coalesced, and the block's 8 warps take every 8th row; the reduce is cut into `split` chunks
//   along gridDim.y, and the last block of each column of blocks to finish combines the chunks'
//   partial results in a fixed order.
// Lanes: a thread takes 4 consecutive values of the innermost output loop (Elementwise) or of each
// loop split over a block's threads (BlockReduce), so a contiguous load or store of 4 such values is
// one vector access (16 bytes for f32) and each thread has 4 independent loads in flight.
// A row that several loops of a BlockReduce kernel read (a softmax's max, sum and output; a layer
// norm's statistics and output) is read from memory once: the first loop keeps it in shared memory.
#pragma once
#include <cstdint>
#include <string>

#include "codegen/device_limits.h"
#include "codegen/program.h"

namespace kiln::codegen {

struct CudaLaunch {
  // Grid: a hand-written kernel (codegen/flash_attention.h) of exactly `work` blocks
  enum class Kind { Elementwise, BlockReduce, ColumnReduce, Grid } kind = Kind::Elementwise;
  int64_t work = 1;  // output elements: threads' iterations (Elementwise) or blocks' (BlockReduce)
  int block = 256;   // threads per block
  // BlockReduce over few outputs: `split` blocks share each output's reduce; the last to finish
  // combines their partial results (in a fixed order) from a scratch buffer of `scratch_bytes`,
  // passed as one more kernel parameter, whose counters start at zero and are left at zero.
  int split = 1;
  int64_t scratch_bytes = 0;
  int64_t counters_offset = 0;  // bytes of partial results before the counters
  // BlockReduce: dynamic shared memory for rows that several of the block's loops read (read from
  // memory once, by the first loop; see render_cuda.cpp)
  int64_t smem_bytes = 0;
  // BlockReduce: bytes of rows a block reads from memory more than once (past the shared-memory
  // budget); the launch runs few enough blocks at once for L2 to hold them all
  int64_t reread_bytes = 0;
  // Consecutive values a thread takes of a laned loop (see above). Over 1, the kernel's buffers must
  // be 16-byte aligned.
  int lanes = 1;
  int step = 1;     // Elementwise: outputs a thread takes a step of its grid-stride loop (lanes, or 1)
  int columns = 0;  // ColumnReduce: outputs a block takes (one a warp lane; the warps take rows)
  int group = 1;    // Elementwise: threads sharing one output's short reduce (a power of two, <= 32)
};

struct CudaKernel {
  std::string source;  // without the prelude
  CudaLaunch launch;
};

// `limits`: the device's; its shared memory per block bounds the rows a block keeps (see above).
CudaKernel render_cuda(const Program& p, const DeviceLimits& limits = {});
const char* cuda_prelude();  // types, half conversions and block reductions shared by all kernels

}  // namespace kiln::codegen
