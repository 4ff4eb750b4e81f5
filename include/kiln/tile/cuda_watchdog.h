// The tile runtime on a GPU (part of cuda_device.h): the trace (KILN_TILE_TRACE), error records,
// failed checks that stop a role, and waits with a watchdog.
#pragma once
#include "kiln/tile/cuda_block_state.h"
#include "kiln/tile/cuda_ptx.h"

namespace kiln::tile::cuda {

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

}  // namespace kiln::tile::cuda
