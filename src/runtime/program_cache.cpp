// Program cache (see program_cache.h): dlopen'ed shared objects, an index file per kernel on disk;
// every file is a checked entry (cache_entry.h), so a damaged one is compiled again, never loaded.
#include "runtime/program_cache.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "codegen/render_c.h"
#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/backend.h"
#include "runtime/batch_loader.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "runtime/cpu/compiler.h"
#include "runtime/file_util.h"

namespace kiln::runtime {

namespace {
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
};

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, KernelFn> fns;                   // key -> entry point
  std::unordered_map<std::string, void*> symbols;                  // key -> symbol (C++ programs)
  std::unordered_map<std::string, std::shared_ptr<Library>> libs;  // so path -> handle
};

Cache& cache() {
  static Cache* c = new Cache();  // kept for the process lifetime: kernels may run at exit
  return *c;
}

// The shared object at `path`, loaded once per process; nullptr if it is missing or fails its
// entry check (a truncated or altered file would crash the dynamic loader).
std::shared_ptr<Library> open_library(const std::string& path) {
  auto& libs = cache().libs;
  auto it = libs.find(path);
  if (it != libs.end()) return it->second;
  if (!read_entry(path)) return nullptr;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  auto lib = std::make_shared<Library>();
  lib->handle = h;
  libs[path] = lib;
  return lib;
}

KernelFn find_symbol(const std::shared_ptr<Library>& lib, const std::string& symbol) {
  return lib ? reinterpret_cast<KernelFn>(dlsym(lib->handle, (symbol + "_call").c_str())) : nullptr;
}

void* find_raw_symbol(const std::shared_ptr<Library>& lib, const std::string& symbol) {
  return lib ? dlsym(lib->handle, symbol.c_str()) : nullptr;
}

}  // namespace

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

std::vector<KernelFn> load_programs(const std::vector<KernelSource>& kernels) {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  std::unordered_map<std::string, bool> unusable;  // shared objects found damaged: checked once
  BatchSteps<KernelFn, std::shared_ptr<Library>> s;
  s.tag = "kiln.compile";
  s.id = compiler_id();
  s.prelude = codegen::c_prelude();
  s.index_prefix = "k_";
  s.batch_suffix = ".so";
  s.memory = &c.fns;
  s.open = [&](const std::string& path) -> std::shared_ptr<Library> {
    if (unusable[path]) return nullptr;
    auto lib = open_library(path);
    unusable[path] = !lib;
    return lib;
  };
  s.find = find_symbol;
  s.build = [](const Batch& b, const std::string& path) {
    compile_shared_object(b.source, path, b.what);
    return std::string();
  };
  s.open_built = [](const std::string& path, const std::string&, const Batch&) {
    auto lib = open_library(path);
    if (!lib) throw Error("kiln.compile: cannot load " + path + ": " + dlerror());
    return lib;
  };
  return load_batched(kernels, s);
}

void* load_cxx_symbol(const std::string& source, const std::string& symbol, const std::string& name,
                      const std::string& include_dir, uint64_t headers_hash) {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  const std::string& id = compiler_id(Language::Cxx);
  const std::string dir = cache_dir();
  const std::string key = hash_hex(hash_string(source, hash_string(id, headers_hash)));
  const std::string so = "t_" + key + ".so";
  return load_single<void*>(
      c.symbols, key, [&] { return find_raw_symbol(open_library(dir + "/" + so), symbol); },
      [&] {
        compile_shared_object(source, dir + "/" + so, name, Language::Cxx, include_dir);
        auto lib = open_library(dir + "/" + so);
        if (!lib) throw Error("kiln.compile: cannot load " + dir + "/" + so + ": " + dlerror());
        void* p = find_raw_symbol(lib, symbol);
        if (!p) throw Error("kiln.compile: " + symbol + " missing from " + so + " (program " + name + ")");
        return p;
      });
}

}  // namespace kiln::runtime

namespace kiln {
void clear_memory_cache() {
  auto& c = runtime::cache();
  std::lock_guard<std::mutex> l(c.mu);
  c.fns.clear();
  c.symbols.clear();  // libraries stay loaded: entry points handed out may still be in use
  for (runtime::Backend* b : runtime::backends_in_use()) b->clear_program_cache();
}
}  // namespace kiln
