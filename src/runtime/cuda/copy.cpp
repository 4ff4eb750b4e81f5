// Host <-> device copies through pinned staging (see copy.h).
#include "runtime/cuda/copy.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "runtime/cuda/context.h"

namespace kiln::runtime::cuda {

namespace {

constexpr size_t kChunk = size_t{16} << 20;

// Two pinned chunks per device: the host fills one while the other is on the bus.
struct Staging {
  std::mutex mu;
  void* buf[2] = {nullptr, nullptr};
  CUevent done[2] = {nullptr, nullptr};
};

Staging& staging(Context& c) {
  static std::mutex mu;
  static Staging* per[64] = {};
  std::lock_guard<std::mutex> l(mu);
  Staging*& s = per[c.ordinal & 63];
  if (!s) {
    s = new Staging();
    for (int k = 0; k < 2; k++) {
      check(c.api->cuMemHostAlloc(&s->buf[k], kChunk, 0), "cuMemHostAlloc");
      check(c.api->cuEventCreate(&s->done[k], 0), "cuEventCreate");
    }
  }
  return *s;
}

}  // namespace

void upload(int ordinal, CUdeviceptr dst, const void* src, size_t bytes) {
  if (!bytes) return;
  refuse_while_capturing("a copy from the host");
  finish_queued(ordinal);
  Context& c = context(ordinal);
  Staging& s = staging(c);
  std::lock_guard<std::mutex> l(s.mu);
  for (size_t off = 0, k = 0; off < bytes; off += kChunk, k ^= 1) {
    size_t n = std::min(kChunk, bytes - off);
    check(c.api->cuEventSynchronize(s.done[k]), "cuEventSynchronize");  // chunk k free again
    std::memcpy(s.buf[k], static_cast<const char*>(src) + off, n);
    check(c.api->cuMemcpyHtoDAsync(dst + off, s.buf[k], n, c.stream), "cuMemcpyHtoDAsync");
    check(c.api->cuEventRecord(s.done[k], c.stream), "cuEventRecord");
  }
  check(c.api->cuStreamSynchronize(c.stream), "cuStreamSynchronize");
}

void download(int ordinal, void* dst, CUdeviceptr src, size_t bytes) {
  if (!bytes) return;
  refuse_while_capturing("a copy to the host");
  finish_queued(ordinal);
  Context& c = context(ordinal);
  Staging& s = staging(c);
  std::lock_guard<std::mutex> l(s.mu);
  // queue chunk k+1 before copying chunk k out of its staging buffer
  size_t chunks = (bytes + kChunk - 1) / kChunk;
  auto queue = [&](size_t i) {
    size_t off = i * kChunk, n = std::min(kChunk, bytes - off);
    check(c.api->cuMemcpyDtoHAsync(s.buf[i & 1], src + off, n, c.stream), "cuMemcpyDtoHAsync");
    check(c.api->cuEventRecord(s.done[i & 1], c.stream), "cuEventRecord");
  };
  queue(0);
  for (size_t i = 0; i < chunks; i++) {
    if (i + 1 < chunks) queue(i + 1);
    check(c.api->cuEventSynchronize(s.done[i & 1]), "cuEventSynchronize");
    size_t off = i * kChunk, n = std::min(kChunk, bytes - off);
    std::memcpy(static_cast<char*>(dst) + off, s.buf[i & 1], n);
  }
}

void zero_device(int ordinal, CUdeviceptr dst, size_t bytes) {
  if (!bytes) return;
  Context& c = context(ordinal);
  check(c.api->cuMemsetD8Async(dst, 0, bytes, c.stream), "cuMemsetD8Async");
}

void copy_device(int ordinal, CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (!bytes) return;
  Context& c = context(ordinal);
  check(c.api->cuMemcpyDtoDAsync(dst, src, bytes, c.stream), "cuMemcpyDtoDAsync");
}

}  // namespace kiln::runtime::cuda
