// The tile runtime on a GPU (part of cuda_device.h): the kernel's first and last steps.
#pragma once
#include "kiln/tile/cuda_cb_layout.h"
#include "kiln/tile/cuda_cluster.h"
#include "kiln/tile/cuda_ptx.h"

namespace kiln::tile::cuda {

// ---- the kernel's first and last steps ----
// Copies the launch parameters into shared memory, zeroes the CB counters and sets up the barriers.
inline void block_start(const cuda_abi::Params& p, const cuda_abi::TensorMaps* maps) {
  for (int i = static_cast<int>(threadIdx.x); i < static_cast<int>(sizeof(cuda_abi::Params) / 4);
       i += kThreads)
    reinterpret_cast<unsigned*>(&kiln_tile_params)[i] = reinterpret_cast<const unsigned*>(&p)[i];
  for (int i = static_cast<int>(threadIdx.x); i < static_cast<int>(p.barrier_bytes / 4); i += kThreads)
    reinterpret_cast<unsigned*>(kiln_tile_smem)[i] = 0;
  const long long core = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
  if (static_cast<int>(threadIdx.x) < p.nargs)
    kiln_tile_args[threadIdx.x] = reinterpret_cast<const long long*>(p.args)[core * p.nargs + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    kiln_tile_block.core = static_cast<int>(core);
    for (int w = 0; w < 32; w++) kiln_tile_block.store_crossed[w] = kiln_tile_block.stored[w] = 0;
    kiln_tile_block.maps = maps;
    for (int i = 0; i < p.ncbs; i++)
      for (unsigned s = 0; s < p.cbs[i].slots; s++) {
        mbar_init(full_bar(i, s), kSlotArrivals);
        mbar_init(empty_bar(i, s), kSlotArrivals);
        mbar_init(dma_bar(i, s), kSlotArrivals);
      }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // in a cluster, every block has started before any block writes into another's shared memory
  if (cluster_dim_x() * cluster_dim_y() > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                     : "memory");
}
// A role returned: its bulk writes are done before the block's shared memory goes away, and in a
// cluster no block leaves while another may still write into its shared memory (a role that
// failed has exited and is not waited for).
inline void role_end() {
  bulk_wait_all();
  if (cluster_dim_x() * cluster_dim_y() > 1)
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

}  // namespace kiln::tile::cuda
