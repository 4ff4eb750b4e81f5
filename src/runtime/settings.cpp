// Settings from the environment (KILN_DEBUG, KILN_NOOPT, ...) and runtime counters.
#include <cstdlib>
#include <string>

#include "kiln/debug.h"
#include "runtime/cache_dir.h"

namespace kiln {

namespace {
int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}
std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A sanitized build's kernels need its sanitizer flags and a compiler whose runtime it loaded.
#ifdef KILN_KERNEL_CFLAGS
const char* kKernelCflags = KILN_KERNEL_CFLAGS;
const char* kKernelCc = KILN_KERNEL_CC;
const char* kKernelCxx = KILN_KERNEL_CXX;
#else
const char* kKernelCflags = "";
const char* kKernelCc = "";
const char* kKernelCxx = "";
#endif
std::string join_flags(std::string a, const std::string& b) {
  return a.empty() || b.empty() ? a + b : a + " " + b;
}
}  // namespace

Settings& settings() {
  static Settings s = [] {
    Settings r;
    r.debug = env_int("KILN_DEBUG", 0);
    r.noopt = env_int("KILN_NOOPT", 0) != 0;
    r.validate = env_int("KILN_VALIDATE", 0) != 0;
    r.fast_math = env_int("KILN_FAST_MATH", 0) != 0;
    r.threads = env_int("KILN_THREADS", 0);
    r.cc = env_str("KILN_CC");
    r.cxx = env_str("KILN_CXX");
    if (r.cc.empty()) r.cc = kKernelCc;
    if (r.cxx.empty()) r.cxx = kKernelCxx;
    r.cflags = join_flags(kKernelCflags, env_str("KILN_CFLAGS"));
    r.profile = env_int("KILN_PROFILE", 0) != 0;
    r.tf32 = env_int("KILN_TF32", 0) != 0;
    r.cuda_graph = env_int("KILN_CUDA_GRAPH", 1) != 0;
    r.cuda_lineinfo = env_int("KILN_CUDA_LINEINFO", 0) != 0;
    if (std::string ln = env_str("KILN_LAYERNORM"); !ln.empty()) r.layernorm = ln;
    r.viz = env_str("KILN_VIZ");
    r.viz_out = env_str("KILN_VIZ_OUT");
    r.cache_dir = runtime::default_cache_dir();  // KILN_CACHE_DIR, else a per-user directory
    return r;
  }();
  return s;
}

Stats& stats() {
  static Stats s;
  return s;
}

}  // namespace kiln
