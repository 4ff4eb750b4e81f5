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

void* find_raw_symbol(const std::shared_ptr<Library>& lib, const std::string& symbol) {
  return lib ? dlsym(lib->handle, symbol.c_str()) : nullptr;
}

}  // namespace

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
