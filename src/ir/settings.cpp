// Settings from the environment (every KILN_* variable, declared once in the table below, parsed
// strictly) and runtime counters.
#include "ir/settings.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <thread>

#include "ir/cache_paths.h"
#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

namespace ir {

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

int max_threads() { return std::min(4 * hardware_threads(), 1024); }

namespace {
using K = SettingSpec::Kind;

bool parse_int(const std::string& v, long long& out) {
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && end == v.data() + v.size();
}
}  // namespace

const std::vector<SettingSpec>& setting_specs() {
  static const std::vector<SettingSpec> specs = {
      {"KILN_DEVICE", K::Device, &Settings::device, "cpu", "default device of new tensors"},
      {"KILN_THREADS", K::Int, &Settings::threads, "all cores", "threads that run CPU kernels", 1,
       max_threads()},
      {"KILN_CC", K::Text, &Settings::cc, "cc, gcc or clang", "C compiler of CPU kernels"},
      {"KILN_CXX", K::Text, &Settings::cxx, "c++, g++ or clang++", "C++ compiler of CPU tile kernels"},
      {"KILN_CFLAGS", K::Text, &Settings::cflags, "none", "flags added to kernel compiles"},
      {"KILN_CACHE_DIR", K::Text, &Settings::cache_dir, "$XDG_CACHE_HOME/kiln or ~/.cache/kiln",
       "the kernel cache on disk"},
      {"KILN_DEBUG", K::Int, &Settings::debug, "0", "log: 1 schedules, 2 times, 3 opts, 4 C, 5 AST, 6 graphs",
       0, 6},
      {"KILN_NOOPT", K::Flag, &Settings::noopt, "0", "1: no kernel optimizations"},
      {"KILN_HFUSE", K::Int, &Settings::hfuse, "1",
       "horizontal fusion of independent kernels: 0 never, 1 in recorded steps, 2 always", 0, 2},
      {"KILN_VALIDATE", K::Flag, &Settings::validate, "0", "1: check kernels against the reference"},
      {"KILN_FAST_MATH", K::Flag, &Settings::fast_math, "0", "1: fold x*0 to 0 on floats"},
      {"KILN_DETERMINISTIC", K::Flag, &Settings::deterministic, "0",
       "1: bit-identical GPU results (no atomic scatter-adds)"},
      {"KILN_PROFILE", K::Flag, &Settings::profile, "0", "1: time kernels on the device"},
      {"KILN_LAYERNORM",
       K::Choice,
       &Settings::layernorm,
       "generated",
       "F::layer_norm's kernels: generated, or the tile runner's (CPU and Hopper GPUs)",
       0,
       0,
       {"generated", "tile"}},
      {"KILN_TF32", K::Flag, &Settings::tf32, "0", "1: f32 matmuls on CUDA may use TF32"},
      {"KILN_CUDA_GRAPH", K::Flag, &Settings::cuda_graph, "1",
       "0: Jit replays launch kernels, no CUDA graph"},
      {"KILN_CUDA_LINEINFO", K::Flag, &Settings::cuda_lineinfo, "0",
       "1: NVRTC adds line tables (Nsight Compute)"},
      {"KILN_NVRTC", K::Text, &Settings::nvrtc, "system's", "NVRTC library to load"},
      {"KILN_CUBLASLT", K::Text, &Settings::cublaslt, "system's", "cuBLASLt library to load"},
      {"KILN_TILE_COMPUTE_WARPS",
       K::Choice,
       &Settings::tile_compute_warps,
       "4",
       "tile compute role's warps on the GPU",
       0,
       0,
       {"1", "2", "4", "8", "16"}},
      {"KILN_TILE_TIMEOUT_MS", K::Int, &Settings::tile_timeout_ms, "2000 on the GPU, 10000 on the CPU",
       "ms a tile launch may go without progress", 1, 3600000},
      {"KILN_TILE_TRACE", K::Int, &Settings::tile_trace, "off", "tile core whose GPU timeline is traced", 0,
       (1 << 20) - 1},
      {"KILN_TILE_TRACE_LAST", K::Int, &Settings::tile_trace_last, "0", "traced core's last events printed",
       0, 1000000},
      {"KILN_VIZ",
       K::Choice,
       &Settings::viz,
       "0",
       "1: write the compiler viewer page after every realize",
       0,
       0,
       {"0", "1"}},
      {"KILN_VIZ_OUT", K::Text, &Settings::viz_out, "kiln_viz.html", "where the compiler viewer page goes"},
      {"KILN_FUZZ_FILES", K::Int, &Settings::fuzz_files, "500", "file-fuzzing test's mutants per format", 1,
       100000000},
  };
  return specs;
}

const SettingSpec* find_setting(const std::string& name) {
  for (const auto& s : setting_specs())
    if (name == s.name) return &s;
  return nullptr;
}

std::string allowed_values(const SettingSpec& spec) {
  switch (spec.kind) {
    case K::Flag: return "0 or 1";
    case K::Int: return "an integer from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
    case K::Device: return "cpu, cuda, gpu, cuda:<n> or ref";
    case K::Text: return "any text";
    case K::Choice: {
      std::string r = "one of ";
      for (size_t i = 0; i < spec.choices.size(); i++) r += (i ? ", " : "") + spec.choices[i];
      return r;
    }
  }
  return "";
}

std::string setting_error(const SettingSpec& spec, const std::string& v) {
  if (v.empty()) return "";
  bool ok = true;
  long long n = 0;
  switch (spec.kind) {
    case K::Flag: ok = v == "0" || v == "1"; break;
    case K::Int: ok = parse_int(v, n) && n >= spec.min && n <= spec.max; break;
    case K::Choice: ok = std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end(); break;
    case K::Device: try { Device::parse(v);
      } catch (const Error&) {
        ok = false;
      }
      break;
    case K::Text: break;
  }
  if (ok) return "";
  return std::string("kiln: ") + spec.name + "=" + v + " is not a valid setting: expected " +
         allowed_values(spec) + " (" + spec.help + "; unset: " + spec.unset + ")";
}

namespace {
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

Settings settings_from(const std::function<const char*(const char*)>& get) {
  Settings r;
  for (const auto& spec : setting_specs()) {
    const char* raw = get(spec.name);
    std::string v = raw ? raw : "";
    if (v.empty()) continue;  // the struct's default
    if (std::string e = setting_error(spec, v); !e.empty()) throw Error(e);
    if (auto* b = std::get_if<bool Settings::*>(&spec.field))
      r.*(*b) = v == "1";
    else if (auto* i = std::get_if<int Settings::*>(&spec.field))
      r.*(*i) = std::atoi(v.c_str());
    else
      r.*std::get<std::string Settings::*>(spec.field) = v;
  }
  if (r.cc.empty()) r.cc = kKernelCc;
  if (r.cxx.empty()) r.cxx = kKernelCxx;
  r.cflags = join_flags(kKernelCflags, r.cflags);
  if (r.cache_dir.empty()) r.cache_dir = default_cache_dir(get);  // $XDG_CACHE_HOME, $HOME, else per user
  return r;
}

}  // namespace ir

Settings& settings() {
  static Settings s = ir::settings_from([](const char* name) { return std::getenv(name); });
  return s;
}

Stats& stats() {
  static Stats s;
  return s;
}

}  // namespace kiln
