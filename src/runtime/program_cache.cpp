// Program-cache helpers every backend's cache uses (see program_cache.h), and
// kiln::clear_memory_cache over the caches that registered.
#include "runtime/program_cache.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "kiln/debug.h"
#include "runtime/backend.h"

namespace kiln::runtime {

namespace {
struct Clearers {
  std::mutex mu;
  std::vector<void (*)()> fns;
};
Clearers& clearers() {
  static Clearers* c = new Clearers();  // kept for the process lifetime, like the caches
  return *c;
}
}  // namespace

void on_clear_memory_cache(void (*clear)()) {
  std::lock_guard<std::mutex> l(clearers().mu);
  clearers().fns.push_back(clear);
}

std::string hash_hex(uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

Batch make_batch(const std::string& prelude, const std::vector<KernelSource>& kernels,
                 const std::vector<std::string>& keys, const std::vector<size_t>& missing,
                 const std::string& id) {
  Batch b{prelude, "", ""};
  std::string all_keys;
  std::unordered_map<std::string, bool> emitted;
  for (size_t i : missing) {
    if (emitted[kernels[i].symbol]) continue;
    emitted[kernels[i].symbol] = true;
    b.source += "\n" + kernels[i].source;
    b.what += (b.what.empty() ? "" : ", ") + kernels[i].name;
    all_keys += keys[i];
  }
  b.key = hash_hex(hash_string(all_keys, hash_string(id)));
  return b;
}

std::vector<std::vector<size_t>> compile_groups(const std::vector<KernelSource>& kernels,
                                                const std::vector<size_t>& missing) {
  std::vector<std::vector<size_t>> by_symbol;  // in first-seen order
  std::unordered_map<std::string, size_t> index;
  for (size_t i : missing) {
    auto [it, added] = index.emplace(kernels[i].symbol, by_symbol.size());
    if (added) by_symbol.emplace_back();
    by_symbol[it->second].push_back(i);
  }
  size_t threads = std::max(1u, std::thread::hardware_concurrency());
  size_t n = std::min(threads, (by_symbol.size() + 7) / 8);
  if (n <= 1) return {missing};
  // largest first, each to the group with the least source so far
  std::vector<size_t> order(by_symbol.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  auto size_of = [&](size_t s) { return kernels[by_symbol[s][0]].source.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return size_of(a) > size_of(b); });
  std::vector<std::vector<size_t>> groups(n);
  std::vector<size_t> bytes(n, 0);
  for (size_t s : order) {
    size_t g = static_cast<size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    groups[g].insert(groups[g].end(), by_symbol[s].begin(), by_symbol[s].end());
    bytes[g] += size_of(s);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());  // the schedule's order within a group
  return groups;
}

void run_parallel(size_t n, const std::function<void(size_t)>& f) {
  if (n == 1) return f(0);
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; i++)
    threads.emplace_back([&, i] {
      try {
        f(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

uint64_t hash_string(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

}  // namespace kiln::runtime

namespace kiln {
void clear_memory_cache() {
  std::vector<void (*)()> fns;
  {
    std::lock_guard<std::mutex> l(runtime::clearers().mu);
    fns = runtime::clearers().fns;
  }
  for (auto clear : fns) clear();
  for (runtime::Backend* b : runtime::backends_in_use()) b->clear_program_cache();
}
}  // namespace kiln
