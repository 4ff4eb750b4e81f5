// NVRTC compilation and the CUDA program cache (see program_cache.h); its files are checked entries
// (cache_entry.h, shared with the CPU cache), so a damaged cubin is compiled again, never loaded.
#include "runtime/cuda/program_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/batch_loader.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/context.h"
#include "runtime/file_util.h"
#include "runtime/program_cache.h"

namespace kiln::runtime::cuda {

namespace {

struct Cache {
  std::mutex mu;
  std::unordered_map<std::string, CUfunction> fns;    // ordinal:key -> kernel
  std::unordered_map<std::string, CUmodule> modules;  // ordinal:cubin file -> loaded module
};

Cache& cache() {
  static Cache* c = new Cache();  // modules stay loaded for the process lifetime
  return *c;
}

}  // namespace

void clear_function_cache() {
  std::lock_guard<std::mutex> l(cache().mu);
  cache().fns.clear();
}

namespace {

// Settings::cuda_lineinfo adds source line tables; part of the options, so of the cache key too.
std::vector<std::string> options(const Context& c) {
  std::vector<std::string> o = {"--gpu-architecture=" + c.arch, "-std=c++17", "--fmad=false",
                                "-default-device"};
  if (settings().cuda_lineinfo) o.push_back("-lineinfo");
  return o;
}

std::string compiler_id(const Context& c) {
  std::string id = "nvrtc " + std::to_string(availability().nvrtc_major) + "." +
                   std::to_string(availability().nvrtc_minor);
  for (auto& o : options(c)) id += " " + o;
  return id + "\n" + codegen::cuda_prelude();
}

// Compiles one translation unit to a cubin; errors carry the NVRTC log and the source.
std::string compile(const Context& c, const std::string& src, const std::string& what,
                    const std::vector<std::string>& opts) {
  const Api* a = c.api;
  void* prog = nullptr;
  if (int rc = a->nvrtcCreateProgram(&prog, src.c_str(), "kiln.cu", 0, nullptr, nullptr))
    throw Error(std::string("kiln.cuda: nvrtcCreateProgram failed: ") + a->nvrtcGetErrorString(rc));
  std::vector<const char*> argv;
  for (auto& o : opts) argv.push_back(o.c_str());
  int rc = a->nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  a->nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) a->nvrtcGetProgramLog(prog, log.data());
  if (rc != 0) {
    a->nvrtcDestroyProgram(&prog);
    throw Error("kiln.cuda: NVRTC could not compile " + what + ": " + a->nvrtcGetErrorString(rc) + "\n" +
                log + "\nsource:\n" + src);
  }
  size_t n = 0;
  a->nvrtcGetCUBINSize(prog, &n);
  std::string cubin(n, '\0');
  a->nvrtcGetCUBIN(prog, cubin.data());
  a->nvrtcDestroyProgram(&prog);
  std::atomic_ref<int64_t>(stats().compiler_invocations).fetch_add(1);  // compiles run side by side
  return cubin;
}

CUmodule load_module(Context& c, const std::string& path, const std::string* bytes) {
  Cache& k = cache();
  std::string key = std::to_string(c.ordinal) + ":" + path;
  if (auto it = k.modules.find(key); it != k.modules.end()) return it->second;
  std::optional<std::string> data;
  if (!bytes) {
    data = read_entry(path);  // checked: the driver is given no size, a short cubin would be overread
    if (!data) return nullptr;
    bytes = &*data;
  }
  CUmodule m = nullptr;
  if (c.api->cuModuleLoadData(&m, bytes->data()) != 0) return nullptr;
  k.modules[key] = m;
  return m;
}

CUfunction get_function(Context& c, CUmodule m, const std::string& symbol) {
  CUfunction f = nullptr;
  if (!m || c.api->cuModuleGetFunction(&f, m, symbol.c_str()) != 0) return nullptr;
  return f;
}

}  // namespace

std::vector<CUfunction> load_kernels(int ordinal, const std::vector<KernelSource>& kernels) {
  Context& c = context(ordinal);
  Cache& k = cache();
  std::lock_guard<std::mutex> l(k.mu);
  const std::vector<std::string> opts = options(c);
  BatchSteps<CUfunction, CUmodule> s;
  s.tag = "kiln.cuda";
  s.id = compiler_id(c);
  s.prelude = codegen::cuda_prelude();
  s.index_prefix = "cu_";
  s.batch_suffix = ".cubin";
  s.memory_prefix = std::to_string(ordinal) + ":";
  s.memory = &k.fns;
  s.open = [&](const std::string& path) { return load_module(c, path, nullptr); };
  s.find = [&](CUmodule m, const std::string& symbol) { return get_function(c, m, symbol); };
  // NVRTC compiles the groups side by side; the driver loads them one at a time
  s.build = [&](const Batch& b, const std::string&) { return compile(c, b.source, b.what, opts); };
  s.open_built = [&](const std::string& path, const std::string& cubin, const Batch& b) {
    write_entry(path, cubin);
    CUmodule m = load_module(c, path, &cubin);
    if (!m) throw Error("kiln.cuda: the driver could not load the compiled kernels " + b.what);
    return m;
  };
  return load_batched(kernels, s);
}

