// The lookup both program caches do (the CPU's shared objects, CUDA's cubins), with what touches
// the backend's files and loader as hooks. A schedule's kernels come from memory, else through
// their index files on disk, else are compiled together (program_cache.h: make_batch and
// compile_groups); a single program comes from memory, else from its file, else is compiled.
// Callers hold their cache's lock.
#pragma once
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "runtime/program_cache.h"

namespace kiln::runtime {

// A batch file's name as an index file may give it: b_<key><suffix>, in the index's directory.
inline bool valid_batch_file(const std::string& f, const std::string& suffix) {
  return f.size() > 2 + suffix.size() && f.rfind("b_", 0) == 0 && f.find('/') == std::string::npos &&
         f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Fn: a loaded kernel (null: none); Lib: a loaded batch file (null: unusable).
template <class Fn, class Lib>
struct BatchSteps {
  std::string tag;            // what errors start with ("kiln.compile", "kiln.cuda")
  std::string id;             // the compiler and its options: part of every key
  std::string prelude;        // put before a batch's kernels
  std::string index_prefix;   // a kernel's index file is <index_prefix><key>.idx
  std::string batch_suffix;   // a batch file is b_<batch key><batch_suffix>
  std::string memory_prefix;  // before keys in `memory` (the device, where devices share it)
  std::unordered_map<std::string, Fn>* memory;
  std::function<Lib(const std::string& path)> open;                           // a batch file found on disk
  std::function<Fn(const Lib& lib, const std::string& symbol)> find;          // null when lib is
  std::function<std::string(const Batch& b, const std::string& path)> build;  // side by side; what it built
  // After build, one batch at a time: the batch file at path (built: what build returned); throws
  // when it cannot be loaded.
  std::function<Lib(const std::string& path, const std::string& built, const Batch& b)> open_built;
};

template <class Fn, class Lib>
std::vector<Fn> load_batched(const std::vector<KernelSource>& kernels, const BatchSteps<Fn, Lib>& s) {
  const std::string dir = cache_dir();
  std::vector<Fn> fns(kernels.size());
  std::vector<std::string> keys(kernels.size());
  std::vector<size_t> missing;
  for (size_t i = 0; i < kernels.size(); i++) {
    keys[i] = hash_hex(hash_string(kernels[i].source, hash_string(s.id)));
    if (auto it = s.memory->find(s.memory_prefix + keys[i]); it != s.memory->end()) {
      fns[i] = it->second;
      stats().memory_cache_hits++;
      continue;
    }
    if (auto file = read_entry(dir + "/" + s.index_prefix + keys[i] + ".idx");
        file && valid_batch_file(*file, s.batch_suffix)) {
      if ((fns[i] = s.find(s.open(dir + "/" + *file), kernels[i].symbol))) {
        (*s.memory)[s.memory_prefix + keys[i]] = fns[i];
        stats().disk_cache_hits++;
        continue;
      }
    }
    missing.push_back(i);
  }
  if (missing.empty()) return fns;

  // the kernels this schedule still needs, in groups compiled side by side, loaded here
  std::vector<std::vector<size_t>> groups = compile_groups(kernels, missing);
  std::vector<Batch> batches(groups.size());
  std::vector<std::string> built(groups.size());
  run_parallel(groups.size(), [&](size_t g) {
    batches[g] = make_batch(s.prelude, kernels, keys, groups[g], s.id);
    built[g] = s.build(batches[g], dir + "/b_" + batches[g].key + s.batch_suffix);
  });
  for (size_t g = 0; g < groups.size(); g++) {
    std::string file = "b_" + batches[g].key + s.batch_suffix;
    Lib lib = s.open_built(dir + "/" + file, built[g], batches[g]);
    for (size_t i : groups[g]) {
      fns[i] = s.find(lib, kernels[i].symbol);
      if (!fns[i]) throw Error(s.tag + ": kernel " + kernels[i].name + " missing from " + file);
      (*s.memory)[s.memory_prefix + keys[i]] = fns[i];
      write_entry(dir + "/" + s.index_prefix + keys[i] + ".idx", file);
      stats().kernels_compiled++;
    }
  }
  return fns;
}

// One program under `key`: from memory, else from_disk(), else compile() (which throws when it
// cannot); what it finds is kept in memory.
template <class Fn>
Fn load_single(std::unordered_map<std::string, Fn>& memory, const std::string& key,
               const std::function<Fn()>& from_disk, const std::function<Fn()>& compile) {
  if (auto it = memory.find(key); it != memory.end()) {
    stats().memory_cache_hits++;
    return it->second;
  }
  if (Fn f = from_disk()) {
    memory[key] = f;
    stats().disk_cache_hits++;
    return f;
  }
  Fn f = compile();
  memory[key] = f;
  stats().kernels_compiled++;
  return f;
}

}  // namespace kiln::runtime
