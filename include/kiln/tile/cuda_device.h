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
// ---- CB layout ----
// The generated prelude defines the program's CB layout as constants (KILN_TILE_CB_LAYOUT: id, ring
// offset, block bytes, slots, barrier offset, block rows and cols in tiles; the host computes the
// same in src/tile/cb_memory.cpp), so with the constant ids of CB handles every CB operation's
// address arithmetic folds away; ids only known at run time read the launch parameters.
struct CbLayout {
  unsigned data_offset, block_bytes, slots, barrier_offset;
  int rows, cols;  // tiles
  int shape;       // box shape: which of a tensor's maps copies this CB's blocks (-1: none does)
  int tile_rows;   // 32, or fewer for short tiles
  int height() const { return rows * tile_rows; }  // element rows of a block
};
inline CbLayout cb_layout(int cb) {
#ifdef KILN_TILE_CB_LAYOUT
#define KILN_TILE_CB_CASE(i, d, b, s, o, r, c, sh, th) \
  case i: return CbLayout{d, b, s, o, r, c, sh, th};
  switch (cb) {
    KILN_TILE_CB_LAYOUT(KILN_TILE_CB_CASE)
    default: break;
  }
#undef KILN_TILE_CB_CASE
#endif
  const cuda_abi::CBParam& p = P().cbs[cb];
  return CbLayout{p.data_offset, p.block_bytes, p.slots, p.barrier_offset, p.rows, p.cols, -1, p.tile_rows};
}
inline int num_cbs() {
#ifdef KILN_TILE_NCBS
  return KILN_TILE_NCBS;
#else
  return P().ncbs;
#endif
}
// A CB's barrier region: full[slots], empty[slots], dma[slots] (mbarriers), dma_count[slots],
// pad_sig[slots] (8 bytes each), then a WarpCounters per warp.
inline unsigned char* cb_region(int cb) { return kiln_tile_smem + cb_layout(cb).barrier_offset; }
inline unsigned full_bar(int cb, unsigned slot) { return smem_addr(cb_region(cb)) + slot * 8; }
inline unsigned empty_bar(int cb, unsigned slot) {
  return smem_addr(cb_region(cb)) + (cb_layout(cb).slots + slot) * 8;
}
inline unsigned dma_bar(int cb, unsigned slot) {
  return smem_addr(cb_region(cb)) + (2 * cb_layout(cb).slots + slot) * 8;
}
inline unsigned* dma_count(int cb, unsigned slot) {
  return reinterpret_cast<unsigned*>(cb_region(cb) + (3 * cb_layout(cb).slots + slot) * 8);
}
// What the slot's padding holds: 0, unknown; else the pad value's bits << 32 | (rows + 1) << 16 |
// cols of the slice DMA last read into it (the padding is what lies outside those rows and cols).
// Every write to the block other than a DMA read resets it.
inline unsigned long long* pad_sig(int cb, unsigned slot) {
  return reinterpret_cast<unsigned long long*>(cb_region(cb) + (4 * cb_layout(cb).slots + slot) * 8);
}
inline WarpCounters& counters(int cb) {
  return reinterpret_cast<WarpCounters*>(cb_region(cb) +
                                         cuda_abi::kBarrierBytesPerSlot * cb_layout(cb).slots)[warp()];
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

// ---- the trace (KILN_TILE_TRACE: one core's slow waits, stores and DMAs, by clock) ----
// Lane 0 of the compute role's first warp and of each data-movement warp records.
inline void trace(unsigned event, int object) {
#ifdef KILN_TILE_TRACE_CORE
  if (kiln_tile_block.core != KILN_TILE_TRACE_CORE || lane() != 0) return;
  if (warp() != 0 && warp() < KILN_TILE_COMPUTE_WARPS) return;
  auto* log = reinterpret_cast<unsigned long long*>(P().trace);
  unsigned long long i = atomicAdd(log, 1ull);
  if (i < static_cast<unsigned long long>(P().trace_cap))
    log[1 + i] = static_cast<unsigned long long>(clock()) << 32 | event << 24 |
                 static_cast<unsigned>(warp()) << 16 | (static_cast<unsigned>(object) & 0xffffu);
#else
  (void)event;
  (void)object;
#endif
}

// ---- failures and the watchdog ----
inline void copy_file(char* dst, const char* src) {
  int i = 0;
  if (src)
    for (; i < cuda_abi::kFileChars - 1 && src[i]; i++) dst[i] = src[i];
  dst[i] = 0;
}

// Failure paths are out of line (__noinline__): inlined at every CB operation and DMA they would
// fill the instruction cache the hot loops need (measured on an H200: a third of the layernorm
// backward's stall samples were instruction fetches).
// One thread: appends a record to the launch's error log and raises the abort flag.
__noinline__ void record(int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0,
                         long long v2 = 0, long long v3 = 0) {
  auto* log = reinterpret_cast<cuda_abi::ErrorLog*>(P().errors);
  unsigned i = atomicAdd(&log->count, 1u);
  if (i < static_cast<unsigned>(cuda_abi::kMaxErrors)) {
    cuda_abi::ErrorRecord& r = log->rec[i];
    r.kind = kind;
    r.core = kiln_tile_block.core;
    r.role = role();
    r.object = object;
    r.line = at.line;
    r.value[0] = v0;
    r.value[1] = v1;
    r.value[2] = v2;
    r.value[3] = v3;
    copy_file(r.file, at.file);
  }
  __threadfence();
  atomicExch(&log->abort, 1u);
  if (P().host_flag) {  // the host checks this word when the launch is done
    *reinterpret_cast<volatile unsigned*>(P().host_flag) = 1u;
    __threadfence_system();
  }
}
inline bool aborted() { return ld_volatile(&reinterpret_cast<cuda_abi::ErrorLog*>(P().errors)->abort) != 0; }

// Ends the calling thread; used only where the whole role stops at the same point.
inline void stop_thread() { asm volatile("exit;" ::: "memory"); }

// A failed check, evaluated identically by every thread of the role: record once, stop the role.
__noinline__ void fail_role(int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0,
                            long long v2 = 0, long long v3 = 0) {
  if (leader()) record(kind, object, at, v0, v1, v2, v3);
  stop_thread();
}

// Runs f on the leader and hands its result to every thread of the role.
template <class F>
inline long long from_leader(F f) {
  if (leader()) kiln_tile_block.bcast[role()] = f();
  role_sync();
  long long v = kiln_tile_block.bcast[role()];
  role_sync();  // everyone has read it before the leader's next write
  return v;
}

// Records a slow wait's end in the trace, however the wait ends (its start is recorded by the caller).
struct TracedWait {
  int kind, object;
  ~TracedWait() { trace(2 * kind + 1, object); }
};

// The leader polls ready() until it holds; on timeout (or when another role already failed) it
// records what it waited for and the whole role stops. Returns with the role in sync.
template <class Ready>
inline void wait_until(Ready ready, int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0) {
  long long stop = from_leader([&]() -> long long {
    if (ready()) return 0;
    trace(2 * kind, object);
    TracedWait traced{kind, object};
    unsigned long long start = now_ns();
    for (unsigned n = 0;; n++) {
      if (ready()) return 0;
      if ((n & 15) == 15 && (aborted() || now_ns() - start > P().timeout_ns)) {
        record(kind, object, at, v0, v1);
        return 1;
      }
    }
  });
  if (stop) stop_thread();
}

// Every lane of the calling warp waits for the phase of `parity` of the mbarrier at `bar` (each
// acquires it). The decision to give up is the warp's (lane 0's): past the timeout, or when another
// role failed and the phase did not complete within a grace period (so no warp of a role stops where
// another went on), the role's leader records the wait and the warp stops.
__noinline__ void wait_phase_slow(unsigned bar, unsigned parity, int kind, int object, abi::Loc at,
                                  long long v0) {
  trace(2 * kind, object);
  TracedWait traced{kind, object};
  const unsigned long long start = now_ns();
  unsigned long long grace_end = 0;
  for (unsigned n = 0;; n++) {
    if (__all_sync(0xffffffffu, mbar_done(bar, parity))) return;
    if ((n & 15) != 15) continue;
    int verdict = 0;  // 1: timed out, 2: give up after another role's failure
    if (lane() == 0) {
      unsigned long long t = now_ns();
      if (t - start > P().timeout_ns) {
        verdict = 1;
      } else if (aborted()) {
        if (grace_end == 0) grace_end = t + 1000000ull;
        if (t > grace_end) verdict = 2;
      }
    }
    verdict = __shfl_sync(0xffffffffu, verdict, 0);
    if (verdict != 0 && leader()) record(kind, object, at, v0);
    if (verdict != 0) stop_thread();
  }
}
inline void wait_phase(unsigned bar, unsigned parity, int kind, int object, abi::Loc at, long long v0 = 0) {
  if (!__all_sync(0xffffffffu, mbar_done(bar, parity))) wait_phase_slow(bar, parity, kind, object, at, v0);
}

// Operations only the compute role has (its threads hold their state: ColSums).
inline void compute_only(const char*, abi::Loc at) {
  if (!is_compute()) fail_role(cuda_abi::kComputeOnly, 0, at);
}

inline void check_cb(int id, abi::Loc at) {
  if (id < 0 || id >= num_cbs()) fail_role(cuda_abi::kBadId, id, at, 0);
}

// ---- grid ----
inline int core_index() { return kiln_tile_block.core; }
inline int core_x() { return kiln_tile_block.core % P().grid_cols; }
inline int core_y() { return kiln_tile_block.core / P().grid_cols; }
inline const long long* args() { return kiln_tile_args; }
inline void tensor_dims(int t, long long* rows, long long* cols) {
  const cuda_abi::TensorParam& v = P().tensors[t];
  *rows = v.tiles ? (v.rows + 31) / 32 : v.rows;
  *cols = v.tiles ? (v.cols + 31) / 32 : v.cols;
}

// ---- circular buffers ----
inline unsigned char* slot_data(int cb, int slot) {
  const CbLayout l = cb_layout(cb);
  return kiln_tile_smem + l.data_offset + static_cast<unsigned>(slot) * l.block_bytes;
}

// The warp's count of blocks through a CB operation so far: lane 0 keeps it (in shared memory) and
// hands it to the other lanes, so no lane reads it while lane 0 moves it on.
inline unsigned warp_count(const unsigned& counter) {
  return __shfl_sync(0xffffffffu, (threadIdx.x & 31) == 0 ? counter : 0u, 0);
}

// The slot's DMA reads have landed. A data-movement role does not wait for its reads where the
// kernel waits them (transfer_wait): the bytes are settled where the block is used next, by the
// consumer's wait, or by the same role's next DMA into the block, DMA write or multicast out of it,
// access to its data or pop. So a reader keeps as many reads in flight as it has slots reserved.
// A compute role waits its reads eagerly, so its stores never check for pending ones.
inline void settle_dma(int cb, unsigned slot, abi::Loc at) {
  unsigned issued = *dma_count(cb, slot);
  if (issued > 0) wait_phase(dma_bar(cb, slot), (issued - 1) & 1, cuda_abi::kWaitDma, cb, at);
}

inline abi::BlockRef cb_reserve(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned n = cb_layout(id).slots, k = warp_count(c.reserved), slot = k % n;
  // the first pass over the ring finds every slot free: waiting on parity 1 of a fresh barrier
  // returns at once
  wait_phase(empty_bar(id, slot), ((k / n) & 1) ^ 1, cuda_abi::kWaitReserve, id, at, n);
  if (lane() == 0) c.reserved = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_push(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned k = warp_count(c.pushed), slot = k % cb_layout(id).slots;
  if (is_compute()) settle_dma(id, slot, at);  // a data-movement role's reads settle at the consumer
  __syncwarp();                                // every lane has read the count
  if (lane() == 0) c.pushed = k + 1;
  role_arrive(full_bar(id, slot));  // each lane releases its own writes to the block
}

inline abi::BlockRef cb_wait(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned n = cb_layout(id).slots, k = warp_count(c.waited), slot = k % n;
  wait_phase(full_bar(id, slot), (k / n) & 1, cuda_abi::kWaitBlock, id, at, n);
  settle_dma(id, slot, at);  // the producer's reads into the block, if it did not wait them
  if (lane() == 0) c.waited = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_pop(int id, abi::Loc at) {
  check_cb(id, at);
  WarpCounters& c = counters(id);
  unsigned k = warp_count(c.popped);
  if (!is_compute()) settle_dma(id, k % cb_layout(id).slots, at);  // no read lands after the pop
  bulk_wait_read();  // bulk writes out of the block have read it
  __syncwarp();      // every lane has read the count
  if (lane() == 0) c.popped = k + 1;
  role_arrive(empty_bar(id, k % cb_layout(id).slots));  // each lane is done with the block
}

// A block handed to code that writes it no longer holds the padding of its last DMA read.
inline void* block_data(abi::BlockRef b, int write, abi::Loc at) {
  if (!is_compute()) settle_dma(b.cb, static_cast<unsigned>(b.slot), at);
  if (write) *pad_sig(b.cb, static_cast<unsigned>(b.slot)) = 0;
  return slot_data(b.cb, b.slot);
}

// ---- DMA between tensors and blocks ----
struct Rect {
  long long r0, c0;  // elements
  int rows, cols;    // clipped to the tensor (at most a block's)
};

// The element rectangle of a slice, with the CPU backend's checks (a bad slice would fault). Sizes
// are known non-negative and at most the block's before `row > extent - rows` is tested, so no
// bound is ever formed as row + rows (a slice at row INT64_MAX would wrap past it).
inline Rect slice_rect(int t, const CbLayout& cb, int cbid, abi::Slice s, abi::Loc at) {
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  const cuda_abi::TensorParam& v = P().tensors[t];
  if (v.tiles) {
    long long R = (v.rows + 31) / 32, C = (v.cols + 31) / 32;
    if (cb.tile_rows != 32 || s.rows != cb.rows || s.cols != cb.cols || s.row < 0 || s.col < 0 ||
        s.row > R - s.rows || s.col > C - s.cols)
      fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
    long long r0 = s.row * 32, c0 = s.col * 32, h = s.rows * 32, w = s.cols * 32;
    return Rect{r0, c0, static_cast<int>(h < v.rows - r0 ? h : v.rows - r0),
                static_cast<int>(w < v.cols - c0 ? w : v.cols - c0)};
  }
  if (s.rows < 0 || s.cols < 0 || s.rows > cb.height() || s.cols > cb.cols * 32LL || s.row < 0 || s.col < 0 ||
      s.row > v.rows - s.rows || s.col > v.cols - s.cols)
    fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
  return Rect{s.row, s.col, static_cast<int>(s.rows), static_cast<int>(s.cols)};
}

// Whole rows of the rectangle move as bulk copies: 16-byte aligned starts and lengths.
inline bool bulk_rows(const cuda_abi::TensorParam& v, const Rect& r) {
  const int es = v.elem_bytes;
  return (v.data % 16) == 0 && (v.cols * es) % 16 == 0 && (r.c0 * es) % 16 == 0 && (r.cols * es) % 16 == 0;
}

// Transfer ids: reads (n-th DMA into the slot) n << 10 | cb << 5 | slot, with n's parity only;
// writes and multicast sends kWriteId; multicast receives below zero.
inline constexpr int kWriteId = 1 << 30;

// dma_read's general case (out of line: see record): bulk row copies with the padding written
// around them, or unaligned slices element by element; each thread arrives on `bar` when its
// direct writes are done.
__noinline__ void dma_read_general(const Rect& r, const cuda_abi::TensorParam& v, const CbLayout& cb,
                                   unsigned char* dst, const unsigned char* src, unsigned pad_bits, bool bulk,
                                   bool padded, unsigned* issued, unsigned long long* sig,
                                   unsigned long long want, unsigned bar) {
  const int es = v.elem_bytes, bw = cb.cols * 32, bh = cb.height();
  const unsigned n = *issued;
  role_sync();  // every thread has read the count and the signature
  if (leader()) {
    *issued = n + 1;
    *sig = want;
    if (bulk) mbar_expect_tx(bar, static_cast<unsigned>(r.rows * r.cols * es));  // before any copy lands
  }
  role_sync();
  unsigned async_arrivals = 0;
  if (bulk) {
    for (int i = role_rank(); i < r.rows; i += role_size())
      bulk_read(smem_addr(dst + i * bw * es), src + i * v.cols * es, static_cast<unsigned>(r.cols * es), bar);
    // padding: the columns right of the slice (whole 16-byte chunks), then the rows below it
    const Vec16 p16{pad_bits, pad_bits, pad_bits, pad_bits};
    const int chunks = bw * es / 16, first = r.cols * es / 16;
    if (!padded && first < chunks)
      for (int q = role_rank(); q < r.rows * (chunks - first); q += role_size())
        reinterpret_cast<Vec16*>(dst + (q / (chunks - first)) * bw * es)[first + q % (chunks - first)] = p16;
    Vec16* below = reinterpret_cast<Vec16*>(dst + r.rows * bw * es);
    if (!padded)
      for (int q = role_rank(); q < (bh - r.rows) * chunks; q += role_size()) below[q] = p16;
  } else {
    // the slice's elements (consecutive threads take consecutive ones, so even a column's loads
    // are in flight together; 4-byte ones as asynchronous copies the barrier's phase waits for,
    // so the role goes on before they land), then the padding unless it is in place
    for (int q = role_rank(); q < r.rows * r.cols; q += role_size()) {
      const int i = q / r.cols, j = q % r.cols;
      unsigned char* d = dst + (i * bw + j) * es;
      const unsigned char* g = src + (static_cast<long long>(i) * v.cols + j) * es;
      if (es == 4)
        cp_async4(smem_addr(d), g);
      else
        *reinterpret_cast<unsigned short*>(d) = ld_cg_u16(g);
    }
    if (es == 4) {
      mbar_arrive_after_copies(bar);
      async_arrivals = 1;
    }
    if (!padded)
      for (int q = role_rank(); q < bh * bw; q += role_size()) {
        const int i = q / bw, j = q % bw;
        if (i < r.rows && j < r.cols) continue;
        unsigned char* d = dst + q * es;
        if (es == 4)
          *reinterpret_cast<unsigned*>(d) = pad_bits;
        else
          *reinterpret_cast<unsigned short*>(d) = static_cast<unsigned short>(pad_bits);
      }
  }
  role_arrive(bar, async_arrivals);  // each thread releases its own direct writes
  role_sync();
}

// tensor -> block. Rows the bulk engine can copy are issued by the role's threads, a row each;
// the rest of the block (padding, and unaligned slices element by element) is written directly.
// The slot's dma barrier completes when the copies land and the role has written the rest.
inline int dma_read(int t, abi::Slice s, abi::BlockRef b, float pad, abi::Loc at) {
  check_cb(b.cb, at);
  const CbLayout cb = cb_layout(b.cb);
  const Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  const int es = v.elem_bytes, bw = cb.cols * 32, bh = cb.height();
  unsigned char* dst = slot_data(b.cb, b.slot);
  const unsigned char* src = reinterpret_cast<const unsigned char*>(v.data) + (r.r0 * v.cols + r.c0) * es;
  unsigned pad_bits = __float_as_uint(pad);
  if (es == 2) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(pad));
    pad_bits = h | (static_cast<unsigned>(h) << 16);
  }
  // a read still landing in this block (a data-movement role's earlier DMA, not waited) completes
  // first: each read completes its own phase of the slot's dma barrier
  if (!is_compute()) settle_dma(b.cb, static_cast<unsigned>(b.slot), at);
  role_sync();  // the role's earlier DMA reads have counted themselves
  unsigned* issued = dma_count(b.cb, b.slot);
  unsigned long long* sig = pad_sig(b.cb, static_cast<unsigned>(b.slot));
  const unsigned long long want =
      static_cast<unsigned long long>(pad_bits) << 32 | static_cast<unsigned>(r.rows + 1) << 16 | r.cols;
  const unsigned n = *issued, bar = dma_bar(b.cb, b.slot);
  const int id = static_cast<int>(((n & 1) << 10) | (b.cb << 5) | b.slot);
  // one box per 256 rows through the slice's tensor map where it has one (and the padding is the
  // copy engine's zeros, or the block lies inside the tensor): the leader alone issues them
  if (cb.shape >= 0 && v.map_base >= 0 && (pad_bits == 0 || (r.rows == bh && r.cols == bw))) {
    role_sync();  // every thread has read the count
    if (leader()) {
      *issued = n + 1;
      *sig = want;
      // every box counts its whole size, the zeros outside the tensor included
      mbar_expect_tx(bar, static_cast<unsigned>(bh * bw * es));
      const cuda_abi::TensorMap* map = &kiln_tile_block.maps->map[v.map_base + cb.shape];
      for (int h = 0; h < bh; h += 256)
        tensor_read(smem_addr(dst + h * bw * es), map, static_cast<int>(r.c0), static_cast<int>(r.r0 + h),
                    bar);
    }
    role_arrive(bar);
    role_sync();
    trace(cuda_abi::kTraceDmaRead, b.cb);
    return id;
  }
  const bool bulk = bulk_rows(v, r) && r.cols > 0;
  const bool padded = *sig == want;  // the padding from the slot's last read is still in place
  if (bulk && (padded || (r.rows == bh && r.cols == bw)) && r.rows <= role_size()) {
    // a bulk copy per row, nothing to pad: the leader adds the bytes to expect, then each thread
    // issues its row and arrives
    role_sync();  // every thread has read the count and the signature
    if (leader()) {
      *issued = n + 1;
      *sig = want;
      mbar_expect_tx(bar, static_cast<unsigned>(r.rows * r.cols * es));
    }
    role_sync();
    const int i = role_rank();
    if (i < r.rows)
      bulk_read(smem_addr(dst + i * bw * es), src + static_cast<long long>(i) * v.cols * es,
                static_cast<unsigned>(r.cols * es), bar);
    role_arrive(bar);
    trace(cuda_abi::kTraceDmaRead, b.cb);
    return id;
  }
  dma_read_general(r, v, cb, dst, src, pad_bits, bulk, padded, issued, sig, want, bar);
  trace(cuda_abi::kTraceDmaRead, b.cb);
  return id;
}

// block -> tensor: bulk copies a row each where aligned (complete at transfer_wait, or at the
// block's pop), plain stores elsewhere (done when every thread returns).
inline int dma_write(abi::BlockRef b, int t, abi::Slice s, abi::Loc at) {
  check_cb(b.cb, at);
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  if (!P().tensors[t].output) fail_role(cuda_abi::kInputWrite, t, at);
  const CbLayout cb = cb_layout(b.cb);
  const Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  settle_dma(b.cb, b.slot, at);
  // the role's stores into the block come first (a compute role that stored nothing since its last
  // barrier needs none: its stores' fences are done)
  if (!is_compute() || warp_flag(kiln_tile_block.stored)) role_sync();
  const int es = v.elem_bytes, bw = cb.cols * 32;
  const unsigned char* blk = slot_data(b.cb, b.slot);
  unsigned char* dst = reinterpret_cast<unsigned char*>(v.data) + (r.r0 * v.cols + r.c0) * es;
  trace(cuda_abi::kTraceDmaWrite, b.cb);
  if (cb.shape >= 0 && v.map_base >= 0) {  // boxes through the tensor map; the leader's bulk group
    fence_async_shared();
    if (leader()) {
      const cuda_abi::TensorMap* map = &kiln_tile_block.maps->map[v.map_base + cb.shape];
      for (int h = 0; h < cb.rows * 32; h += 256)
        tensor_write(map, static_cast<int>(r.c0), static_cast<int>(r.r0 + h),
                     smem_addr(blk + h * cb.cols * 32 * es));
      bulk_commit();
    }
    return kWriteId;
  }
  if (bulk_rows(v, r)) {
    fence_async_shared();
    if (r.cols > 0) {
      for (int i = role_rank(); i < r.rows; i += role_size())
        bulk_write(dst + static_cast<long long>(i) * v.cols * es, smem_addr(blk + i * bw * es),
                   static_cast<unsigned>(r.cols * es));
      bulk_commit();
    }
    return kWriteId;
  }
  for (int q = role_rank(); q < r.rows * r.cols; q += role_size()) {
    const int i = q / r.cols, j = q % r.cols;
    unsigned char* g = dst + (static_cast<long long>(i) * v.cols + j) * es;
    if (es == 4)
      *reinterpret_cast<unsigned*>(g) = *reinterpret_cast<const unsigned*>(blk + (i * bw + j) * es);
    else
      *reinterpret_cast<unsigned short*>(g) =
          *reinterpret_cast<const unsigned short*>(blk + (i * bw + j) * es);
  }
  return kWriteId;
}

// ---- cross-core: semaphores and multicast through global memory ----
// Multicast counters per (receiving core, CB): claimed by senders, receives asked for, payloads
// delivered, payloads copied out of the mailbox.
// Then per receive n, at n % kMaxSlots: the receiver's slot (kSlotOf + ...) and, from a sender in
// its cluster, n once the payload was written straight into that slot (kDirect + ...).
enum { kClaim = 0, kReady = 1, kFilled = 2, kConsumed = 3, kSlotOf = 4, kDirect = 4 + cuda_abi::kMaxSlots };
inline unsigned* mcast_counter(int core, int cb, int which) {
  return reinterpret_cast<unsigned*>(P().mcast) +
         (static_cast<long long>(core) * P().ncbs + cb) * cuda_abi::kMcastWords + which;
}

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
inline unsigned char* mailbox(int core, int cb) {
  return reinterpret_cast<unsigned char*>(P().cbs[cb].mailbox) +
         static_cast<long long>(core) * cb_layout(cb).block_bytes;
}

// Cores [x0, x1) x [y0, y1) in 64 bits: one core's range (x, x + 1) cannot wrap.
inline void check_range(long long x0, long long x1, long long y0, long long y1, abi::Loc at) {
  int rows = P().cores / P().grid_cols;
  if (x0 < 0 || y0 < 0 || x0 >= x1 || y0 >= y1 || x1 > P().grid_cols || y1 > rows)
    fail_role(cuda_abi::kBadCoreRange, 0, at, x0, x1, y0, y1);
}
inline void check_range(abi::CoreRange r, abi::Loc at) { check_range(r.x0, r.x1, r.y0, r.y1, at); }

// Copies the block to every receiver's mailbox once that receiver asked for it and consumed the
// previous payload; returns when all are delivered.
inline int mcast(abi::BlockRef b, int dst, abi::CoreRange range, abi::Loc at) {
  check_cb(b.cb, at);
  check_cb(dst, at);
  check_range(range, at);
  settle_dma(b.cb, b.slot, at);
  role_sync();
  const unsigned char* blk = slot_data(b.cb, b.slot);
  const int bytes = static_cast<int>(cb_layout(dst).block_bytes);
  for (int y = range.y0; y < range.y1; y++)
    for (int x = range.x0; x < range.x1; x++) {
      int rc = y * P().grid_cols + x;
      if (rc == kiln_tile_block.core) continue;
      unsigned k = static_cast<unsigned>(
          from_leader([&]() -> long long { return atomicAdd(mcast_counter(rc, dst, kClaim), 1u) + 1; }));
      unsigned* ready = mcast_counter(rc, dst, kReady);
      unsigned* consumed = mcast_counter(rc, dst, kConsumed);
      wait_until([&] { return ld_volatile(ready) >= k && ld_volatile(consumed) + 1 >= k; },
                 cuda_abi::kWaitMcastSend, dst, at, rc);
      const unsigned at_k = k % cuda_abi::kMaxSlots;
      unsigned rank = 0;
      if (in_my_cluster(x, y, &rank)) {  // straight into the receiver's slot, through its shared memory
        __threadfence();                 // the receiver's slot number (published before `ready`)
        const unsigned slot = ld_volatile(mcast_counter(rc, dst, kSlotOf + at_k));
        const unsigned to = cluster_addr(smem_addr(slot_data(dst, static_cast<int>(slot))), rank);
        for (int q = role_rank(); q < bytes / 16; q += role_size())
          st_cluster_v4(to + q * 16, reinterpret_cast<const Vec16*>(blk)[q]);
        if (leader()) *mcast_counter(rc, dst, kDirect + at_k) = k;
      } else {  // through the receiver's mailbox in global memory
        unsigned char* box = mailbox(rc, dst);
        for (int q = role_rank(); q < bytes / 16; q += role_size())
          reinterpret_cast<Vec16*>(box)[q] = reinterpret_cast<const Vec16*>(blk)[q];
      }
      __threadfence();  // the payload (either way) before `filled`
      role_sync();
      if (leader()) atomicMax(mcast_counter(rc, dst, kFilled), k);
    }
  return kWriteId;  // delivered: nothing left to wait for
}

// Receives are transfer ids below zero: -(1 + (n << 10 | cb << 5 | slot)) for the n-th receive,
// counted in the CB's counters of the role's first warp.
inline int mcast_receive(abi::BlockRef b, abi::Loc at) {
  check_cb(b.cb, at);
  role_sync();
  long long n = from_leader([&]() -> long long {
    unsigned v = ++counters(b.cb).received;
    // the slot first, for a sender in this cluster to write into
    *mcast_counter(kiln_tile_block.core, b.cb, kSlotOf + v % cuda_abi::kMaxSlots) =
        static_cast<unsigned>(b.slot);
    __threadfence();
    atomicMax(mcast_counter(kiln_tile_block.core, b.cb, kReady), v);
    return v;
  });
  return -static_cast<int>(1 + ((n << 10) | (b.cb << 5) | b.slot));
}

inline void transfer_wait(int id, abi::Loc at) {
  if (id == kWriteId) {  // the role's bulk writes (each thread's own, or the leader's) have read the block
    bulk_wait_read();
    role_sync();
    return;
  }
  if (id >= 0) {  // DMA reads: the slot's dma barrier (a data-movement role's settle later)
    if (!is_compute()) return;
    const int cb = (id >> 5) & 31, slot = id & 31;
    wait_phase(dma_bar(cb, slot), (id >> 10) & 1, cuda_abi::kWaitDma, cb, at);
    return;
  }
  unsigned code = static_cast<unsigned>(-id - 1), n = code >> 10;
  int cb = static_cast<int>((code >> 5) & 31), slot = static_cast<int>(code & 31);
  int me = kiln_tile_block.core;
  role_sync();
  unsigned* filled = mcast_counter(me, cb, kFilled);
  wait_until(
      [&] {
        if (ld_volatile(filled) < n) return false;
        __threadfence();
        return true;
      },
      cuda_abi::kWaitMcastReceive, cb, at);
  unsigned char* blk = slot_data(cb, slot);
  *pad_sig(cb, static_cast<unsigned>(slot)) = 0;
  // a sender of this cluster wrote the block in place; any other left it in the mailbox
  if (ld_volatile(mcast_counter(me, cb, kDirect + n % cuda_abi::kMaxSlots)) != n) {
    const unsigned char* box = mailbox(me, cb);
    for (int q = role_rank(); q < static_cast<int>(cb_layout(cb).block_bytes / 16); q += role_size())
      reinterpret_cast<Vec16*>(blk)[q] = ld_cg_v4(box + q * 16);
  }
  role_sync();
  if (leader()) atomicMax(mcast_counter(me, cb, kConsumed), n);
}

inline long long* sem_ptr(int core, int sem) {
  return reinterpret_cast<long long*>(P().sems) + static_cast<long long>(core) * P().nsems + sem;
}
inline void check_sem(int sem, abi::Loc at) {
  if (sem < 0 || sem >= P().nsems) fail_role(cuda_abi::kBadId, sem, at, 2);
}
// Every DMA read into this core's blocks has landed, and so has read its source. A data-movement
// role's wait() on a read returns before that (settle_dma); a semaphore signal is where another
// core may go on to overwrite what the read reads, so the role settles them all first (as on the
// CPU, where a read is done when its wait() returns). Reads of other roles are waited too: each
// completes within its own issue, so this never waits on anything else.
__noinline__ void settle_all_dma(abi::Loc at) {
  for (int cb = 0; cb < num_cbs(); cb++)
    for (unsigned s = 0; s < cb_layout(cb).slots; s++) settle_dma(cb, s, at);
}
// Before the leader signals another core: the role's DMA reads have read their sources and its
// earlier global writes are visible.
inline void release_role(abi::Loc at) {
  if (!is_compute()) settle_all_dma(at);  // a compute role's wait() on a read waits for it
  bulk_wait_all();
  __threadfence();
  role_sync();
}

inline void sem_set(int sem, long long v, abi::Loc at) {
  check_sem(sem, at);
  release_role(at);
  if (leader())
    atomicExch(reinterpret_cast<unsigned long long*>(sem_ptr(kiln_tile_block.core, sem)),
               static_cast<unsigned long long>(v));
}
inline void sem_inc(int sem, long long n, abi::Loc at) {
  check_sem(sem, at);
  release_role(at);
  if (leader())
    atomicAdd(reinterpret_cast<unsigned long long*>(sem_ptr(kiln_tile_block.core, sem)),
              static_cast<unsigned long long>(n));
}
inline void sem_wait(int sem, long long v, abi::Loc at) {
  check_sem(sem, at);
  role_sync();
  const long long* p = sem_ptr(kiln_tile_block.core, sem);
  wait_until(
      [&] {
        if (ld_volatile(p) < v) return false;
        __threadfence();
        return true;
      },
      cuda_abi::kWaitSemaphore, sem, at, v);
}
inline long long sem_value(int sem, abi::Loc at) {
  check_sem(sem, at);
  role_sync();
  return from_leader([&] { return ld_volatile(sem_ptr(kiln_tile_block.core, sem)); });
}
inline void sem_remote_inc(int sem, int x, int y, long long n, abi::Loc at) {
  check_sem(sem, at);
  check_range(x, x + 1LL, y, y + 1LL, at);
  release_role(at);
  if (leader())
    atomicAdd(reinterpret_cast<unsigned long long*>(sem_ptr(y * P().grid_cols + x, sem)),
              static_cast<unsigned long long>(n));
}
// f(core) for every core of r after the role's release, the role's threads sharing the cores (a
// leader alone would wait out each atomic's round trip).
template <class F>
inline void each_core_released(int sem, abi::CoreRange r, abi::Loc at, F f) {
  check_sem(sem, at);
  check_range(r, at);
  release_role(at);
  const int w = r.x1 - r.x0, n = w * (r.y1 - r.y0);
  for (int k = role_rank(); k < n; k += role_size())
    f(reinterpret_cast<unsigned long long*>(sem_ptr((r.y0 + k / w) * P().grid_cols + r.x0 + k % w, sem)));
}
inline void sem_mcast_set(int sem, abi::CoreRange r, long long v, abi::Loc at) {
  each_core_released(sem, r, at,
                     [&](unsigned long long* p) { atomicExch(p, static_cast<unsigned long long>(v)); });
}
inline void sem_mcast_inc(int sem, abi::CoreRange r, long long n, abi::Loc at) {
  each_core_released(sem, r, at,
                     [&](unsigned long long* p) { atomicAdd(p, static_cast<unsigned long long>(n)); });
}

// ---- compute helpers ----
// Before a role computes on blocks: the warp's earlier writes are visible to all its lanes; with
// `sync`, or after a store that read across warps, the whole role's are (and its reads of blocks
// this computation overwrites are done). kernel.h (Block::store) says when a store needs that.
inline void compute_begin(bool sync) {
  trace(cuda_abi::kTraceStore, 0);
  if (sync || warp_flag(kiln_tile_block.store_crossed))
    role_sync();
  else
    __syncwarp();
  trace(cuda_abi::kTraceStoreBarrier, 0);
}
// How many of a thread's `per` evaluations a store does before it writes any: the largest divisor
// of per up to `most` (no bounds test between them).
constexpr int unroll_for(int per, int most) {
  int u = most;
  while (per % u != 0) u--;
  return u;
}
// step(u0) for u0 = 0, by, 2 * by, ... < n: unrolled where that makes at most 16 steps (their
// shared-memory reads and shuffles then overlap across steps, and the indices are constants).
template <int n, int by, class Step>
inline void unrolled_steps(Step step) {
  if constexpr (n / by <= 16) {
#pragma unroll
    for (int u0 = 0; u0 < n; u0 += by) step(u0);
  } else {
    for (int u0 = 0; u0 < n; u0 += by) step(u0);
  }
}
// out[i * W + j] = f(i, j) for the H x W elements of a block, split over the role's threads
// (consecutive threads take consecutive columns, so a warp covers 32 columns of one row). Each
// compute thread evaluates several elements before it stores any, so their shared-memory reads
// overlap.
template <int H, int W, class T, class F>
inline void for_elements(T* out, F f) {
  constexpr int n = H * W, step = kComputeThreads;
  if (is_compute() && n % step == 0) {
    // up to 8 elements per thread at a time, with no bounds test between them: the evaluations
    // (shuffles of row reductions included) interleave
    constexpr int per = n / step, unroll = unroll_for(per, 8);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += step * unroll) {
      T v[unroll];
#pragma unroll
      for (int u = 0; u < unroll; u++) v[u] = f((e0 + u * step) / W, (e0 + u * step) % W);
#pragma unroll
      for (int u = 0; u < unroll; u++) out[e0 + u * step] = v[u];
    }
  } else {
    for (int e = role_rank(); e < n; e += role_size()) out[e] = f(e / W, e % W);
  }
}
// The same with four consecutive elements per evaluation (W a multiple of 128, so a warp's 32
// threads cover 128 columns of one row): f(i, j) returns them, put(p, v) writes them at p.
template <int H, int W, class T, class F, class Put>
inline void for_elements4(T* out, F f, Put put) {
  constexpr int n = H * W / 4, step = kComputeThreads;
  if (is_compute() && n % step == 0) {
    constexpr int per = n / step, unroll = unroll_for(per, 4);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += step * unroll) {
      decltype(f(0, 0)) v[unroll];
#pragma unroll
      for (int u = 0; u < unroll; u++) v[u] = f((e0 + u * step) * 4 / W, (e0 + u * step) * 4 % W);
#pragma unroll
      for (int u = 0; u < unroll; u++) put(out + (e0 + u * step) * 4, v[u]);
    }
  } else {
    for (int e = role_rank(); e < n; e += role_size()) put(out + e * 4, f(e * 4 / W, e * 4 % W));
  }
}
// Row-local blocks (rows a multiple of the compute warps, kernel.h: row_local): warp w evaluates
// element rows w, w + warps, ..., each lane V consecutive columns 32 * V apart (W a multiple of
// 32 * V), up to eight evaluations before any store; f(i, j, k) returns the V elements from (i, j),
// the k-th span of the thread's row (j = V * lane + 32 * V * k), put(p, v) writes them at p. A
// data-movement role's store (one warp) goes element by element.
template <int H, int W, int V, class T, class F, class Put>
inline void for_rows(T* out, F f, Put put) {
  constexpr int span = 32 * V, per_row = W / span, per = H / KILN_TILE_COMPUTE_WARPS * per_row,
                unroll = unroll_for(per, 8);
  if (!is_compute()) {
    auto g = [&](int i, int j) { return f(i, j, j / span); };
    if constexpr (V == 4)
      for_elements4<H, W>(out, g, put);
    else
      for_elements<H, W>(out, g);
    return;
  }
  const int w = warp(), c0 = V * lane();
  auto row = [&](int u) { return w + u / per_row * KILN_TILE_COMPUTE_WARPS; };
  auto col = [&](int u) { return c0 + u % per_row * span; };
  unrolled_steps<per, unroll>([&](int u0) {
    decltype(f(0, 0, 0)) v[unroll];
#pragma unroll
    for (int u = 0; u < unroll; u++) v[u] = f(row(u0 + u), col(u0 + u), (u0 + u) % per_row);
#pragma unroll
    for (int u = 0; u < unroll; u++) put(out + row(u0 + u) * W + col(u0 + u), v[u]);
  });
}
// After a thread wrote a block: the writes are ordered before bulk copies out of it; `crossed`: the
// store read across warps, so the next one starts with a barrier.
inline void compute_end(bool crossed) {
  fence_async_shared();
  set_warp_flag(kiln_tile_block.store_crossed, crossed);
  set_warp_flag(kiln_tile_block.stored, true);
  trace(cuda_abi::kTraceStoreEnd, 0);
}

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