CUfunction load_program(int ordinal, const std::string& what, const std::string& source,
                        const std::string& symbol, const std::string& std) {
  Context& c = context(ordinal);
  Cache& k = cache();
  std::lock_guard<std::mutex> l(k.mu);
  std::vector<std::string> opts = options(c);
  for (auto& o : opts)
    if (o.rfind("-std=", 0) == 0) o = "-std=" + std;
  std::string id = "nvrtc " + std::to_string(availability().nvrtc_major) + "." +
                   std::to_string(availability().nvrtc_minor) + " program";
  for (auto& o : opts) id += " " + o;
  const std::string key = "p_" + hash_hex(hash_string(source, hash_string(id)));
  const std::string path = cache_dir() + "/" + key + ".cubin";
  return load_single<CUfunction>(
      k.fns, std::to_string(ordinal) + ":" + key,
      [&] { return get_function(c, load_module(c, path, nullptr), symbol); },
      [&] {
        std::string cubin = compile(c, source, what, opts);
        write_entry(path, cubin);
        CUfunction f = get_function(c, load_module(c, path, &cubin), symbol);
        if (!f) throw Error("kiln.cuda: the driver could not load " + what + " (kernel " + symbol + ")");
        return f;
      });
}

void launch(int ordinal, CUfunction f, const codegen::CudaLaunch& l, const std::vector<void*>& bufs,
            CUdeviceptr scratch) {
  Context& c = context(ordinal);
  int64_t per_sm = l.kind == codegen::CudaLaunch::Kind::BlockReduce ? 2048 / l.block * 4 : 2048 / l.block * 2;
  int64_t want = l.kind == codegen::CudaLaunch::Kind::BlockReduce
                     ? l.work
                     : (l.work * l.group / l.step + l.block - 1) / l.block;
  if (l.lanes > 1)  // vector accesses: the allocator and the arena hand out 256-byte aligned blocks
    for (void* b : bufs)
      if (reinterpret_cast<uintptr_t>(b) % 16 != 0)
        throw Error("kiln.cuda: a kernel with 16-byte vector accesses got a buffer at " +
                    std::to_string(reinterpret_cast<uintptr_t>(b)) + ", not 16-byte aligned");
  if (l.smem_bytes > 0)  // as many blocks as the SM's shared memory holds (228 KB, 1 KB per block reserved)
    per_sm = std::max<int64_t>(1, std::min<int64_t>(per_sm, 228 * 1024 / (l.smem_bytes + 2048)));
  if (l.reread_bytes > 0 && c.l2_bytes > 0)  // re-read rows come from L2 while half of it holds them
    per_sm = std::min<int64_t>(
        per_sm, std::max<int64_t>(1, c.l2_bytes / 2 / l.reread_bytes / c.info.multiprocessors));
  int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(want, per_sm * c.info.multiprocessors));
  std::vector<void*> params;
  params.reserve(bufs.size() + 1);
  for (auto& b : bufs) params.push_back(const_cast<void*>(static_cast<const void*>(&b)));
  bool own_scratch = false;
  unsigned grid_y = 1;
  if (l.kind == codegen::CudaLaunch::Kind::ColumnReduce) {  // (output blocks) x (reduce chunks)
    blocks = (l.work + l.columns - 1) / l.columns;
    grid_y = static_cast<unsigned>(l.split);
  } else if (l.kind == codegen::CudaLaunch::Kind::Grid) {
    blocks = l.work;
  } else if (l.split > 1) {  // one block per (output, share)
    blocks = l.work * l.split;
  }
  if (l.split > 1) {  // the counters must start at zero
    own_scratch = !scratch;
    if (own_scratch) scratch = device_alloc(ordinal, static_cast<size_t>(l.scratch_bytes));
    check(c.api->cuMemsetD8Async(scratch + static_cast<CUdeviceptr>(l.counters_offset), 0,
                                 static_cast<size_t>(l.scratch_bytes - l.counters_offset), c.stream),
          "cuMemsetD8Async");
    params.push_back(&scratch);
  }
  if (l.smem_bytes > 48 * 1024) {  // past the default limit: the function must opt in, once
    static std::mutex mu;
    static std::unordered_map<CUfunction, int64_t> opted;
    std::lock_guard<std::mutex> lock(mu);
    if (opted[f] < l.smem_bytes) {
      constexpr int kAttrMaxDynamicShared = 8;
      check(c.api->cuFuncSetAttribute(f, kAttrMaxDynamicShared, static_cast<int>(l.smem_bytes)),
            "cuFuncSetAttribute(max dynamic shared memory)");
      opted[f] = l.smem_bytes;
    }
  }
  check(c.api->cuLaunchKernel(f, static_cast<unsigned>(blocks), grid_y, 1, static_cast<unsigned>(l.block), 1,
                              1, static_cast<unsigned>(l.smem_bytes), c.stream, params.data(), nullptr),
        "cuLaunchKernel");
  // the stream runs the kernel before any later user of the block: it may go back to the cache now
  if (own_scratch) device_free(ordinal, scratch, static_cast<size_t>(l.scratch_bytes));
}

}  // namespace kiln::runtime::cuda
