// data::HostTensor: host arrays that datasets produce, converted to and from kiln tensors.
#include <cstring>

#include "ir/node.h"
#include "kiln/data.h"
#include "runtime/buffer.h"

namespace kiln::data {

int64_t HostTensor::numel() const {
  std::optional<int64_t> n = ir::checked_numel(shape);
  if (!n)
    throw Error("kiln: data::HostTensor: shape " + shape_str(shape) +
                " has a negative dimension or more elements than int64 can count");
  return *n;
}

Tensor HostTensor::to_tensor() const {
  if (bytes.size() != static_cast<size_t>(numel() * dtype_size(dtype)))
    throw Error("kiln: data::HostTensor: " + std::to_string(bytes.size()) + " bytes for shape " +
                shape_str(shape) + " of " + to_string(dtype));
  return from_buffer(bytes.data(), shape, dtype);
}

HostTensor HostTensor::from(const Tensor& t) {
  Tensor c = t.detach().contiguous();
  c.realize();
  std::shared_ptr<const Buffer> host = on_host(c.node()->buffer);
  const Buffer& b = *host;
  HostTensor h{t.dtype(), t.shape(), std::vector<uint8_t>(b.nbytes())};
  if (b.nbytes()) std::memcpy(h.bytes.data(), b.data, b.nbytes());
  return h;
}

template <class T>
HostTensor HostTensor::of(const std::vector<T>& values, Shape shape, DType dtype) {
  if (static_cast<int>(sizeof(T)) != dtype_size(dtype))
    throw Error("kiln: data::HostTensor::of: element size " + std::to_string(sizeof(T)) + " for dtype " +
                to_string(dtype));
  HostTensor h{dtype, std::move(shape), std::vector<uint8_t>(values.size() * sizeof(T))};
  if (static_cast<size_t>(h.numel()) != values.size())
    throw Error("kiln: data::HostTensor::of: " + std::to_string(values.size()) + " values for shape " +
                shape_str(h.shape));
  if (!values.empty()) std::memcpy(h.bytes.data(), values.data(), h.bytes.size());
  return h;
}
template HostTensor HostTensor::of(const std::vector<uint8_t>&, Shape, DType);
template HostTensor HostTensor::of(const std::vector<int32_t>&, Shape, DType);
template HostTensor HostTensor::of(const std::vector<int64_t>&, Shape, DType);
template HostTensor HostTensor::of(const std::vector<float>&, Shape, DType);
template HostTensor HostTensor::of(const std::vector<double>&, Shape, DType);

}  // namespace kiln::data
