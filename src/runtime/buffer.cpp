// Buffers: memory from their device's backend (runtime/backend.h), copies between devices, and
// element access on the host.
#include "runtime/buffer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>

#include "kiln/error.h"
#include "runtime/backend.h"

namespace kiln {

namespace {
std::atomic<int64_t> next_buffer_id{1};
}  // namespace

Buffer::Buffer(DType dtype_, int64_t numel_, Device device_, int64_t capacity_)
    : dtype(dtype_),
      numel(numel_),
      capacity(std::max(numel_, capacity_)),
      device(device_),
      id(next_buffer_id++) {
  if (numel < 0) throw Error("Buffer: negative size " + std::to_string(numel));
  if (static_cast<uint64_t>(capacity) > (SIZE_MAX - 63) / dtype_size(dtype))
    throw Error("Buffer: " + std::to_string(capacity) + " elements of " + to_string(dtype) +
                " are more bytes than memory can address");
  runtime::Backend& b = runtime::backend(device);
  try {
    data = b.allocate(capacity_bytes());
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (" + std::to_string(capacity) + " elements of " + to_string(dtype) +
                ")");
  }
}

Buffer::Buffer(std::shared_ptr<Buffer> base_, size_t offset_, DType dtype_, int64_t numel_)
    : dtype(dtype_),
      numel(numel_),
      capacity(numel_),
      device(base_->device),
      id(next_buffer_id++),
      base(std::move(base_)),
      offset(offset_) {
  if (numel < 0 || offset + nbytes() > base->capacity_bytes())
    throw Error("Buffer: a view of " + std::to_string(nbytes()) + " bytes at offset " +
                std::to_string(offset) + " does not fit its base of " +
                std::to_string(base->capacity_bytes()) + " bytes");
  data = static_cast<char*>(base->data) + offset;
}

int64_t Buffer::next_id() { return next_buffer_id.load(); }

Buffer::~Buffer() {
  if (base) return;  // a view: its base owns the memory
  runtime::backend(device).free(data, capacity_bytes());
}

void copy_buffer(Buffer& dst, const Buffer& src) {
  if (dst.nbytes() != src.nbytes())
    throw Error("copy_buffer: sizes differ (" + std::to_string(dst.nbytes()) + " and " +
                std::to_string(src.nbytes()) + " bytes)");
  size_t n = src.nbytes();
  if (!n) return;
  // every backend copies to and from host memory; two other devices meet there
  if (dst.device == src.device)
    runtime::backend(dst.device).copy(dst.data, src.data, n);
  else if (dst.device.is_cpu())
    runtime::backend(src.device).download(dst.data, src.data, n);
  else if (src.device.is_cpu())
    runtime::backend(dst.device).upload(dst.data, src.data, n);
  else {
    Buffer tmp(src.dtype, src.numel);
    copy_buffer(tmp, src);
    copy_buffer(dst, tmp);
  }
}

void upload(Buffer& dst, const void* host) {
  if (dst.nbytes()) runtime::backend(dst.device).upload(dst.data, host, dst.nbytes());
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
