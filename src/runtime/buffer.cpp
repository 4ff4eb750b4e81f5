// Buffer allocation and element access on the host.
#include "runtime/buffer.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/error.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/copy.h"

namespace kiln {

namespace {
std::atomic<int64_t> next_buffer_id{1};

// Freed host blocks are kept by size and reused: a fresh large allocation costs a page fault per
// 4 KiB on first touch, often more than the kernel that writes it.
class HostPool {
 public:
  void* get(size_t bytes) {
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, bytes);
    if (!p && release()) p = std::aligned_alloc(64, bytes);  // the kept blocks may make room
    return p;
  }
  void put(void* p, size_t bytes) {
    std::lock_guard<std::mutex> l(mu_);
    if (cached_ + bytes > kMaxCached) {
      std::free(p);
      return;
    }
    free_[bytes].push_back(p);
    cached_ += bytes;
  }
  // Frees every kept block; whether there were any.
  bool release() {
    std::lock_guard<std::mutex> l(mu_);
    bool any = cached_ > 0;
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
    return any;
  }

 private:
  static constexpr size_t kMaxCached = size_t{1} << 30;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

HostPool& pool() {
  static HostPool* p = new HostPool();  // outlives static destructors that free buffers
  return *p;
}

size_t rounded(size_t bytes) { return bytes < 64 ? 64 : (bytes + 63) / 64 * 64; }
}  // namespace

Buffer::Buffer(DType dtype_, int64_t numel_, Device device_)
    : dtype(dtype_), numel(numel_), device(device_), id(next_buffer_id++) {
  if (numel < 0) throw Error("Buffer: negative size " + std::to_string(numel));
  if (static_cast<uint64_t>(numel) > (SIZE_MAX - 63) / dtype_size(dtype))
    throw Error("Buffer: " + std::to_string(numel) + " elements of " + to_string(dtype) +
                " are more bytes than memory can address");
  size_t bytes = nbytes();
  if (device.is_cuda()) {
    data = reinterpret_cast<void*>(runtime::cuda::device_alloc(device.index, bytes));
    return;
  }
  data = pool().get(rounded(bytes));
  if (!data)
    throw Error("Buffer: out of host memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(numel) + " elements of " + to_string(dtype) + ")");
}

Buffer::Buffer(std::shared_ptr<Buffer> base_, size_t offset_, DType dtype_, int64_t numel_)
    : dtype(dtype_),
      numel(numel_),
      device(base_->device),
      id(next_buffer_id++),
      base(std::move(base_)),
      offset(offset_) {
  if (numel < 0 || offset + nbytes() > base->nbytes())
    throw Error("Buffer: a view of " + std::to_string(nbytes()) + " bytes at offset " +
                std::to_string(offset) + " does not fit its base of " + std::to_string(base->nbytes()) +
                " bytes");
  data = static_cast<char*>(base->data) + offset;
}

int64_t Buffer::next_id() { return next_buffer_id.load(); }

Buffer::~Buffer() {
  if (base) return;  // a view: its base owns the memory
  if (device.is_cuda())
    runtime::cuda::device_free(device.index, reinterpret_cast<runtime::cuda::CUdeviceptr>(data), nbytes());
  else
    pool().put(data, rounded(nbytes()));
}

void copy_buffer(Buffer& dst, const Buffer& src) {
  if (dst.nbytes() != src.nbytes())
    throw Error("copy_buffer: sizes differ (" + std::to_string(dst.nbytes()) + " and " +
                std::to_string(src.nbytes()) + " bytes)");
  size_t n = src.nbytes();
  if (!n) return;
  auto dev = [](const Buffer& b) { return reinterpret_cast<runtime::cuda::CUdeviceptr>(b.data); };
  if (dst.device.is_cpu() && src.device.is_cpu())
    std::memcpy(dst.data, src.data, n);
  else if (dst.device.is_cpu())
    runtime::cuda::download(src.device.index, dst.data, dev(src), n);
  else if (src.device.is_cpu())
    runtime::cuda::upload(dst.device.index, dev(dst), src.data, n);
  else if (dst.device == src.device)
    runtime::cuda::copy_device(dst.device.index, dev(dst), dev(src), n);
  else {  // between two GPUs: through the host
    Buffer tmp(src.dtype, src.numel);
    copy_buffer(tmp, src);
    copy_buffer(dst, tmp);
  }
}

void upload(Buffer& dst, const void* host) {
  if (!dst.nbytes()) return;
  if (dst.device.is_cpu())
    std::memcpy(dst.data, host, dst.nbytes());
  else
    runtime::cuda::upload(dst.device.index, reinterpret_cast<runtime::cuda::CUdeviceptr>(dst.data), host,
                          dst.nbytes());
}

std::shared_ptr<Buffer> Buffer::to(Device d) const {
  auto b = std::make_shared<Buffer>(dtype, numel, d);
  copy_buffer(*b, *this);
  return b;
}

std::shared_ptr<const Buffer> on_host(const std::shared_ptr<const Buffer>& b) {
  return b->device.is_cpu() ? b : b->to(Device::cpu());
}

double Buffer::get_f(int64_t k) const {
  const char* p = static_cast<const char*>(data);
  switch (dtype) {
    case DType::F32: return reinterpret_cast<const float*>(p)[k];
    case DType::F64: return reinterpret_cast<const double*>(p)[k];
    case DType::F16: return half_to_float(reinterpret_cast<const uint16_t*>(p)[k]);
    case DType::BF16: return bf16_to_float(reinterpret_cast<const uint16_t*>(p)[k]);
    default: return static_cast<double>(get_i(k));
  }
}

int64_t Buffer::get_i(int64_t k) const {
  const char* p = static_cast<const char*>(data);
  switch (dtype) {
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[k] != 0;
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[k];
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[k];
    case DType::I16: return reinterpret_cast<const int16_t*>(p)[k];
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[k];
    case DType::I64: return reinterpret_cast<const int64_t*>(p)[k];
    case DType::U32: return reinterpret_cast<const uint32_t*>(p)[k];
    case DType::U64: return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[k]);
    default: {
      double v = get_f(k);
      return std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0;
    }
  }
}

void Buffer::set_f(int64_t k, double v) {
  char* p = static_cast<char*>(data);
  switch (dtype) {
    case DType::F32: reinterpret_cast<float*>(p)[k] = static_cast<float>(v); return;
    case DType::F64: reinterpret_cast<double*>(p)[k] = v; return;
    case DType::F16: reinterpret_cast<uint16_t*>(p)[k] = float_to_half(static_cast<float>(v)); return;
    case DType::BF16: reinterpret_cast<uint16_t*>(p)[k] = float_to_bf16(static_cast<float>(v)); return;
    default: set_i(k, std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : 0); return;
  }
}

void Buffer::set_i(int64_t k, int64_t v) {
  char* p = static_cast<char*>(data);
  switch (dtype) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[k] = v != 0; return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[k] = static_cast<uint8_t>(v); return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[k] = static_cast<int8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[k] = static_cast<int16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[k] = static_cast<int32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[k] = v; return;
    case DType::U32: reinterpret_cast<uint32_t*>(p)[k] = static_cast<uint32_t>(v); return;
    case DType::U64: reinterpret_cast<uint64_t*>(p)[k] = static_cast<uint64_t>(v); return;
    default: set_f(k, static_cast<double>(v)); return;
  }
}

}  // namespace kiln
