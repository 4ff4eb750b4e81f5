// Introspection settings (KILN_DEBUG, KILN_NOOPT, KILN_VALIDATE, ...) and runtime counters.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

struct Settings {
  int debug = 0;           // KILN_DEBUG: 1 schedule summary, 2 per-kernel timing, 3 schedule+opts,
                           // 4 source, 5 kernel AST + linear program, 6 graph after each rewrite
  bool noopt = false;      // KILN_NOOPT=1: no kernel optimizations
  bool validate = false;   // KILN_VALIDATE=1: check every kernel against the reference interpreter
  bool fast_math = false;  // KILN_FAST_MATH=1: allow x*0 -> 0 on floats
  // KILN_HFUSE: horizontal fusion of independent elementwise kernels (an optimizer's per-parameter
  // updates): 0 never, 1 in the steps a kiln::Jit records (their replays save the launches; a
  // one-off realize would only pay the grouped kernel's compile), 2 in every realize
  int hfuse = 1;
  // KILN_DETERMINISTIC=1: results bit-identical run to run on the GPU too: no atomic scatter-adds
  // (an embedding's gradient is then a sum over the vocabulary for every token, much slower)
  bool deterministic = false;
  int threads = 0;  // KILN_THREADS: worker threads where > 0, else all cores (a value set
                    // here is checked like the variable where the threads start)
  std::string cc;   // KILN_CC (default: cc, gcc or clang on PATH)
  std::string cxx;  // KILN_CXX, for tile kernels (default: c++, g++ or clang++ on PATH)
  // KILN_CFLAGS: appended to every kernel compile (C and tile C++); a sanitized build
  // (KILN_SANITIZE) starts it with its -fsanitize flags and defaults cc/cxx to its own compilers
  std::string cflags;
  // KILN_CACHE_DIR (default $XDG_CACHE_HOME/kiln, ~/.cache/kiln, or /tmp/kiln-cache-<uid> made 0700);
  // one that cannot be used gives a warning and a private temporary directory instead
  std::string cache_dir;
  bool tf32 = false;       // KILN_TF32=1: f32 matmuls on CUDA may use TF32 tensor cores (cuBLASLt)
  bool profile = false;    // KILN_PROFILE=1: time each schedule's kernels on the device (Stats::device_ms)
  bool cuda_graph = true;  // KILN_CUDA_GRAPH=0: kiln::Jit replays on CUDA launch each kernel, no CUDA graph
  bool cuda_lineinfo = false;  // KILN_CUDA_LINEINFO=1: NVRTC adds line tables (Nsight Compute's source view)
  // KILN_LAYERNORM=tile: F::layer_norm builds LAYER_NORM nodes that the tile runner runs with the
  // kernels of kernels/layernorm (forward and backward; f32/bf16 on the CPU and Hopper GPUs, their
  // composite elsewhere) instead of the generated kernels ("generated")
  std::string layernorm = "generated";
  std::string device = "cpu";   // KILN_DEVICE: where tensors that name no device go
  std::string nvrtc, cublaslt;  // KILN_NVRTC, KILN_CUBLASLT: library paths tried first
  int tile_timeout_ms = 0;      // KILN_TILE_TIMEOUT_MS: ms a tile launch may go without progress
                                // (0: 2000 on the GPU, 10000 on the CPU)
  int tile_trace = -1;          // KILN_TILE_TRACE: the core whose GPU timeline is recorded (-1: none)
  int tile_trace_last = 0;      // KILN_TILE_TRACE_LAST: that core's last n events printed in order
  int tile_compute_warps = 4;   // KILN_TILE_COMPUTE_WARPS: warps of a tile program's compute role
  int fuzz_files = 0;           // KILN_FUZZ_FILES: mutants per format of the file-fuzzing test (0: 500)
  // KILN_VIZ=1: after every realize, write the compiler viewer page (graphs, fusion, kernels, times)
  // to KILN_VIZ_OUT (default kiln_viz.html); each kernel is then timed alone, as at KILN_DEBUG=2
  std::string viz;
  std::string viz_out;
};
// Read once from the environment (every KILN_* variable is declared in src/ir/settings.cpp;
// `kiln info` lists them); an invalid value is a kiln::Error naming the variable, the value and
// what is allowed, thrown by every call. Tests may change the fields.
Settings& settings();

struct Stats {
  int64_t kernels_run = 0;
  int64_t schedules = 0;
  int64_t compiler_invocations = 0;  // calls of the C compiler
  int64_t kernels_compiled = 0;
  int64_t memory_cache_hits = 0;
  int64_t disk_cache_hits = 0;
  double device_ms = 0;       // with Settings::profile: device time of the kernels run (first launch to last)
  int64_t tile_launches = 0;  // tile programs run (src/tile)
  int64_t tile_cluster_launches = 0;  // of those, GPU launches in thread-block clusters (multicast)
  int64_t arena_bytes = 0;            // memory-plan arenas allocated (their planned peaks, summed)
  int64_t arena_no_reuse_bytes = 0;   // what their intermediates would take without reuse
  int64_t jit_replays = 0;            // kiln::Jit calls answered by replaying a captured step
  int64_t gemm_launches = 0;          // matmuls a realize ran in the GEMM library (cuBLASLt)
  int64_t attention_launches = 0;  // flash-attention kernels a realize ran (F::scaled_dot_product_attention)
  int64_t graph_captures = 0;      // CUDA graphs captured for replays (one per new set of buffers)
  int64_t graph_launches = 0;      // CUDA graphs launched (each runs a replay's kernels)
};
Stats& stats();
// Forget compiled kernels held in memory (the kernel cache on disk stays): the next run loads from disk.
void clear_memory_cache();

}  // namespace kiln
