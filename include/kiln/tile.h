// The tile programming model, host side: a program is a grid of cores running a kernel source
// (reader / compute / writer roles talking through circular buffers, see kiln/tile/kernel.h).
// The host declares tensors, CBs, semaphores and arguments; run() compiles (cached) and launches.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::tile {

inline constexpr int64_t kTileSize = 32;

// The most cores a program may have: each costs a CPU launch a stack per role (256 KB) and its CBs,
// a GPU launch a thread block.
inline constexpr int64_t kMaxCores = 65536;

// The cores a program runs on: a plain count (no topology: multicast and core_x/core_y are compile
// errors) or a rows x cols grid (core (x, y) = (column, row), index = y * cols + x); at most
// kMaxCores in all.
struct Grid {
  static Grid cores(int n);
  static Grid grid2d(int rows, int cols);
  int size() const { return rows * cols; }
  bool is_2d = false;
  int rows = 1, cols = 1;
};

// How an accessor's slices count: whole 32x32 tiles (edge tiles of unaligned tensors are padded on
// read and clipped on write) or single elements (any rectangle that fits a block).
enum class Indexing { Tiles, Elements };
// What an output holds before a run: zeros, or (Fill::None, for outputs the kernel writes whole)
// whatever the GPU's allocator hands out; the CPU backend always zero-fills.
enum class Fill { Zeros, None };

// One core's share of a split: units [start, start + count).
struct Work {
  int64_t start = 0, count = 0;
};
// Splits `units` over `cores` in contiguous ranges whose sizes differ by at most one; cores past
// the work get count 0.
std::vector<Work> split_work(int64_t units, int cores);

// The source of a kernel shipped with kiln (kernels/<path>, e.g. "eltwise/binary.cpp").
std::string library_kernel(const std::string& path);

class Program {
 public:
  // `file` names the source in messages and __builtin_FILE() (default: name + ".cpp").
  Program(std::string name, std::string source, Grid grid, std::string file = "");
  // A kernel shipped with kiln (see library_kernel).
  static Program from_library(const std::string& path, Grid grid);

  // Tensors are seen by kernels as 2D (all leading dims, last dim). Inputs are read-only (any
  // float tensor; f32 and bf16 kernels); binding a name again replaces the tensor.
  Program& input(const std::string& name, const Tensor& t, Indexing indexing = Indexing::Tiles);
  // Binds another tensor of the same dtype to a declared input, its indexing kept: a program kept
  // between calls runs again on new tensors without being declared, laid out or compiled again.
  Program& bind(const std::string& name, const Tensor& t);
  // Drops every bound input and every result, declarations kept, so that a program kept between
  // calls holds no memory; its inputs must be bound again before the next run().
  Program& release();
  // An output written by the kernel; zero-filled before each run unless `fill` says otherwise.
  Program& output(const std::string& name, Shape shape, DType dtype, Indexing indexing = Indexing::Tiles,
                  Fill fill = Fill::Zeros);
  // A circular buffer named `name` in kernels, of blocks of rows x cols tiles. Tiles are 32x32
  // elements, or tile_rows x 32 (1, 2, 4, 8 or 16: short tiles) where a block needs fewer rows: a
  // row vector (tile_rows 1), or a few whole rows of a long row. Blocks of short tiles move through
  // element-indexed accessors.
  Program& cb(const std::string& name, int rows, int cols, DType dtype, int buffer_factor = 2,
              int tile_rows = 32);
  Program& semaphore(const std::string& name);
  // A compile-time constant: `constexpr long long name = value;` in the kernel.
  Program& constant(const std::string& name, int64_t value);
  // Names of the per-core runtime arguments (kernel: args().name) and their values per core;
  // cores without values get zeros.
  Program& runtime_args(std::vector<std::string> names);
  Program& set_runtime_args(int core, std::initializer_list<int64_t> values);
  Program& set_runtime_args(int core, const std::vector<int64_t>& values);
  // The role functions the kernel defines (default: reader and writer move data, compute computes).
  Program& roles(std::vector<std::string> data_movement, std::string compute);
  // On a GPU, the warps of each core's compute role: 1, 2, 4, 8 or 16 (default: 4, or
  // KILN_TILE_COMPUTE_WARPS). More warps overlap more of a compute's shared-memory latency; each
  // costs 24 bytes of shared memory per CB. The CPU backend runs a role on one thread whatever this is.
  Program& gpu_compute_warps(int warps);

  // Shared memory the CBs declared so far take per core on the GPU: blocks x buffer factors plus
  // the GPU backend's barriers and counters (40 bytes per buffer slot and 24 per CB per warp, the
  // whole 128-byte aligned).
  int64_t cb_bytes() const;
  // What a program's CBs may take per core on the CPU: the memory its backend allows a core
  // (runtime::Backend::limits().tile_core_bytes: a Hopper GPU's shared memory per block, so that an
  // oversize kernel fails without a GPU too) less the runtime's own per-block state. run() throws
  // beyond it (on a GPU: that device's shared memory per block, less the same state), listing the CBs.
  static int64_t cb_bytes_limit();

  // Compiles the kernel if this exact program was not compiled before (in memory or on disk),
  // then runs every core; throws kiln::Error on a compile error or a failed debug check. The
  // program runs where its inputs are: on the CPU, or on the GPU that holds them (core = thread
  // block; outputs are then on that GPU too; a GPU deadlock is reported after KILN_TILE_TIMEOUT_MS,
  // default 2000). On the CPU a launch that makes no progress for KILN_TILE_TIMEOUT_MS (default
  // 10000) while a role runs kernel code is an error too (docs/tile.md, section 9).
  void run();
  // An output's value after run().
  Tensor result(const std::string& name) const;
  // The full C++ source handed to the compiler (prelude + kernel + entry point).
  std::string generated_source() const;
  // The full CUDA C++ NVRTC compiles when the program runs on a GPU (kernel headers pasted in).
  std::string generated_cuda_source() const;

  struct Desc;  // everything declared (src/tile/program_desc.h)
  // The declarations, for the tile layer's runners (src/tile/runner_launch.h).
  const std::shared_ptr<Desc>& desc() const { return d_; }

 private:
  Program& set_runtime_args(int core, const int64_t* values, size_t n);
  std::shared_ptr<Desc> d_;
};

}  // namespace kiln::tile
