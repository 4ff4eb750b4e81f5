// The tile runtime on a GPU (part of cuda_device.h): the thread block's layout (compute warps, then
// a warp per data-movement role), its state in shared memory (launch parameters, runtime args, the
// dynamic region of CB barriers and rings), who the calling thread is, and the role barrier.
#pragma once
#include "kiln/tile/abi.h"
#include "kiln/tile/cuda_abi.h"

#ifndef KILN_TILE_COMPUTE_WARPS
#define KILN_TILE_COMPUTE_WARPS 4
#endif
#ifndef KILN_TILE_DM_ROLES
#define KILN_TILE_DM_ROLES 2
#endif

namespace kiln::tile::cuda {

inline constexpr int kComputeThreads = KILN_TILE_COMPUTE_WARPS * 32;
inline constexpr int kThreads = kComputeThreads + KILN_TILE_DM_ROLES * 32;
inline constexpr int kWarps = KILN_TILE_COMPUTE_WARPS + KILN_TILE_DM_ROLES;
inline constexpr int kRoles = KILN_TILE_DM_ROLES + 1;

// A warp's count of the blocks it took through each CB operation so far (host layout: 24 bytes per
// CB per warp, after the CB's barriers).
struct WarpCounters {
  unsigned reserved, pushed, waited, popped, received, pad;
};

struct BlockState {
  const cuda_abi::TensorMaps* maps;  // the kernel's tensor-map argument
  int core;
  // per warp, kept by its lane 0 (compute_begin / compute_end): its last store read what other
  // warps write; it stored into a block since the role's last barrier
  unsigned char store_crossed[32], stored[32];
  long long bcast[kRoles];  // a value the role's leader hands to the rest of the role
};

// 16 bytes moved as one vector access (shared and global addresses here are 16-byte aligned).
struct alignas(16) Vec16 {
  unsigned x, y, z, w;
};

}  // namespace kiln::tile::cuda

// the host reserves 2048 bytes of shared memory for this state (kStaticSharedReserve)
static_assert(sizeof(kiln::tile::cuda_abi::Params) + sizeof(kiln::tile::cuda::BlockState) +
                      8 * kiln::tile::cuda_abi::kMaxArgs <=
                  2048,
              "kiln.tile: the runtime's per-block state outgrew its shared-memory reserve");

// The launch parameters, copied from the kernel's argument into shared memory at block start.
__shared__ kiln::tile::cuda_abi::Params kiln_tile_params;
__shared__ kiln::tile::cuda::BlockState kiln_tile_block;
// this core's runtime args, copied from host memory at block start
__shared__ long long kiln_tile_args[kiln::tile::cuda_abi::kMaxArgs];
// CB barriers, counters and rings (host layout); aligned for mbarriers (8) and bulk copies (16)
extern __shared__ __align__(128) unsigned char kiln_tile_smem[];

namespace kiln::tile::cuda {

// ---- who am I ----
inline const cuda_abi::Params& P() { return kiln_tile_params; }
inline bool is_compute() { return threadIdx.x < kComputeThreads; }
// data-movement roles 0..KILN_TILE_DM_ROLES-1, then compute (the host's role order)
inline int role() {
  return is_compute() ? KILN_TILE_DM_ROLES : static_cast<int>(threadIdx.x / 32) - KILN_TILE_COMPUTE_WARPS;
}
inline int role_rank() {
  return is_compute() ? static_cast<int>(threadIdx.x) : static_cast<int>(threadIdx.x & 31);
}
inline int role_size() { return is_compute() ? kComputeThreads : 32; }
inline bool leader() { return role_rank() == 0; }
inline int warp() { return static_cast<int>(threadIdx.x / 32); }
inline int lane() { return static_cast<int>(threadIdx.x & 31); }
// Arrivals a thread of the calling role makes on a slot's barrier: every role arrives
// kSlotArrivals times in all. Two per compute thread, so that one can wait for the thread's
// asynchronous copies and the other release its direct writes.
inline constexpr unsigned kSlotArrivals = 2 * kComputeThreads;
inline unsigned arrivals() { return is_compute() ? 2u : 2u * KILN_TILE_COMPUTE_WARPS; }

// The calling warp's entry of a BlockState flag array: lane 0 keeps it and hands it to the other
// lanes.
inline bool warp_flag(const unsigned char* flags) {
  return __shfl_sync(0xffffffffu, lane() == 0 ? flags[warp()] : 0, 0) != 0;
}
inline void set_warp_flag(unsigned char* flags, bool v) {
  if (lane() == 0) flags[warp()] = v ? 1 : 0;
}

// A barrier over the calling role's threads; orders their shared and global accesses. Named
// barrier 1 for the compute warps (0 is __syncthreads), non-.aligned because the leader may arrive
// from a different branch than the rest of its warp.
inline void role_sync() {
  if (is_compute() && kComputeThreads > 32)
    asm volatile("barrier.sync 1, %0;" ::"r"(kComputeThreads) : "memory");
  else
    __syncwarp();
  if (is_compute()) {  // every store so far is visible to the whole role
    set_warp_flag(kiln_tile_block.store_crossed, false);
    set_warp_flag(kiln_tile_block.stored, false);
  }
}

inline unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{\n .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t;\n}\n" : "=r"(r) : "l"(p));
  return r;
}
inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace kiln::tile::cuda
