// The boundary between a compiled tile kernel and the backend that runs it: plain C types and one
// table of functions the backend provides (CB, DMA, semaphore and multicast ops). Kernel-facing;
// included by kernel.h, so it stays freestanding (no standard headers) for NVRTC.
#pragma once

namespace kiln::tile::abi {

// A kernel source position, from __builtin_FILE()/__builtin_LINE() default arguments. A negative
// line is the end of the scope of the scoped block taken at line -line (its implicit push or pop:
// C++ has no position for the end of a scope).
struct Loc {
  const char* file;
  int line;
};

// A rectangle of a 2D tensor view, in the accessor's units (tiles or elements).
struct Slice {
  long long row, col, rows, cols;
};

// Cores [x0, x1) x [y0, y1) of a 2D grid (x = column, y = row).
struct CoreRange {
  int x0, y0, x1, y1;
};

// A block of a CB as the kernel names it: CB id, slot in the ring, and the generation of the slot
// when the block was handed out (a later reserve/wait of the slot makes the handle stale).
struct BlockRef {
  int cb, slot;
  unsigned gen;
};

using RoleFn = void (*)();

struct Runtime {
  int (*core_index)();
  int (*core_x)();
  int (*core_y)();
  const long long* (*args)();
  void (*tensor_dims)(int tensor, long long* rows, long long* cols);  // in the accessor's units
  BlockRef (*cb_reserve)(int cb, Loc);
  void (*cb_push)(int cb, Loc);
  BlockRef (*cb_wait)(int cb, Loc);
  void (*cb_pop)(int cb, Loc);
  // Checks that the block may be read (write = 0) or written (write = 1) now; returns its memory.
  void* (*block_data)(BlockRef, int write, Loc);
  int (*dma_read)(int tensor, Slice, BlockRef, float pad, Loc);  // tensor -> block; a transfer id
  int (*dma_write)(BlockRef, int tensor, Slice, Loc);            // block -> tensor
  int (*mcast)(BlockRef, int dst_cb, CoreRange, Loc);            // block -> receivers' blocks
  int (*mcast_receive)(BlockRef, Loc);                           // a reserved block awaits a multicast
  void (*transfer_wait)(int transfer, Loc);
  void (*sem_set)(int sem, long long value, Loc);
  void (*sem_inc)(int sem, long long n, Loc);
  void (*sem_wait)(int sem, long long value, Loc);  // until the value is >= value
  long long (*sem_value)(int sem, Loc);
  void (*sem_remote_inc)(int sem, int x, int y, long long n, Loc);
  void (*sem_mcast_set)(int sem, CoreRange, long long value, Loc);
  void (*sem_mcast_inc)(int sem, CoreRange, long long n, Loc);
  void (*fail)(const char* message, Loc);  // never returns
  // Fails unless the calling role is the compute role; `what` names the operation.
  void (*compute_only)(const char* what, Loc);
};

}  // namespace kiln::tile::abi
