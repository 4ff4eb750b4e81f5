// data::TokenDataset: (x, y) language-modelling windows over a token sequence.
#include "kiln/data.h"

namespace kiln::data {

namespace {
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

TokenDataset::TokenDataset(const std::vector<uint16_t>& tokens, TokenDatasetOptions o)
    : TokenDataset(std::vector<int64_t>(tokens.begin(), tokens.end()), o) {}

TokenDataset::TokenDataset(std::vector<int64_t> tokens, TokenDatasetOptions o)
    : tokens_(std::move(tokens)), o_(o) {
  const std::string what = "kiln: data::TokenDataset: ";
  if (o.block_size <= 0)
    throw Error(what + "block_size must be positive, got " + std::to_string(o.block_size));
  if (static_cast<int64_t>(tokens_.size()) < o.block_size + 1)
    throw Error(what + std::to_string(tokens_.size()) +
                " tokens are fewer than block_size + 1 = " + std::to_string(o.block_size + 1));
  if (o.dtype != DType::I64 && o.dtype != DType::I32)
    throw Error(what + "dtype must be i64 or i32, got " + to_string(o.dtype));
  if (o.num_samples < 0) throw Error(what + "num_samples must be >= 0, got " + std::to_string(o.num_samples));
}

int64_t TokenDataset::size() const {
  int64_t sequential = (static_cast<int64_t>(tokens_.size()) - 1) / o_.block_size;
  return o_.random && o_.num_samples > 0 ? o_.num_samples : sequential;
}

int64_t TokenDataset::offset(int64_t i) const {
  if (i < 0 || i >= size())
    throw Error("kiln: data::TokenDataset: index " + std::to_string(i) + " out of range for size " +
                std::to_string(size()));
  if (!o_.random) return i * o_.block_size;
  uint64_t choices = tokens_.size() - static_cast<uint64_t>(o_.block_size);  // starts 0 .. n - block_size - 1
  return static_cast<int64_t>(mix(o_.seed ^ mix(static_cast<uint64_t>(i))) % choices);
}

HostExample TokenDataset::get_host(int64_t i) const {
  int64_t o = offset(i);
  auto begin = tokens_.begin() + o;
  Shape s = {o_.block_size};
  if (o_.dtype == DType::I32)
    return {HostTensor::of(std::vector<int32_t>(begin, begin + o_.block_size), s, o_.dtype),
            HostTensor::of(std::vector<int32_t>(begin + 1, begin + o_.block_size + 1), s, o_.dtype)};
  return {HostTensor::of(std::vector<int64_t>(begin, begin + o_.block_size), s, o_.dtype),
          HostTensor::of(std::vector<int64_t>(begin + 1, begin + o_.block_size + 1), s, o_.dtype)};
}

}  // namespace kiln::data
