// kiln::data: datasets, a batching DataLoader with seeded shuffling and a prefetch thread, readers
// for llm.c token shards and MNIST idx files, and character- and byte-level tokenizers.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::data {

// A contiguous, row-major array on the host. Datasets produce these and the loader batches them
// without any kiln graph work, so they may be built on the loader's prefetch thread.
struct HostTensor {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;  // numel() * dtype_size(dtype)

  int64_t numel() const;
  Tensor to_tensor() const;                 // one from_buffer (copies)
  static HostTensor from(const Tensor& t);  // realizes t and copies its values
  template <class T>
  static HostTensor of(const std::vector<T>& values, Shape shape, DType dtype);  // T matches dtype's size
};

using Example = std::vector<Tensor>;  // e.g. {input, target}
using HostExample = std::vector<HostTensor>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Example i on the host. Called from the DataLoader's prefetch thread: it must not use kiln ops
  // and must be safe to call concurrently with the caller's thread.
  virtual HostExample get_host(int64_t i) const = 0;
  Example get(int64_t i) const;  // get_host(i) as tensors
};

// Rows of tensors that share dim 0: example i is {t[i] for each tensor}. The tensors are realized
// and copied to the host when the dataset is made.
class TensorDataset : public Dataset {
 public:
  explicit TensorDataset(const std::vector<Tensor>& tensors);
  explicit TensorDataset(std::vector<HostTensor> tensors);
  int64_t size() const override { return n_; }
  HostExample get_host(int64_t i) const override;

 private:
  std::vector<HostTensor> data_;
  int64_t n_ = 0;
};

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;       // with shuffle: the order of epoch e depends only on (seed, e)
  bool drop_last = false;  // drop a last batch smaller than batch_size
  int64_t prefetch = 2;    // batches a background thread prepares ahead (0: none, no thread)
};

// Batches of a dataset: each batch stacks the examples' fields along a new dim 0. Iterating
// (begin()) starts the next epoch:
//   for (const Example& batch : loader) { Tensor x = batch[0], y = batch[1]; ... }
// With prefetch > 0 a background thread reads and stacks the next batches on the host; the calling
// thread only makes one from_buffer per field. The dataset must outlive the loader.
class DataLoader {
 public:
  DataLoader(const Dataset& dataset, DataLoaderOptions o = {});
  ~DataLoader();  // stops and joins the prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t num_batches() const;
  int64_t epoch() const { return epoch_; }          // the next begin() starts this epoch
  void set_epoch(int64_t e) { epoch_ = e; }         // e.g. when resuming training
  std::vector<int64_t> order(int64_t epoch) const;  // sample order of an epoch
  const DataLoaderOptions& options() const { return o_; }

  class Iterator {
   public:
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    const Example& operator*() const { return batch_; }
    const Example* operator->() const { return &batch_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return index_ == o.index_; }
    bool operator!=(const Iterator& o) const { return index_ != o.index_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* loader, int64_t index);
    DataLoader* loader_;
    int64_t index_;
    Example batch_;
  };
  Iterator begin();  // starts a new epoch (stopping the previous one)
  Iterator end();

 private:
  struct Slot {
    HostExample batch;
    std::exception_ptr error;
  };
  HostExample build(int64_t b) const;  // batch b of the current order (host only)
  HostExample next_host(int64_t b);    // from the prefetch queue or built here
  void stop();
  void work();

  const Dataset& ds_;
  DataLoaderOptions o_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Slot> queue_;
  int64_t produced_ = 0;  // batches the worker has built this epoch
  bool stop_ = false;
};

// --- llm.c token shards (src/data/llmc.cpp) ---
// Header: 256 little-endian int32 ([0] magic 20240520, [1] version 1, [2] token count), then
// count uint16 tokens. Errors name the file and what is wrong (magic, version, size). With
// vocab_size > 0, a token >= vocab_size is an error naming its position and value.
std::vector<uint16_t> read_llmc_tokens(const std::string& path, int64_t vocab_size = 0);
Tensor load_llmc_tokens(const std::string& path, DType dtype = DType::I64,
                        int64_t vocab_size = 0);  // I64 or I32
void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens);

// Language-modelling windows: example i is (x, y) = (tokens[o, o+block_size), tokens[o+1,
// o+block_size+1)), each of shape (block_size,). Sequential: o = i * block_size, size() =
// (n - 1) / block_size. Random: o is drawn from [0, n - block_size - 1] by a hash of (seed, i), so
// the same index gives the same window; size() = num_samples (default: the sequential count).
struct TokenDatasetOptions {
  int64_t block_size = 0;
  bool random = false;
  uint64_t seed = 0;
  int64_t num_samples = 0;
  DType dtype = DType::I64;  // of x and y: I64 or I32
};
class TokenDataset : public Dataset {
 public:
  TokenDataset(std::vector<int64_t> tokens, TokenDatasetOptions o);
  TokenDataset(const std::vector<uint16_t>& tokens, TokenDatasetOptions o);
  int64_t size() const override;
  HostExample get_host(int64_t i) const override;
  int64_t offset(int64_t i) const;  // the window start of example i

 private:
  std::vector<int64_t> tokens_;
  TokenDatasetOptions o_;
};

// --- MNIST idx files (src/data/mnist.cpp) ---
// Images: magic 2051, count, rows, cols (big-endian int32), then uint8 pixels -> u8 (N, rows, cols).
// Labels: magic 2049, count, then uint8 labels -> i64 (N,).
HostTensor read_mnist_images(const std::string& path);
HostTensor read_mnist_labels(const std::string& path);
Tensor load_mnist_images(const std::string& path);
Tensor load_mnist_labels(const std::string& path);
// {image (rows, cols) u8, label i64} examples; the counts of the two files must agree.
TensorDataset mnist_dataset(const std::string& images_path, const std::string& labels_path);

// --- tokenizers (src/data/tokenizer.cpp) ---
// Character level: the vocabulary is the sorted unique Unicode code points of a text (UTF-8).
class CharTokenizer {
 public:
  explicit CharTokenizer(std::vector<char32_t> vocab);  // sorted, unique
  static CharTokenizer from_text(const std::string& utf8);
  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  const std::vector<char32_t>& vocab() const { return vocab_; }
  std::vector<int64_t> encode(const std::string& utf8) const;  // error on a character not in vocab
  std::string decode(const std::vector<int64_t>& ids) const;   // error on an id out of range
  // A small text file: "kiln-char-tokenizer 1", the count, then one code point (decimal) a line.
  void save(const std::string& path) const;
  static CharTokenizer load(const std::string& path);

 private:
  std::vector<char32_t> vocab_;
};

// Byte level: 256 tokens, token = byte value; round-trips any string.
class ByteTokenizer {
 public:
  static constexpr int64_t vocab_size() { return 256; }
  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // error on an id outside [0, 256)
};

}  // namespace kiln::data
