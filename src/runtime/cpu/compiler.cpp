// Runs the system C compiler (one call per batch of kernels) to build a loadable shared object.
#include "runtime/cpu/compiler.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

}  // namespace

std::string find_c_compiler() {
  const std::string& want = settings().cc;
  if (!want.empty()) {
    std::string p = search_path(want);
    if (p.empty())
      throw Error("kiln.compile: KILN_CC=" + want +
                  " is not an executable C compiler; install gcc or clang "
                  "(Debian: apt-get install gcc) or point KILN_CC at one");
    return p;
  }
  for (const char* c : {"cc", "gcc", "clang"}) {
    std::string p = search_path(c);
    if (!p.empty()) return p;
  }
  throw Error(
      "kiln.compile: no C compiler found on PATH (looked for cc, gcc, clang); install one "
      "(Debian: apt-get install gcc) or set KILN_CC");
}

const std::string& compiler_id() {
  static std::mutex mu;
  static std::string cached_cc, id;
  std::lock_guard<std::mutex> l(mu);
  std::string cc = find_c_compiler();
  if (cc != cached_cc) {
    std::string out;
    run_command(quote(cc) + " --version", out);
    id = cc + "\n" + out.substr(0, out.find('\n')) + "\n" + kFlags;
    cached_cc = cc;
  }
  return id;
}

void compile_shared_object(const std::string& source, const std::string& so_path, const std::string& what) {
  std::string cc = find_c_compiler();
  std::string tmp = so_path + ".tmp" + std::to_string(getpid());
  std::string c_path = tmp + ".c";
  write_file_atomic(c_path, source);
  std::string out;
  stats().compiler_invocations++;
  int rc = run_command(quote(cc) + " " + kFlags + " -o " + quote(tmp) + " " + quote(c_path), out);
  std::remove(c_path.c_str());
  if (rc != 0) {
    std::remove(tmp.c_str());
    throw Error("kiln.compile: the C compiler (" + cc + ") failed on kernel(s) " + what + ":\n" + out);
  }
  if (std::rename(tmp.c_str(), so_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("kiln.compile: cannot move the compiled kernels into " + so_path);
  }
}

}  // namespace kiln::runtime
