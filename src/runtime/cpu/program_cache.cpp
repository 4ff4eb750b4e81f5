// The CPU program cache (see program_cache.h): dlopen'ed shared objects, an index file per kernel on
// disk; every file is a checked entry (cache_entry.h), so a damaged one is compiled again, never loaded.
#include "runtime/cpu/program_cache.h"

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

void clear_cache();

Cache& cache() {
  // kept for the process lifetime: kernels may run at exit
  static Cache* c = (on_clear_memory_cache(clear_cache), new Cache());
  return *c;
}

// kiln::clear_memory_cache: entry points are forgotten; libraries stay loaded, as entry points
// handed out may still be in use.
void clear_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  c.fns.clear();
  c.symbols.clear();
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

// An index file names a batch's shared object in the same directory.
bool valid_so_name(const std::string& so) {
  return so.size() > 5 && so.rfind("b_", 0) == 0 && so.find('/') == std::string::npos &&
         so.compare(so.size() - 3, 3, ".so") == 0;
}

void* find_raw_symbol(const std::shared_ptr<Library>& lib, const std::string& symbol) {
  return lib ? dlsym(lib->handle, symbol.c_str()) : nullptr;
}

}  // namespace

std::vector<KernelFn> load_programs(const std::vector<KernelSource>& kernels) {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  const std::string& id = compiler_id();
  const std::string dir = cache_dir();
  std::vector<KernelFn> fns(kernels.size());
  std::vector<std::string> keys(kernels.size());
  std::vector<size_t> missing;
  std::unordered_map<std::string, bool> unusable;  // shared objects found damaged: checked once
  for (size_t i = 0; i < kernels.size(); i++) {
    keys[i] = hash_hex(hash_string(kernels[i].source, hash_string(id)));
    if (auto it = c.fns.find(keys[i]); it != c.fns.end()) {
      fns[i] = it->second;
      stats().memory_cache_hits++;
      continue;
    }
    if (auto so = read_entry(dir + "/k_" + keys[i] + ".idx"); so && valid_so_name(*so) && !unusable[*so]) {
      auto lib = open_library(dir + "/" + *so);
      unusable[*so] = !lib;
      if ((fns[i] = find_symbol(lib, kernels[i].symbol))) {
        c.fns[keys[i]] = fns[i];
        stats().disk_cache_hits++;
        continue;
      }
    }
    missing.push_back(i);
  }
  if (missing.empty()) return fns;

  // the kernels this schedule still needs, in groups compiled side by side
  std::vector<std::vector<size_t>> groups = compile_groups(kernels, missing);
  std::vector<Batch> batches(groups.size());
  run_parallel(groups.size(), [&](size_t g) {
    batches[g] = make_batch(codegen::c_prelude(), kernels, keys, groups[g], id);
    compile_shared_object(batches[g].source, dir + "/b_" + batches[g].key + ".so", batches[g].what);
  });
  for (size_t g = 0; g < groups.size(); g++) {
    std::string so = "b_" + batches[g].key + ".so";
    auto lib = open_library(dir + "/" + so);
    if (!lib) throw Error("kiln.compile: cannot load " + dir + "/" + so + ": " + dlerror());
    for (size_t i : groups[g]) {
      fns[i] = find_symbol(lib, kernels[i].symbol);
      if (!fns[i]) throw Error("kiln.compile: kernel " + kernels[i].name + " missing from " + so);
      c.fns[keys[i]] = fns[i];
      write_entry(dir + "/k_" + keys[i] + ".idx", so);
      stats().kernels_compiled++;
    }
  }
  return fns;
}

void* load_cxx_symbol(const std::string& source, const std::string& symbol, const std::string& name,
                      const std::string& include_dir, uint64_t headers_hash) {
  Cache& c = cache();
  std::lock_guard<std::mutex> l(c.mu);
  const std::string& id = compiler_id(Language::Cxx);
  const std::string dir = cache_dir();
  std::string key = hash_hex(hash_string(source, hash_string(id, headers_hash)));
  if (auto it = c.symbols.find(key); it != c.symbols.end()) {
    stats().memory_cache_hits++;
    return it->second;
  }
  std::string so = "t_" + key + ".so";
  if (void* p = find_raw_symbol(open_library(dir + "/" + so), symbol)) {
    c.symbols[key] = p;
    stats().disk_cache_hits++;
    return p;
  }
  compile_shared_object(source, dir + "/" + so, name, Language::Cxx, include_dir);
  auto lib = open_library(dir + "/" + so);
  if (!lib) throw Error("kiln.compile: cannot load " + dir + "/" + so + ": " + dlerror());
  void* p = find_raw_symbol(lib, symbol);
  if (!p) throw Error("kiln.compile: " + symbol + " missing from " + so + " (program " + name + ")");
  c.symbols[key] = p;
  stats().kernels_compiled++;
  return p;
}

}  // namespace kiln::runtime
