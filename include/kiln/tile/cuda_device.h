// The tile runtime on a GPU, compiled with the kernel by NVRTC (kernel.h includes it when the
// generated prelude defines KILN_TILE_CUDA). A core is a thread block: the compute role runs on
// KILN_TILE_COMPUTE_WARPS warps (warps 0.., so a future wgmma warpgroup starts at warp 0), each
// data-movement role on one warp after them. Every thread of a role runs the role's code with the
// same control flow (kernel code depends only on block-uniform values), so every operation below
// is collective over the role: one leader thread touches counters and barriers, the rest join at
// role barriers. CBs are rings in dynamic shared memory; each slot has a `full` and an `empty`
// mbarrier (arrival count 1: the leader arrives after a role barrier, which orders the other
// threads' accesses before its release). Semaphores and multicast mailboxes live in global memory.
// Every wait has a watchdog: past the launch's timeout the leader writes an error record, raises the
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
inline constexpr int kRoles = KILN_TILE_DM_ROLES + 1;

struct CBCounters {
  unsigned reserved, pushed, waited, popped, received;  // blocks handed out by this core so far
};

struct BlockState {
  const cuda_abi::Params* p;
  int core;
  long long bcast[kRoles];  // a value the role's leader hands to the rest of the role
  CBCounters cb[cuda_abi::kMaxCBs];
};

// 16 bytes moved as one vector access (shared and global addresses here are 16-byte aligned).
struct alignas(16) Vec16 {
  unsigned x, y, z, w;
};

}  // namespace kiln::tile::cuda

__shared__ kiln::tile::cuda::BlockState kiln_tile_block;
// CB rings and their mbarriers (host layout); aligned for mbarriers (8) and 16-byte copies
extern __shared__ __align__(128) unsigned char kiln_tile_smem[];

