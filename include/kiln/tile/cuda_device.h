// The tile runtime on a GPU, compiled with the kernel by NVRTC (kernel.h includes it when the
// generated prelude defines KILN_TILE_CUDA). A core is a thread block: the compute role runs on
// KILN_TILE_COMPUTE_WARPS warps (warps 0.., so a future wgmma warpgroup starts at warp 0), each
// data-movement role on one warp after them. Every thread of a role runs the role's code with the
// same control flow (kernel code depends only on block-uniform values).
// CBs are rings in dynamic shared memory. Each slot has a `full` and an `empty` mbarrier and a `dma`
// one; every warp keeps its own CB counters, so CB operations never synchronize a role's warps with
// each other: each warp waits on the barrier itself and every lane arrives for itself (a role's
// threads together arrive kSlotArrivals times), so each thread's own arrival releases its accesses
// to the block (an ordering a race checker can follow, unlike one leader arriving after a warp
// barrier). DMA reads are bulk copies (the TMA engine, cp.async.bulk) that complete the slot's
// `dma` barrier by transaction bytes; DMA writes are bulk copies from shared memory to global memory. Slices
// the bulk engine cannot copy (unaligned rows) move element by element. Semaphores and multicast mailboxes
// live in global memory; a 2D grid that multicasts runs in thread-block clusters, and a multicast to a core
// of the sender's cluster writes straight into the receiver's slot through distributed shared memory. Every
// wait has a watchdog: past the launch's timeout the role's leader writes an error record, raises the
// launch-wide abort flag and the whole role exits; other roles stop at their next wait.
// The parts, one concern each: cuda_block_state.h (threads, roles, shared state), cuda_ptx.h,
// cuda_cb_layout.h, cuda_watchdog.h (trace, failures, waits), cuda_grid.h, cuda_cb.h, cuda_dma.h,
// cuda_cluster.h, cuda_mcast.h, cuda_transfer.h, cuda_semaphore.h, cuda_compute.h (stores' thread
// mapping), cuda_entry.h (block start and end).
#pragma once
#include "kiln/tile/cuda_block_state.h"
#include "kiln/tile/cuda_cb.h"
#include "kiln/tile/cuda_cb_layout.h"
#include "kiln/tile/cuda_cluster.h"
#include "kiln/tile/cuda_compute.h"
#include "kiln/tile/cuda_dma.h"
#include "kiln/tile/cuda_entry.h"
#include "kiln/tile/cuda_grid.h"
#include "kiln/tile/cuda_mcast.h"
#include "kiln/tile/cuda_ptx.h"
#include "kiln/tile/cuda_semaphore.h"
#include "kiln/tile/cuda_transfer.h"
#include "kiln/tile/cuda_watchdog.h"
