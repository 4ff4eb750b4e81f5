// data::Dataset and data::TensorDataset: examples as host arrays, rows of tensors sharing dim 0.
#include <cstring>

#include "kiln/data.h"

namespace kiln::data {

Example Dataset::get(int64_t i) const {
  Example ex;
  for (auto& h : get_host(i)) ex.push_back(h.to_tensor());
  return ex;
}

namespace {
std::vector<HostTensor> to_host(const std::vector<Tensor>& ts) {
  std::vector<HostTensor> hs;
  for (auto& t : ts) hs.push_back(HostTensor::from(t));
  return hs;
}
}  // namespace

TensorDataset::TensorDataset(const std::vector<Tensor>& tensors) : TensorDataset(to_host(tensors)) {}

TensorDataset::TensorDataset(std::vector<HostTensor> tensors) : data_(std::move(tensors)) {
  if (data_.empty()) throw Error("kiln: data::TensorDataset: needs at least one tensor");
  for (size_t k = 0; k < data_.size(); k++) {
    if (data_[k].shape.empty())
      throw Error("kiln: data::TensorDataset: tensor " + std::to_string(k) + " is 0-d; tensors need a dim 0");
    if (data_[k].shape[0] != data_[0].shape[0])
      throw Error("kiln: data::TensorDataset: tensors must share dim 0, tensor 0 has shape " +
                  shape_str(data_[0].shape) + " and tensor " + std::to_string(k) + " has shape " +
                  shape_str(data_[k].shape));
  }
  n_ = data_[0].shape[0];
}

HostExample TensorDataset::get_host(int64_t i) const {
  if (i < 0 || i >= n_)
    throw Error("kiln: data::TensorDataset: index " + std::to_string(i) + " out of range for size " +
                std::to_string(n_));
  HostExample ex;
  for (auto& t : data_) {
    Shape row(t.shape.begin() + 1, t.shape.end());
    size_t row_bytes = t.bytes.size() / static_cast<size_t>(n_);
    HostTensor h{t.dtype, row, std::vector<uint8_t>(row_bytes)};
    if (row_bytes)
      std::memcpy(h.bytes.data(), t.bytes.data() + static_cast<size_t>(i) * row_bytes, row_bytes);
    ex.push_back(std::move(h));
  }
  return ex;
}

}  // namespace kiln::data