namespace kiln::tile::cuda {

// ---- who am I ----
inline const cuda_abi::Params& P() { return *kiln_tile_block.p; }
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

// A barrier over the calling role's threads; orders their shared and global accesses. Named
// barrier 1 for the compute warps (0 is __syncthreads), non-.aligned because the leader may arrive
// from a different branch than the rest of its warp.
inline void role_sync() {
  if (is_compute() && kComputeThreads > 32)
    asm volatile("barrier.sync 1, %0;" ::"r"(kComputeThreads) : "memory");
  else
    __syncwarp();
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
inline void mbar_arrive(unsigned addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(addr) : "memory");
}
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
inline unsigned full_bar(int cb, unsigned slot) {
  return smem_addr(kiln_tile_smem + P().cbs[cb].barrier_offset) + slot * 8;
}
inline unsigned empty_bar(int cb, unsigned slot) {
  return smem_addr(kiln_tile_smem + P().cbs[cb].barrier_offset) + (P().cbs[cb].slots + slot) * 8;
}

// ---- global memory helpers: L2-coherent reads (data another block wrote) ----
inline unsigned ld_cg_u32(const void* p) {
  unsigned v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
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
inline void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// ---- failures and the watchdog ----
inline void copy_file(char* dst, const char* src) {
  int i = 0;
  if (src)
    for (; i < cuda_abi::kFileChars - 1 && src[i]; i++) dst[i] = src[i];
  dst[i] = 0;
}

// Leader only: appends a record to the launch's error log and raises the abort flag.
inline void record(int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0, long long v2 = 0,
                   long long v3 = 0) {
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
}
inline bool aborted() { return ld_volatile(&reinterpret_cast<cuda_abi::ErrorLog*>(P().errors)->abort) != 0; }

// Ends the calling thread; used only where the whole role stops at the same point.
inline void stop_thread() { asm volatile("exit;" ::: "memory"); }

// A failed check, evaluated identically by every thread of the role: record once, stop the role.
inline void fail_role(int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0, long long v2 = 0,
                      long long v3 = 0) {
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

// The leader polls ready() until it holds; on timeout (or when another role already failed) it
// records what it waited for and the whole role stops. Returns with the role in sync.
template <class Ready>
inline void wait_until(Ready ready, int kind, int object, abi::Loc at, long long v0 = 0, long long v1 = 0) {
  long long stop = from_leader([&]() -> long long {
    if (ready()) return 0;
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

inline void check_cb(int id, abi::Loc at) {
  if (id < 0 || id >= P().ncbs) fail_role(cuda_abi::kBadId, id, at, 0);
}

// ---- grid ----
inline int core_index() { return kiln_tile_block.core; }
inline int core_x() { return kiln_tile_block.core % P().grid_cols; }
inline int core_y() { return kiln_tile_block.core / P().grid_cols; }
inline const long long* args() {
  return reinterpret_cast<const long long*>(P().args) +
         static_cast<long long>(kiln_tile_block.core) * P().nargs;
}
inline void tensor_dims(int t, long long* rows, long long* cols) {
  const cuda_abi::TensorParam& v = P().tensors[t];
  *rows = v.tiles ? (v.rows + 31) / 32 : v.rows;
  *cols = v.tiles ? (v.cols + 31) / 32 : v.cols;
}

// ---- circular buffers ----
inline unsigned char* slot_data(int cb, int slot) {
  return kiln_tile_smem + P().cbs[cb].data_offset + static_cast<unsigned>(slot) * P().cbs[cb].block_bytes;
}

inline abi::BlockRef cb_reserve(int id, abi::Loc at) {
  check_cb(id, at);
  role_sync();
  unsigned n = P().cbs[id].slots, k = kiln_tile_block.cb[id].reserved, slot = k % n;
  // the first pass over the ring finds every slot free: waiting on parity 1 of a fresh barrier
  // returns at once
  unsigned bar = empty_bar(id, slot), parity = ((k / n) & 1) ^ 1;
  wait_until([&] { return mbar_done(bar, parity); }, cuda_abi::kWaitReserve, id, at, n);
  if (leader()) kiln_tile_block.cb[id].reserved = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_push(int id, abi::Loc at) {
  check_cb(id, at);
  cp_async_wait_all();  // a push without waiting its DMA still publishes complete data
  role_sync();
  if (leader()) {
    unsigned k = kiln_tile_block.cb[id].pushed++;
    mbar_arrive(full_bar(id, k % P().cbs[id].slots));
  }
}

inline abi::BlockRef cb_wait(int id, abi::Loc at) {
  check_cb(id, at);
  role_sync();
  unsigned n = P().cbs[id].slots, k = kiln_tile_block.cb[id].waited, slot = k % n;
  unsigned bar = full_bar(id, slot), parity = (k / n) & 1;
  wait_until([&] { return mbar_done(bar, parity); }, cuda_abi::kWaitBlock, id, at, n);
  if (leader()) kiln_tile_block.cb[id].waited = k + 1;
  return abi::BlockRef{id, static_cast<int>(slot), k};
}

inline void cb_pop(int id, abi::Loc at) {
  check_cb(id, at);
  role_sync();  // every thread is done with the block
  if (leader()) {
    unsigned k = kiln_tile_block.cb[id].popped++;
    mbar_arrive(empty_bar(id, k % P().cbs[id].slots));
  }
}

inline void* block_data(abi::BlockRef b, int, abi::Loc) { return slot_data(b.cb, b.slot); }

// ---- DMA between tensors and blocks ----
struct Rect {
  long long r0, c0, rows, cols;  // elements; rows/cols clipped to the tensor
};

// The element rectangle of a slice, with the CPU backend's checks (a bad slice would fault).
inline Rect slice_rect(int t, const cuda_abi::CBParam& cb, int cbid, abi::Slice s, abi::Loc at) {
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  const cuda_abi::TensorParam& v = P().tensors[t];
  if (v.tiles) {
    long long R = (v.rows + 31) / 32, C = (v.cols + 31) / 32;
    if (s.rows != cb.rows || s.cols != cb.cols || s.row < 0 || s.col < 0 || s.row + s.rows > R ||
        s.col + s.cols > C)
      fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
    long long r0 = s.row * 32, c0 = s.col * 32, h = s.rows * 32, w = s.cols * 32;
    return Rect{r0, c0, h < v.rows - r0 ? h : v.rows - r0, w < v.cols - c0 ? w : v.cols - c0};
  }
  if (s.rows < 0 || s.cols < 0 || s.rows > cb.rows * 32LL || s.cols > cb.cols * 32LL || s.row < 0 ||
      s.col < 0 || s.row + s.rows > v.rows || s.col + s.cols > v.cols)
    fail_role(cuda_abi::kBadSlice, t * 64 + cbid, at, s.row, s.col, s.rows, s.cols);
  return Rect{s.row, s.col, s.rows, s.cols};
}

// tensor -> block: 16-byte cp.async where rows are aligned, element copies elsewhere (partial
// chunks, padding, unaligned slices). Completes at transfer_wait.
inline int dma_read(int t, abi::Slice s, abi::BlockRef b, float pad, abi::Loc at) {
  check_cb(b.cb, at);
  const cuda_abi::CBParam& cb = P().cbs[b.cb];
  Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  const int es = v.elem_bytes, bw = cb.cols * 32, bh = cb.rows * 32, ce = 16 / es;
  unsigned char* dst = slot_data(b.cb, b.slot);
  const unsigned char* src = reinterpret_cast<const unsigned char*>(v.data);
  unsigned pad_bits = __float_as_uint(pad);
  if (es == 2) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(pad));
    pad_bits = h;
  }
  bool aligned = (v.data % 16) == 0 && (v.cols * es) % 16 == 0 && (r.c0 * es) % 16 == 0;
  auto element = [&](int i, int j) {  // block element (i, j)
    unsigned char* d = dst + (i * bw + j) * es;
    bool in = i < r.rows && j < r.cols;
    const unsigned char* g = src + ((r.r0 + i) * v.cols + r.c0 + j) * es;
    if (es == 4)
      *reinterpret_cast<unsigned*>(d) = in ? ld_cg_u32(g) : pad_bits;
    else
      *reinterpret_cast<unsigned short*>(d) = in ? ld_cg_u16(g) : static_cast<unsigned short>(pad_bits);
  };
  if (aligned) {
    const int chunks = bw / ce;  // per block row
    for (int q = role_rank(); q < bh * chunks; q += role_size()) {
      int i = q / chunks, j = (q % chunks) * ce;
      if (i < r.rows && j + ce <= r.cols) {
        cp_async16(smem_addr(dst + (i * bw + j) * es), src + ((r.r0 + i) * v.cols + r.c0 + j) * es);
      } else {
        for (int e = 0; e < ce; e++) element(i, j + e);
      }
    }
  } else {
    for (int q = role_rank(); q < bh * bw; q += role_size()) element(q / bw, q % bw);
  }
  return 0;
}

// block -> tensor with plain stores (16-byte where aligned); done when every thread returns.
inline int dma_write(abi::BlockRef b, int t, abi::Slice s, abi::Loc at) {
  check_cb(b.cb, at);
  if (t < 0 || t >= P().ntensors) fail_role(cuda_abi::kBadId, t, at, 1);
  if (!P().tensors[t].output) fail_role(cuda_abi::kInputWrite, t, at);
  const cuda_abi::CBParam& cb = P().cbs[b.cb];
  Rect r = slice_rect(t, cb, b.cb, s, at);
  const cuda_abi::TensorParam& v = P().tensors[t];
  cp_async_wait_all();
  role_sync();
  const int es = v.elem_bytes, bw = cb.cols * 32, ce = 16 / es;
  const unsigned char* blk = slot_data(b.cb, b.slot);
  unsigned char* dst = reinterpret_cast<unsigned char*>(v.data);
  bool aligned = (v.data % 16) == 0 && (v.cols * es) % 16 == 0 && (r.c0 * es) % 16 == 0;
  auto element = [&](long long i, long long j) {
    unsigned char* g = dst + ((r.r0 + i) * v.cols + r.c0 + j) * es;
    if (es == 4)
      *reinterpret_cast<unsigned*>(g) = *reinterpret_cast<const unsigned*>(blk + (i * bw + j) * es);
    else
      *reinterpret_cast<unsigned short*>(g) =
          *reinterpret_cast<const unsigned short*>(blk + (i * bw + j) * es);
  };
  if (aligned) {
    const long long chunks = (r.cols + ce - 1) / ce;
    for (long long q = role_rank(); q < r.rows * chunks; q += role_size()) {
      long long i = q / chunks, j = (q % chunks) * ce;
      if (j + ce <= r.cols)
        *reinterpret_cast<Vec16*>(dst + ((r.r0 + i) * v.cols + r.c0 + j) * es) =
            *reinterpret_cast<const Vec16*>(blk + (i * bw + j) * es);
      else
        for (long long e = j; e < r.cols; e++) element(i, e);
    }
  } else {
    for (long long q = role_rank(); q < r.rows * r.cols; q += role_size()) element(q / r.cols, q % r.cols);
  }
  return 0;
}

// ---- cross-core: semaphores and multicast through global memory ----
// Multicast counters per (receiving core, CB): claimed by senders, receives asked for, payloads
// delivered, payloads copied out of the mailbox.
enum { kClaim = 0, kReady = 1, kFilled = 2, kConsumed = 3 };
inline unsigned* mcast_counter(int core, int cb, int which) {
  return reinterpret_cast<unsigned*>(P().mcast) + (static_cast<long long>(core) * P().ncbs + cb) * 4 + which;
}
inline unsigned char* mailbox(int core, int cb) {
  return reinterpret_cast<unsigned char*>(P().cbs[cb].mailbox) +
         static_cast<long long>(core) * P().cbs[cb].block_bytes;
}

inline void check_range(abi::CoreRange r, abi::Loc at) {
  int rows = P().cores / P().grid_cols;
  if (r.x0 < 0 || r.y0 < 0 || r.x0 >= r.x1 || r.y0 >= r.y1 || r.x1 > P().grid_cols || r.y1 > rows)
    fail_role(cuda_abi::kBadCoreRange, 0, at, r.x0, r.x1, r.y0, r.y1);
}

// Copies the block to every receiver's mailbox once that receiver asked for it and consumed the
// previous payload; returns when all are delivered.
inline int mcast(abi::BlockRef b, int dst, abi::CoreRange range, abi::Loc at) {
  check_cb(b.cb, at);
  check_cb(dst, at);
  check_range(range, at);
  cp_async_wait_all();
  role_sync();
  const unsigned char* blk = slot_data(b.cb, b.slot);
  const int bytes = static_cast<int>(P().cbs[dst].block_bytes);
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
      unsigned char* box = mailbox(rc, dst);
      for (int q = role_rank(); q < bytes / 16; q += role_size())
        reinterpret_cast<Vec16*>(box)[q] = reinterpret_cast<const Vec16*>(blk)[q];
      __threadfence();
      role_sync();
      if (leader()) atomicMax(mcast_counter(rc, dst, kFilled), k);
    }
  return 0;
}

// Receives are transfer ids below zero: -(1 + (n << 10 | cb << 5 | slot)) for the n-th receive.
inline int mcast_receive(abi::BlockRef b, abi::Loc at) {
  check_cb(b.cb, at);
  role_sync();
  long long n = from_leader([&]() -> long long {
    unsigned v = ++kiln_tile_block.cb[b.cb].received;
    atomicMax(mcast_counter(kiln_tile_block.core, b.cb, kReady), v);
    return v;
  });
  return -static_cast<int>(1 + ((n << 10) | (b.cb << 5) | b.slot));
}

inline void transfer_wait(int id, abi::Loc at) {
  if (id >= 0) {  // DMA reads: this thread's cp.async copies; writes are already done
    cp_async_wait_all();
    role_sync();
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
  const unsigned char* box = mailbox(me, cb);
  unsigned char* blk = slot_data(cb, slot);
  for (int q = role_rank(); q < static_cast<int>(P().cbs[cb].block_bytes / 16); q += role_size())
    reinterpret_cast<Vec16*>(blk)[q] = ld_cg_v4(box + q * 16);
  role_sync();
  if (leader()) atomicMax(mcast_counter(me, cb, kConsumed), n);
}

inline long long* sem_ptr(int core, int sem) {
  return reinterpret_cast<long long*>(P().sems) + static_cast<long long>(core) * P().nsems + sem;
}
inline void check_sem(int sem, abi::Loc at) {
  if (sem < 0 || sem >= P().nsems) fail_role(cuda_abi::kBadId, sem, at, 2);
}
// Makes the role's earlier global writes visible before the leader signals another core.
inline void release_role() {
  cp_async_wait_all();
  __threadfence();
  role_sync();
}

inline void sem_set(int sem, long long v, abi::Loc at) {
  check_sem(sem, at);
  release_role();
  if (leader())
    atomicExch(reinterpret_cast<unsigned long long*>(sem_ptr(kiln_tile_block.core, sem)),
               static_cast<unsigned long long>(v));
}
inline void sem_inc(int sem, long long n, abi::Loc at) {
  check_sem(sem, at);
  release_role();
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
  check_range(abi::CoreRange{x, y, x + 1, y + 1}, at);
  release_role();
  if (leader())
    atomicAdd(reinterpret_cast<unsigned long long*>(sem_ptr(y * P().grid_cols + x, sem)),
              static_cast<unsigned long long>(n));
}
inline void sem_mcast_set(int sem, abi::CoreRange r, long long v, abi::Loc at) {
  check_sem(sem, at);
  check_range(r, at);
  release_role();
  if (leader())
    for (int y = r.y0; y < r.y1; y++)
      for (int x = r.x0; x < r.x1; x++)
        atomicExch(reinterpret_cast<unsigned long long*>(sem_ptr(y * P().grid_cols + x, sem)),
                   static_cast<unsigned long long>(v));
}

// ---- compute helpers ----
// Before a role computes on blocks: its own DMA into them has landed and earlier writes by other
// threads of the role are visible.
inline void compute_begin() {
  cp_async_wait_all();
  role_sync();
}

// ---- the kernel's first steps: per-block state and the CB barriers ----
inline void block_start(const cuda_abi::Params* p) {
  if (threadIdx.x == 0) {
    kiln_tile_block.p = p;
    kiln_tile_block.core = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
    for (int i = 0; i < cuda_abi::kMaxCBs; i++) kiln_tile_block.cb[i] = CBCounters{0, 0, 0, 0, 0};
    for (int i = 0; i < p->ncbs; i++) {
      unsigned base = smem_addr(kiln_tile_smem + p->cbs[i].barrier_offset);
      for (unsigned s = 0; s < 2 * p->cbs[i].slots; s++) mbar_init(base + s * 8, 1);
    }
  }
  __syncthreads();
}

}  // namespace kiln::tile::cuda
