// The boundary between the host and a tile program compiled for the GPU: the launch parameters
// (one struct in device memory per launch) and the error log the kernel writes when a role fails
// or stops making progress. Plain integer fields only, so the host compiler and NVRTC lay it out
// identically; freestanding (no standard headers) for NVRTC.
#pragma once

namespace kiln::tile::cuda_abi {

inline constexpr int kMaxTensors = 16;
inline constexpr int kMaxCBs = 24;  // CB ids and ring slots are packed into 5 bits each
inline constexpr int kMaxSlots = 32;
inline constexpr int kMaxErrors = 16;  // records kept; the count goes on
inline constexpr int kMaxArgs = 16;    // runtime args per core (each core keeps its own in shared memory)
inline constexpr int kFileChars = 96;
// Shared memory per CB slot ahead of the rings: full, empty and dma mbarriers, the DMA count and
// the padding signature, 8 bytes each.
inline constexpr unsigned kBarrierBytesPerSlot = 40;
// Multicast state per (receiving core, CB), in global memory: four counters (senders' claims,
// receives asked for, payloads delivered, payloads copied out of the mailbox), then per receive n
// (at n % kMaxSlots) the slot it lands in and whether its payload came straight into that slot
// through distributed shared memory (a sender in the receiver's thread-block cluster).
inline constexpr int kMcastWords = 4 + 2 * kMaxSlots;
// Tensor maps for the bulk tensor copy engine: one per (tensor, block shape) pair, at most this many.
inline constexpr int kMaxTensorMaps = 24;

struct TensorParam {
  unsigned long long data;  // device address, row-major
  long long rows, cols;     // elements
  int elem_bytes;           // 4 (f32) or 2 (bf16)
  int tiles;                // 1: the accessor counts in 32x32 tiles, 0: in elements
  int output;
  int map_base;  // tensor maps of this tensor: map_base + the CB's box shape (-1: none)
};

struct CBParam {
  unsigned data_offset;  // byte offset of slot 0 in the dynamic shared memory
  unsigned block_bytes;
  unsigned slots;
  unsigned barrier_offset;     // byte offset of the slots' barriers (kBarrierBytesPerSlot each)
  int rows, cols;              // block shape in tiles
  int tile_rows, pad;          // rows of a tile (32, or fewer for short tiles)
  unsigned long long mailbox;  // multicast: device address of core 0's mailbox for this CB
};

// Why a role stopped. Waits are deadlock reports; the rest are failed checks.
enum ErrorKind : int {
  kWaitReserve = 1,  // reserve() found no free slot
  kWaitBlock = 2,    // wait() found no pushed block
  kWaitSemaphore = 3,
  kWaitMcastSend = 4,     // mcast() waiting for a receiver's mcast_receive()
  kWaitMcastReceive = 5,  // a multicast receive waiting for its data
  kBadSlice = 6,          // DMA slice outside the tensor or not the block's shape
  kBadCoreRange = 7,
  kInputWrite = 8,    // DMA into an input tensor
  kFail = 9,          // the kernel called fail()
  kBadId = 10,        // CB / semaphore / tensor id out of range
  kWaitDma = 11,      // a DMA read into a block never completed
  kComputeOnly = 12,  // a compute-role operation (column sums) in a data-movement role
};

struct ErrorRecord {
  int kind;
  int core;
  int role;    // data-movement roles 0.., then compute
  int object;  // CB, semaphore or tensor id
  int line;
  int pad;
  long long value[4];  // kind-specific: semaphore target and value, slice row/col/rows/cols
  char file[kFileChars];
};

struct ErrorLog {
  unsigned count;  // records written (may exceed kMaxErrors)
  unsigned abort;  // set by the first failure: every role stops at its next wait
  ErrorRecord rec[kMaxErrors];
};

struct Params {
  TensorParam tensors[kMaxTensors];
  CBParam cbs[kMaxCBs];
  unsigned long long args;       // long long[cores][nargs] in host memory mapped for the device
  unsigned long long sems;       // long long[cores][nsems], zeroed before the launch
  unsigned long long mcast;      // unsigned[cores][ncbs][kMcastWords] multicast state, zeroed
  unsigned long long errors;     // ErrorLog, zeroed
  unsigned long long host_flag;  // unsigned in mapped host memory: set to 1 at the first failure
  unsigned long long timeout_ns;
  unsigned long long trace;  // KILN_TILE_TRACE: unsigned long long count, then trace_cap records
  int ntensors, ncbs, nargs, nsems;
  int cores, grid_cols;
  unsigned barrier_bytes;  // the CBs' barriers and counters at the start of dynamic shared memory
  int trace_cap;
};

// A trace record (KILN_TILE_TRACE): clock() << 32 | event << 24 | warp << 16 | object. Events: a
// slow wait's start and end (2 * ErrorKind + 0 / 1; object: the CB or semaphore), a store's start,
// the end of its barrier and its end, a DMA read or write issued (object: the CB).
enum TraceEvent : unsigned {
  kTraceStore = 100,
  kTraceStoreBarrier = 101,
  kTraceStoreEnd = 102,
  kTraceDmaRead = 103,
  kTraceDmaWrite = 104,
};

// A CUtensorMap (opaque, 128 bytes, 64-byte aligned), and the launch's maps: a second
// __grid_constant__ kernel argument (the copy engine reads them from parameter space).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};
struct TensorMaps {
  TensorMap map[kMaxTensorMaps];
};

}  // namespace kiln::tile::cuda_abi
