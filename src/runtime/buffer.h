// Memory for realized tensors, from their device's backend (runtime/backend.h): pooled aligned host
// memory on the CPU, the caching allocator's on CUDA. Contiguous, row-major.
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/device.h"
#include "kiln/dtype.h"

namespace kiln {

struct Buffer {
  // capacity: elements the memory holds, when more than numel (a symbolic size's largest value:
  // a captured step replays into the buffer at other sizes, engine/memory.cpp)
  Buffer(DType dtype, int64_t numel, Device device = Device::cpu(), int64_t capacity = 0);
  // A view of numel elements at byte `offset` of `base` (an arena of the memory plan): it shares
  // the base's memory and keeps the base alive; the base's allocator frees it.
  Buffer(std::shared_ptr<Buffer> base, size_t offset, DType dtype, int64_t numel);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  DType dtype;
  int64_t numel;
  int64_t capacity;  // >= numel
  Device device;
  void* data = nullptr;          // host pointer on CPU, device address on CUDA
  int64_t id;                    // unique, names the BUFFER node; later buffers have larger ids
  std::shared_ptr<Buffer> base;  // set for a view
  size_t offset = 0;             // of a view, in bytes
  static int64_t next_id();      // the id the next buffer will get
  size_t nbytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
  size_t capacity_bytes() const { return static_cast<size_t>(capacity) * dtype_size(dtype); }
  // A copy on another device (or the same one).
  std::shared_ptr<Buffer> to(Device d) const;
  // element k as double / int64 (host buffers only: the interpreter and printing)
  double get_f(int64_t k) const;
  int64_t get_i(int64_t k) const;
  void set_f(int64_t k, double v);
  void set_i(int64_t k, int64_t v);
};

// Copies src's bytes into dst (same size; any two devices).
void copy_buffer(Buffer& dst, const Buffer& src);
// b itself if it is on the CPU, else a host copy (for the interpreter, printing, files).
std::shared_ptr<const Buffer> on_host(const std::shared_ptr<const Buffer>& b);
// Fills a buffer with bytes from host memory (any device).
void upload(Buffer& dst, const void* host);

}  // namespace kiln
