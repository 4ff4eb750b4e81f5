// A device as one object the rest of kiln talks to: its limits, its memory, turning lowered programs
// into launches, running them, timing, and the special kernels and libraries it has. Each backend
// lives in its own folder (runtime/cpu, runtime/cuda) and registers itself with one line there;
// backend(Device) finds it.
#pragma once
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/device_limits.h"
#include "codegen/passes.h"
#include "ir/node.h"
#include "kiln/device.h"
#include "runtime/launcher.h"
#include "runtime/program_cache.h"

namespace kiln::runtime {

using codegen::DeviceLimits;

// The time the device spends on the work queued between start() and stop_ms() (which waits for it).
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // the device's own: "cpu", "cuda:0"
  virtual const DeviceLimits& limits() const = 0;

  // Memory. allocate throws a kiln::Error naming the bytes when the device has no room; upload and
  // download copy from and to host memory and return when done; copy stays on the device.
  virtual void* allocate(size_t bytes) = 0;
  virtual void free(void* p, size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // Programs: what the lowering renders for this device, and the rendered programs compiled (through
  // the backend's program cache) and loaded as launches, one per program.
  virtual codegen::Target target() const = 0;
  virtual std::vector<Launch> load(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered) = 0;
  // Forgets the programs held in memory (kiln::clear_memory_cache).
  virtual void clear_program_cache() {}

  // Running: the launcher of this device, waiting for its queued work, and a timer of that work.
  virtual Launcher& launcher() = 0;
  virtual void synchronize() = 0;
  virtual std::unique_ptr<Timer> timer() = 0;

  // What its allocator counts of the device's memory (kiln::memory_stats); nullopt where it counts
  // none (the CPU).
  virtual std::optional<MemoryStats> memory_stats() const { return std::nullopt; }
  virtual void reset_peak_memory() {}

  // The GEMM library its launcher runs instead of a matched matmul kernel (Launch::gemm), "" if none.
  virtual std::string gemm_library() const { return ""; }
  // Whether the backend runs node n with a kernel of its own instead of its decomposition (an
  // ATTENTION node: the flash-attention kernel).
  virtual bool supports(const ir::Node&) const { return false; }
};

// The backend of device d, created on its first use. Throws a kiln::Error naming d when no backend
// is registered for its kind, or the one that is cannot use it (no GPU, no such index).
Backend& backend(Device d);
// Every backend created so far.
std::vector<Backend*> backends_in_use();

// What a backend's program cache compiles of lowered programs: their names, symbols and sources.
std::vector<KernelSource> kernel_sources(const std::vector<std::shared_ptr<const codegen::Lowered>>& lowered);

// A backend's registration: `make` creates the backend of device index i of `kind` (or throws).
using MakeBackend = std::unique_ptr<Backend> (*)(int index);
bool register_backend(Device::Kind kind, MakeBackend make);

}  // namespace kiln::runtime

// Registers a backend as the program starts, in the backend's own folder. kiln is a static library
// whose generic code never names a backend, so the build asks the linker to keep the symbol this
// defines, kiln_backend_<name> (KILN_REGISTRATIONS in CMakeLists.txt).
#define KILN_REGISTER_BACKEND(name, kind, make) \
  extern "C" const bool kiln_backend_##name = ::kiln::runtime::register_backend(kind, make)
