// `kiln info`: the version, threads, C compiler, kernel cache, CUDA, the default device, and every
// KILN_* setting with its value. Exit 2 when a setting is invalid (kiln would refuse to run), 1 when
// the default device asked for is unusable.
#include <kiln/kiln.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "ir/settings.h"
#include "runtime/cache_dir.h"
#include "runtime/cpu/compiler.h"
#include "runtime/cuda/driver.h"
#include "runtime/thread_pool.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

extern char** environ;

namespace kiln::cli {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// One line per setting: name, value (its default in brackets when unset), what it does and what it
// takes; then KILN_* variables kiln does not read (typos). Returns the first invalid setting's error.
std::string print_settings() {
  std::string first_error;
  std::printf("settings (environment variables; [default] where unset):\n");
  for (const auto& s : ir::setting_specs()) {
    std::string v = env(s.name), err = ir::setting_error(s, v);
    if (first_error.empty()) first_error = err;
    std::string shown = v.empty() ? "[" + std::string(s.unset) + "]" : v;
    std::string allowed = s.kind == ir::SettingSpec::Kind::Text ? "" : " (" + ir::allowed_values(s) + ")";
    std::printf("  %-23s %-18s %s%s%s\n", s.name, shown.c_str(), s.help, allowed.c_str(),
                err.empty() ? "" : "  <- INVALID");
  }
  for (char** e = environ; *e; e++) {
    std::string kv = *e, name = kv.substr(0, kv.find('='));
    if (name.rfind("KILN_", 0) == 0 && !ir::find_setting(name))
      std::printf("  %-23s %-18s unknown: kiln reads no such variable\n", name.c_str(),
                  kv.substr(name.size() + 1).c_str());
  }
  return first_error;
}

}  // namespace

int info(int argc, char**) {
  if (argc > 2) throw Error("kiln info: takes no options");
  std::printf("kiln %s\n", KILN_VERSION);
  for (const auto& s : ir::setting_specs())
    if (!ir::setting_error(s, env(s.name)).empty()) {  // kiln refuses to run: say why, first
      std::string err = print_settings();
      std::fprintf(stderr, "%s\n", err.c_str());
      return 2;
    }
  std::printf("CPU threads: %d (hardware: %u)\n", runtime::num_threads(),
              std::thread::hardware_concurrency());
  try {
    std::string id = runtime::compiler_id();  // path, version line, flags
    std::string cc = id.substr(0, id.find('\n'));
    std::string rest = id.substr(id.find('\n') + 1);
    std::printf("C compiler: %s (%s)\n", cc.c_str(), rest.substr(0, rest.find('\n')).c_str());
  } catch (const Error& e) {
    std::printf("C compiler: none usable (%s)\n", e.what());
  }
  namespace fs = std::filesystem;
  const std::string dir = runtime::cache_dir();  // the configured one, or the fallback in use
  int64_t files = 0;
  uintmax_t bytes = 0;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
      if (e.is_regular_file(ec)) files++, bytes += e.file_size(ec);
  std::printf("kernel cache: %s (%lld files, %llu bytes)\n", dir.c_str(), static_cast<long long>(files),
              static_cast<unsigned long long>(bytes));
  const auto& cuda = runtime::cuda::availability();
  std::printf("CUDA: %s\n%s",
              cuda.available
                  ? "available (tensors .to(Device::cuda()), or all with KILN_DEVICE=cuda, run there)"
                  : "not available",
              runtime::cuda::describe(cuda).c_str());
  const Device dev = default_device();
  const std::string& asked = settings().device;  // KILN_DEVICE
  std::printf("default device: %s%s\n", dev.str().c_str(),
              asked == "cpu" ? "" : (" (KILN_DEVICE=" + asked + ")").c_str());
  print_settings();
  if (dev.is_cuda() && !cuda.available) {
    std::fprintf(stderr, "kiln info: KILN_DEVICE=%s asks for a GPU, but CUDA is not available: %s\n",
                 asked.c_str(), cuda.reason.c_str());
    return 1;
  }
  if (dev.is_cuda() && dev.index >= static_cast<int>(cuda.devices.size())) {
    std::fprintf(stderr, "kiln info: KILN_DEVICE=%s asks for %s, but this machine has %zu GPU(s)\n",
                 asked.c_str(), dev.str().c_str(), cuda.devices.size());
    return 1;
  }
  return 0;
}

}  // namespace kiln::cli
