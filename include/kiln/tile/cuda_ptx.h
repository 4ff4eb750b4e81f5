// The tile runtime on a GPU (part of cuda_device.h): PTX wrappers for mbarriers, asynchronous and
// bulk copies (the TMA engine) and L2-coherent loads.
#pragma once
#include "kiln/tile/cuda_block_state.h"

namespace kiln::tile::cuda {

// ---- mbarriers (shared::cta, 8 bytes each) ----
inline void mbar_init(unsigned addr, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(addr), "r"(count) : "memory");
}
inline void mbar_arrive(unsigned addr, unsigned count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(addr), "r"(count) : "memory");
}
// 4 bytes global -> shared without waiting for them (an asynchronous copy of this thread's).
inline void cp_async4(unsigned dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
// One of this thread's arrivals, made when its asynchronous copies so far have landed.
inline void mbar_arrive_after_copies(unsigned addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(addr) : "memory");
}
// The current phase also waits for `bytes` of bulk copies to complete on the barrier.
inline void mbar_expect_tx(unsigned addr, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(addr), "r"(bytes) : "memory");
}
// The calling thread's share of a slot barrier's arrivals (less those it made another way): a
// release of its own accesses.
inline void role_arrive(unsigned addr, unsigned made = 0) { mbar_arrive(addr, arrivals() - made); }
// Whether the phase of parity `parity` has completed (acquire on success).
inline bool mbar_done(unsigned addr, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(addr), "r"(parity)
      : "memory");
  return ok != 0;
}

// ---- bulk copies (the TMA engine) ----
// global -> shared, completing `bytes` on the mbarrier at `bar`; sizes and addresses 16-byte aligned
inline void bulk_read(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// shared -> global, in this thread's current bulk group
inline void bulk_write(void* dst, unsigned src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
inline void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// This thread's bulk writes have read their shared memory (the blocks may change again).
inline void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// This thread's bulk writes are done and visible in global memory.
inline void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's shared-memory writes (and those it has observed) before later bulk copies.
inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The bulk tensor copy engine: a box of a 2D tensor map at element (col, row); parts of the box
// outside the tensor read as zeros and are not written.
inline void tensor_read(unsigned dst, const cuda_abi::TensorMap* map, int col, int row, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], "
      "[%4];" ::"r"(dst),
      "l"(map), "r"(col), "r"(row), "r"(bar)
      : "memory");
}
inline void tensor_write(const cuda_abi::TensorMap* map, int col, int row, unsigned src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map),
               "r"(col), "r"(row), "r"(src)
               : "memory");
}

// ---- global memory helpers: L2-coherent reads (data another block wrote) ----
inline unsigned short ld_cg_u16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
inline Vec16 ld_cg_v4(const void* p) {
  Vec16 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
inline long long ld_volatile(const long long* p) { return *static_cast<const volatile long long*>(p); }
inline unsigned ld_volatile(const unsigned* p) { return *static_cast<const volatile unsigned*>(p); }

}  // namespace kiln::tile::cuda
