// The tile runtime on a GPU (part of cuda_device.h): thread-block clusters and distributed shared
// memory.
#pragma once
#include "kiln/tile/cuda_block_state.h"

namespace kiln::tile::cuda {

// ---- thread-block clusters (a 2D grid that multicasts launches in them: tile/cuda/launch.cpp) ----
inline unsigned cluster_dim_x() {
  unsigned v;
  asm("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(v));
  return v;
}
inline unsigned cluster_dim_y() {
  unsigned v;
  asm("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(v));
  return v;
}
// Whether core (x, y) is in this block's cluster; its rank there in *rank (x fastest).
inline bool in_my_cluster(int x, int y, unsigned* rank) {
  const unsigned cx = cluster_dim_x(), cy = cluster_dim_y();
  if (cx * cy == 1) return false;
  if (static_cast<unsigned>(x) / cx != blockIdx.x / cx || static_cast<unsigned>(y) / cy != blockIdx.y / cy)
    return false;
  *rank = (static_cast<unsigned>(y) % cy) * cx + static_cast<unsigned>(x) % cx;
  return true;
}
// The address of this block's shared-memory address `addr` in the cluster's block of rank `rank`.
inline unsigned cluster_addr(unsigned addr, unsigned rank) {
  unsigned r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
inline void st_cluster_v4(unsigned addr, const Vec16& v) {
  asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

}  // namespace kiln::tile::cuda
