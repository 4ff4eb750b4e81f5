// data::DataLoader: batches with a seeded per-epoch shuffle, drop_last and a host prefetch thread.
#include <algorithm>
#include <limits>
#include <random>

#include "kiln/data.h"

namespace kiln::data {

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Uniform in [0, bound) from a fully specified engine (std distributions differ between libraries).
uint64_t below(std::mt19937_64& rng, uint64_t bound) {
  uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return r % bound;
}
}  // namespace

DataLoader::DataLoader(const Dataset& dataset, DataLoaderOptions o) : ds_(dataset), o_(o) {
  if (o.batch_size <= 0)
    throw Error("kiln: data::DataLoader: batch_size must be positive, got " + std::to_string(o.batch_size));
  if (o.prefetch < 0)
    throw Error("kiln: data::DataLoader: prefetch must be >= 0, got " + std::to_string(o.prefetch));
}

DataLoader::~DataLoader() { stop(); }

int64_t DataLoader::num_batches() const {
  int64_t n = ds_.size();
  return o_.drop_last ? n / o_.batch_size : (n + o_.batch_size - 1) / o_.batch_size;
}

std::vector<int64_t> DataLoader::order(int64_t epoch) const {
  std::vector<int64_t> ord(static_cast<size_t>(ds_.size()));
  for (size_t i = 0; i < ord.size(); i++) ord[i] = static_cast<int64_t>(i);
  if (!o_.shuffle) return ord;
  std::mt19937_64 rng(splitmix64(o_.seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  for (size_t i = ord.size(); i > 1; i--) std::swap(ord[i - 1], ord[below(rng, i)]);  // Fisher-Yates
  return ord;
}

HostExample DataLoader::build(int64_t b) const {
  size_t start = static_cast<size_t>(b * o_.batch_size);
  size_t end = std::min(order_.size(), start + static_cast<size_t>(o_.batch_size));
  std::vector<HostExample> exs;
  for (size_t k = start; k < end; k++) exs.push_back(ds_.get_host(order_[k]));
  HostExample batch;
  for (size_t f = 0; f < exs[0].size(); f++) {
    const HostTensor& first = exs[0][f];
    HostTensor out{first.dtype, first.shape, {}};
    out.shape.insert(out.shape.begin(), static_cast<int64_t>(exs.size()));
    out.bytes.reserve(first.bytes.size() * exs.size());
    for (size_t k = 0; k < exs.size(); k++) {
      if (exs[k].size() != exs[0].size())
        throw Error("kiln: data::DataLoader: example " + std::to_string(order_[start + k]) + " has " +
                    std::to_string(exs[k].size()) + " fields, example " + std::to_string(order_[start]) +
                    " has " + std::to_string(exs[0].size()));
      const HostTensor& h = exs[k][f];
      if (h.shape != first.shape || h.dtype != first.dtype)
        throw Error("kiln: data::DataLoader: cannot stack field " + std::to_string(f) + ": example " +
                    std::to_string(order_[start + k]) + " has shape " + shape_str(h.shape) + " " +
                    to_string(h.dtype) + ", example " + std::to_string(order_[start]) + " has " +
                    shape_str(first.shape) + " " + to_string(first.dtype));
      out.bytes.insert(out.bytes.end(), h.bytes.begin(), h.bytes.end());
    }
    batch.push_back(std::move(out));
  }
  return batch;
}

void DataLoader::work() {
  const int64_t n = num_batches();
  for (int64_t b = 0; b < n; b++) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < o_.prefetch; });
      if (stop_) return;
    }
    Slot s;
    try {
      s.batch = build(b);
    } catch (...) {
      s.error = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(std::move(s));
    produced_++;
    cv_.notify_all();
    if (queue_.back().error) return;
  }
}

void DataLoader::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  queue_.clear();
  produced_ = 0;
  stop_ = false;
}

HostExample DataLoader::next_host(int64_t b) {
  if (o_.prefetch == 0) return build(b);
  Slot s;
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !queue_.empty(); });
    s = std::move(queue_.front());
    queue_.pop_front();
  }
  cv_.notify_all();
  if (s.error) std::rethrow_exception(s.error);
  return std::move(s.batch);
}

DataLoader::Iterator DataLoader::begin() {
  stop();
  order_ = order(epoch_++);
  if (o_.prefetch > 0 && num_batches() > 0) worker_ = std::thread([this] { work(); });
  return Iterator(this, 0);
}

DataLoader::Iterator DataLoader::end() { return Iterator(nullptr, num_batches()); }

DataLoader::Iterator::Iterator(DataLoader* loader, int64_t index) : loader_(loader), index_(index) {
  if (loader_ && index_ < loader_->num_batches())
    for (auto& h : loader_->next_host(index_)) batch_.push_back(h.to_tensor());
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  index_++;
  batch_.clear();
  if (index_ < loader_->num_batches())
    for (auto& h : loader_->next_host(index_)) batch_.push_back(h.to_tensor());
  return *this;
}

}  // namespace kiln::data
