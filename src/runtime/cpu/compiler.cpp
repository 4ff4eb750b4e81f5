// Runs the system C compiler (one call per batch of kernels) or C++ compiler (tile kernels) to
// build a loadable shared object.
#include "runtime/cpu/compiler.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <sstream>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/file_util.h"

namespace kiln::runtime {

namespace {

// -fwrapv: integer ops wrap like the IR says. -fno-tree-partial-pre: GCC 12 miscompiles some
// vectorized masked loops after partial redundancy elimination on AVX-512 (a padded bf16 copy read
// wrong elements; the op suite covers it). Loop if-conversion must stay on, or loops with selects
// stop vectorizing.
// -fopenmp-simd: honours the renderer's "omp simd reduction" pragmas (no OpenMP runtime).
const char* kFlags =
    "-O3 -march=native -fopenmp-simd -fno-tree-partial-pre -fPIC -shared -fwrapv -fno-math-errno -std=gnu11 "
    "-w";
// Tile kernels: C++20 against include/kiln/tile/kernel.h. -O3: 5-15% faster tile layernorm than -O2
// on 2 cores (bench_tile_kernels), with the tile tests no slower to compile.
const char* kCxxFlags = "-O3 -march=native -fPIC -shared -fno-math-errno -std=c++20 -w";

// Settings::cflags (KILN_CFLAGS, a sanitized build's flags) come last; they are part of compiler_id.
std::string flags(Language lang) {
  const std::string& extra = settings().cflags;
  return std::string(lang == Language::C ? kFlags : kCxxFlags) + (extra.empty() ? "" : " " + extra);
}

bool executable(const std::string& p) { return access(p.c_str(), X_OK) == 0; }

std::string search_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
  return "";
}

// Runs a shell command, returning its exit status and combined output.
int run_command(const std::string& cmd, std::string& output) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) output.append(buf, n);
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// The compiler named by `want` (an environment setting) or the first of `names` on PATH.
std::string find_compiler(const std::string& want, const char* var, std::initializer_list<const char*> names,
                          const char* lang, const char* pkg) {
  if (!want.empty()) {
    std::string p = search_path(want);
    if (p.empty())
      throw Error(std::string("kiln.compile: ") + var + "=" + want + " is not an executable " + lang +
                  " compiler; install one (Debian: apt-get install " + pkg + ") or point " + var + " at one");
    return p;
  }
  std::string looked;
  for (const char* c : names) {
    std::string p = search_path(c);
    if (!p.empty()) return p;
    looked += (looked.empty() ? "" : ", ") + std::string(c);
  }
  throw Error(std::string("kiln.compile: no ") + lang + " compiler found on PATH (looked for " + looked +
              "); install one (Debian: apt-get install " + pkg + ") or set " + var);
}

std::string find_compiler(Language lang) {
  return lang == Language::C ? find_c_compiler() : find_cxx_compiler();
}

}  // namespace

std::string find_c_compiler() {
  return find_compiler(settings().cc, "KILN_CC", {"cc", "gcc", "clang"}, "C", "gcc");
}

std::string find_cxx_compiler() {
  return find_compiler(settings().cxx, "KILN_CXX", {"c++", "g++", "clang++"}, "C++", "g++");
}

const std::string& compiler_id(Language lang) {
  static std::mutex mu;
  static std::string cached_cc[2], id[2];
  std::lock_guard<std::mutex> l(mu);
  int k = static_cast<int>(lang);
  std::string cc = find_compiler(lang);
  if (cc + flags(lang) != cached_cc[k]) {
    std::string out;
    run_command(quote(cc) + " --version", out);
    id[k] = cc + "\n" + out.substr(0, out.find('\n')) + "\n" + flags(lang);
    cached_cc[k] = cc + flags(lang);
  }
  return id[k];
}

void compile_shared_object(const std::string& source, const std::string& so_path, const std::string& what,
                           Language lang, const std::string& include_dir) {
  std::string cc = find_compiler(lang);
  std::string tmp = so_path + ".tmp" + std::to_string(getpid());
  std::string c_path = tmp + (lang == Language::C ? ".c" : ".cpp");
  write_file_atomic(c_path, source);
  std::string out;
  stats().compiler_invocations++;
  std::string inc = include_dir.empty() ? "" : " -I " + quote(include_dir);
  int rc = run_command(quote(cc) + " " + flags(lang) + inc + " -o " + quote(tmp) + " " + quote(c_path), out);
  std::remove(c_path.c_str());
  if (rc != 0) {
    std::remove(tmp.c_str());
    throw Error(std::string("kiln.compile: the ") + (lang == Language::C ? "C" : "C++") + " compiler (" + cc +
                ") failed on kernel(s) " + what + ":\n" + out);
  }
  if (std::rename(tmp.c_str(), so_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("kiln.compile: cannot move the compiled kernels into " + so_path);
  }
}

}  // namespace kiln::runtime
