// Turns the error log a tile kernel wrote on the GPU into one kiln::Error message: failed checks
// first (they caused the stop), otherwise the blocked operations of a deadlock, in the CPU
// backend's wording so one kernel fails alike on both.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tile/cuda/launch_state.h"

namespace kiln::tile::cuda {

namespace {

using cuda_abi::ErrorRecord;

std::string core_name(const Program::Desc& d, int core) {
  if (!d.grid.is_2d) return "core " + std::to_string(core);
  return "core " + std::to_string(core) + " (x=" + std::to_string(core % d.grid.cols) +
         ", y=" + std::to_string(core / d.grid.cols) + ")";
}

template <class T>
std::string name_of(const std::vector<T>& v, int i, const std::string& (*get)(const T&)) {
  return i >= 0 && i < static_cast<int>(v.size()) ? get(v[i]) : "#" + std::to_string(i);
}
const std::string& cb_get(const CBDecl& c) { return c.name; }
const std::string& tensor_get(const TensorDecl& t) { return t.name; }
const std::string& sem_get(const std::string& s) { return s; }

bool is_wait(int kind) {
  return (kind >= cuda_abi::kWaitReserve && kind <= cuda_abi::kWaitMcastReceive) ||
         kind == cuda_abi::kWaitDma;
}

// What the record's role was doing, as the CPU backend says it.
std::string what(const Program::Desc& d, const ErrorRecord& r) {
  const long long* v = r.value;
  switch (r.kind) {
    case cuda_abi::kWaitReserve:
      return "reserve() on " + cb_name(d, r.object) + " (all " + std::to_string(v[0]) + " blocks in use)";
    case cuda_abi::kWaitBlock: return "wait() on " + cb_name(d, r.object) + " (no block pushed)";
    case cuda_abi::kWaitSemaphore:
      return "wait(" + std::to_string(v[0]) + ") on " + semaphore_name(d, r.object);
    case cuda_abi::kWaitMcastSend:
      return "mcast() into " + cb_name(d, r.object) + " waiting for mcast_receive() on " +
             core_name(d, static_cast<int>(v[0]));
    case cuda_abi::kWaitMcastReceive:
      return "wait() for a multicast into " + cb_name(d, r.object) + " (none arrived)";
    case cuda_abi::kWaitDma:
      return "wait() for a DMA into " + cb_name(d, r.object) + " (the copy never completed)";
    case cuda_abi::kBadSlice: {
      int t = r.object / 64, cb = r.object % 64;
      return "dma between tensor '" + name_of(d.tensors, t, tensor_get) + "' slice (row " +
             std::to_string(v[0]) + ", col " + std::to_string(v[1]) + ", " + std::to_string(v[2]) + "x" +
             std::to_string(v[3]) + ") and a block of " + cb_name(d, cb) +
             ": the slice is out of range or does not match the block's shape (blocks of short tiles, and "
             "pieces smaller than a block, move through element-indexed accessors)";
    }
    case cuda_abi::kBadCoreRange:
      return "core range x " + std::to_string(v[0]) + ".." + std::to_string(v[1]) + ", y " +
             std::to_string(v[2]) + ".." + std::to_string(v[3]) + " is empty or outside the " +
             std::to_string(d.grid.rows) + "x" + std::to_string(d.grid.cols) + " grid";
    case cuda_abi::kInputWrite:
      return "dma into input tensor '" + name_of(d.tensors, r.object, tensor_get) +
             "': inputs are read-only, declare an output";
    case cuda_abi::kBadId:
      return std::string("no ") +
             (v[0] == 0   ? "CB"
              : v[0] == 1 ? "tensor"
                          : "semaphore") +
             " with id " + std::to_string(r.object);
    case cuda_abi::kComputeOnly:
      return "column sums (ColSums) in a data-movement role: they are held by the compute role's threads";
    default: return "failed (error kind " + std::to_string(r.kind) + ")";
  }
}

std::string line_of(const Program::Desc& d, const ErrorRecord& r) {
  std::string file(r.file, strnlen(r.file, sizeof r.file));
  return core_name(d, r.core) + " " + role_name(d, r.role) + ": " + what(d, r) + " at " +
         source_position(file, r.line);
}

}  // namespace

std::string role_name(const Program::Desc& d, int role) {
  if (role >= 0 && role < static_cast<int>(d.dm_roles.size())) return d.dm_roles[role];
  return d.compute_role;
}
std::string cb_name(const Program::Desc& d, int i) { return "CB '" + name_of(d.cbs, i, cb_get) + "'"; }
std::string semaphore_name(const Program::Desc& d, int i) {
  return "semaphore '" + name_of(d.semaphores, i, sem_get) + "'";
}

std::string describe_errors(const Program::Desc& d, const cuda_abi::ErrorLog& log, long long timeout_ms) {
  if (log.count == 0) return "";
  std::vector<ErrorRecord> recs(log.rec, log.rec + std::min<unsigned>(log.count, cuda_abi::kMaxErrors));
  std::stable_sort(recs.begin(), recs.end(), [](const ErrorRecord& a, const ErrorRecord& b) {
    if (is_wait(a.kind) != is_wait(b.kind)) return !is_wait(a.kind);
    return a.core != b.core ? a.core < b.core : a.role < b.role;
  });
  std::string more = log.count > recs.size()
                         ? "\n  (" + std::to_string(log.count - recs.size()) + " more records not kept)"
                         : "";
  if (!is_wait(recs[0].kind)) {
    std::string msg = "kiln.tile: kernel '" + d.name + "' on the GPU " + line_of(d, recs[0]);
    size_t waits = 0;
    for (size_t i = 1; i < recs.size(); i++) {
      if (is_wait(recs[i].kind)) {
        waits++;
        continue;
      }
      msg += "\n  " + line_of(d, recs[i]);
    }
    if (waits) msg += "\n  (" + std::to_string(waits) + " other roles stopped at their waits)";
    return msg + more;
  }
  std::string msg = "kiln.tile: deadlock on the GPU in kernel '" + d.name + "': " + line_of(d, recs[0]);
  for (size_t i = 1; i < recs.size(); i++) msg += "\n  " + line_of(d, recs[i]);
  return msg + "\n  (no progress for " + std::to_string(timeout_ms) +
         " ms; KILN_TILE_TIMEOUT_MS sets the limit; every role must be able to go on)" + more;
}

}  // namespace kiln::tile::cuda
