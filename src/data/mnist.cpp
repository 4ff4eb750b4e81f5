// data: MNIST idx files (big-endian header; uint8 images and labels) and an MNIST dataset.
#include <fstream>

#include "ir/node.h"
#include "kiln/data.h"

namespace kiln::data {

namespace {
int64_t be32(const uint8_t* p) {
  return static_cast<int64_t>(static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
                              static_cast<uint32_t>(p[2]) << 8 | static_cast<uint32_t>(p[3]));
}
// Reads an idx file with `magic` and `ndims` header dims; returns the dims and the payload. The
// header's element count is checked (int64, against the file's size) before the payload is read.
std::pair<Shape, std::vector<uint8_t>> read_idx(const std::string& what, const std::string& path,
                                                int64_t magic, size_t ndims) {
  auto bad = [&](const std::string& msg) { return Error("kiln: " + what + ": \"" + path + "\": " + msg); };
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw Error("kiln: " + what + ": cannot open \"" + path + "\"");
  const auto size = static_cast<uint64_t>(f.tellg());
  const size_t header = 4 * (1 + ndims);
  if (size < header)
    throw bad("file has " + std::to_string(size) + " bytes, shorter than the " + std::to_string(header) +
              "-byte header");
  std::vector<uint8_t> head(header);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(header));
  int64_t m = be32(head.data());
  if (m != magic)
    throw bad("bad magic number " + std::to_string(m) + " (expected " + std::to_string(magic) + " for " +
              (magic == 2051 ? "images" : "labels") + ")");
  Shape dims;
  for (size_t d = 0; d < ndims; d++) dims.push_back(be32(&head[4 * (1 + d)]));
  std::optional<int64_t> n = ir::checked_numel(dims);
  if (!n) throw bad("header " + shape_str(dims) + " has more elements than int64 can count");
  const uint64_t have = size - header, need = static_cast<uint64_t>(*n);
  if (have != need)
    throw bad((have < need ? "truncated: header " : "size mismatch: header ") + shape_str(dims) + " needs " +
              std::to_string(need) + " bytes of data, the file has " + std::to_string(have));
  std::vector<uint8_t> data(static_cast<size_t>(need));
  f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(need));
  if (!f) throw bad("read failed");
  return {dims, std::move(data)};
}
}  // namespace

HostTensor read_mnist_images(const std::string& path) {
  auto [dims, data] = read_idx("data::read_mnist_images", path, 2051, 3);
  return HostTensor{DType::U8, dims, std::move(data)};
}

HostTensor read_mnist_labels(const std::string& path) {
  auto [dims, data] = read_idx("data::read_mnist_labels", path, 2049, 1);
  return HostTensor::of(std::vector<int64_t>(data.begin(), data.end()), dims, DType::I64);
}

Tensor load_mnist_images(const std::string& path) { return read_mnist_images(path).to_tensor(); }
Tensor load_mnist_labels(const std::string& path) { return read_mnist_labels(path).to_tensor(); }

TensorDataset mnist_dataset(const std::string& images_path, const std::string& labels_path) {
  HostTensor images = read_mnist_images(images_path), labels = read_mnist_labels(labels_path);
  if (images.shape[0] != labels.shape[0])
    throw Error("kiln: data::mnist_dataset: \"" + images_path + "\" has " + std::to_string(images.shape[0]) +
                " images but \"" + labels_path + "\" has " + std::to_string(labels.shape[0]) + " labels");
  return TensorDataset(std::vector<HostTensor>{std::move(images), std::move(labels)});
}

}  // namespace kiln::data
