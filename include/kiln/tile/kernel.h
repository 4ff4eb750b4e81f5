// The tile kernel language: what a kernel source (reader / compute / writer roles) is written
// against. The same source compiles with the host compiler (each core a worker of cooperative
// roles calling the backend through the abi::Runtime table) and with NVRTC when the generated
// prelude defines KILN_TILE_CUDA (each core a thread block, roles on warps, see cuda_device.h).
// It stays freestanding for NVRTC. The generated prelude defines KILN_TILE_GRID_2D/ROWS/COLS and the
// program's CBs, accessors, semaphores and arguments.
// The language lives in kernel_*.h, one concept each; where the backends differ, a concept's CPU and
// GPU halves are cpu_*.h and cuda_*.h. A shared part is included here before any backend's branch
// names it: NVRTC's pasting (tile/cuda/compile.cpp) puts each header where it is first named.
#pragma once
#include "kiln/tile/abi.h"

#ifndef KILN_TILE_GRID_2D
#define KILN_TILE_GRID_2D 0
#endif
#ifndef KILN_TILE_GRID_ROWS
#define KILN_TILE_GRID_ROWS 1
#endif
#ifndef KILN_TILE_GRID_COLS
#define KILN_TILE_GRID_COLS 1
#endif

#ifdef KILN_TILE_CUDA
#include "kiln/tile/cuda_device.h"
// backend calls go straight to the device runtime
#define KILN_TILE_RT(fn) ::kiln::tile::cuda::fn
#else
#include "kiln/tile/cpu_runtime.h"
// backend calls go through the table the generated entry point sets
#define KILN_TILE_RT(fn) ::kiln::tile::detail::rt->fn
#endif

// Source positions for messages. NVRTC may lack the builtins: positions then read "?:0".
#ifndef KILN_TILE_CUDA
#define KILN_TILE_HAVE_LOC 1
#elif defined(__has_builtin)
#if __has_builtin(__builtin_LINE) && __has_builtin(__builtin_FILE)
#define KILN_TILE_HAVE_LOC 1
#endif
#endif
#ifdef KILN_TILE_HAVE_LOC
#define KILN_TILE_LOC int line = __builtin_LINE(), const char *file = __builtin_FILE()
#else
#define KILN_TILE_LOC int line = 0, const char *file = "?"
#endif

// The parts; each includes those it builds on. Where the backends differ, the backend's half comes
// after the shared parts it needs and before those that use it.
#include "kiln/tile/kernel_base.h"
#ifdef KILN_TILE_CUDA
#include "kiln/tile/cuda_numeric.h"
#else
#include "kiln/tile/cpu_numeric.h"
#endif
#include "kiln/tile/kernel_eval.h"
#include "kiln/tile/kernel_grid.h"
#ifdef KILN_TILE_CUDA
#include "kiln/tile/cuda_col_sums.h"
#include "kiln/tile/cuda_eval.h"
#else
#include "kiln/tile/cpu_col_sums.h"
#include "kiln/tile/cpu_eval.h"
#endif
#include "kiln/tile/kernel_block.h"
#include "kiln/tile/kernel_cb.h"
#include "kiln/tile/kernel_col_sums.h"
#include "kiln/tile/kernel_cross_core.h"
#include "kiln/tile/kernel_dma.h"
#include "kiln/tile/kernel_expr.h"
#include "kiln/tile/kernel_ops.h"

#undef KILN_TILE_LOC
#undef KILN_TILE_RT
#undef KILN_TILE_HAVE_LOC
