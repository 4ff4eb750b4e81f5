// data: MNIST idx files (big-endian header; uint8 images and labels) and an MNIST dataset.
#include "data/io.h"
#include "kiln/data.h"

namespace kiln::data {

namespace {
int64_t be32(const uint8_t* p) {
  return static_cast<int64_t>(static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
                              static_cast<uint32_t>(p[2]) << 8 | static_cast<uint32_t>(p[3]));
}
// Reads an idx file with `magic` and `ndims` header dims; returns the dims and the payload.
std::pair<Shape, std::vector<uint8_t>> read_idx(const std::string& what, const std::string& path,
                                                int64_t magic, size_t ndims) {
  auto bytes = io::read_file(what, path);
  auto bad = [&](const std::string& msg) { return Error("kiln: " + what + ": \"" + path + "\": " + msg); };
  size_t header = 4 * (1 + ndims);
  if (bytes.size() < header)
    throw bad("file has " + std::to_string(bytes.size()) + " bytes, shorter than the " +
              std::to_string(header) + "-byte header");
  int64_t m = be32(bytes.data());
  if (m != magic)
    throw bad("bad magic number " + std::to_string(m) + " (expected " + std::to_string(magic) + " for " +
              (magic == 2051 ? "images" : "labels") + ")");
  Shape dims;
  uint64_t n = 1;
  bool overflow = false;  // dims up to 2^32 - 1 each: their product may not fit 64 bits
  for (size_t d = 0; d < ndims; d++) {
    dims.push_back(be32(&bytes[4 * (1 + d)]));
    auto dim = static_cast<uint64_t>(dims.back());
    overflow |= dim != 0 && n > UINT64_MAX / dim;
    n *= dim;
  }
  for (size_t d = 1; d < ndims; d++)  // an image of no pixels would make any count of them fit
    if (dims[d] == 0) throw bad("image dimensions must be at least 1, the header says " + shape_str(dims));
  size_t have = bytes.size() - header;
  if (overflow || have != n)
    throw bad((overflow || have < n ? "truncated: header " : "size mismatch: header ") + shape_str(dims) +
              " needs " + (overflow ? std::string("more than 2^64") : std::to_string(n)) +
              " bytes of data, the file has " + std::to_string(have));
  return {dims, std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end())};
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
