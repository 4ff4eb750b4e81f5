// Runs the system C compiler (one call per group of kernels) or C++ compiler (tile kernels) to
// build a loadable shared object.
#include "runtime/cpu/compiler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <sstream>

#include "kiln/debug.h"
#include "kiln/error.h"
#include "runtime/atomic_file.h"
#include "runtime/cache_dir.h"
#include "runtime/cache_entry.h"
#include "runtime/cpu/compiler_check.h"
#include "runtime/file_util.h"

namespace kiln::runtime {

namespace {

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

namespace {
struct Chosen {
  std::string key, cc, id, flags;
  int vector_bytes = 16;
};

// What the compiler predefines under the kernels' flags says which vector registers they use.
int vector_bytes_of(const std::string& cc, const std::string& flags) {
  std::string macros;
  if (run_command(shell_quote(cc) + " " + flags + " -dM -E -x c /dev/null", macros) != 0) return 16;
  if (macros.find("__AVX512F__") != std::string::npos) return 64;
  if (macros.find("__AVX__") != std::string::npos) return 32;
  return 16;
}
// The compiler's identity and checked flags, found once per compiler path (KILN_CC may change).
const Chosen& chosen(Language lang) {
  static std::mutex mu;
  static Chosen cached[2];
  std::lock_guard<std::mutex> l(mu);
  Chosen& c = cached[static_cast<int>(lang)];
  std::string cc = find_compiler(lang);
  const std::string& extra = settings().cflags;  // KILN_CFLAGS (a sanitized build's), last
  if (cc + "\n" + extra != c.key) {
    std::string version;
    run_command(shell_quote(cc) + " --version", version);
    struct stat st {};
    stat(cc.c_str(), &st);
    std::string identity = cc + "\n" + version + "\n" + std::to_string(st.st_size) + " " +
                           std::to_string(static_cast<long long>(st.st_mtime));
    CompilerFamily family = compiler_family(version);
    std::string flags = base_flags(lang, family) + " " +
                        checked_opt_flags(cc, identity, lang, family, cache_dir()) + " -shared -w" +
                        (extra.empty() ? "" : " " + extra);
    c = {cc + "\n" + extra, cc, cc + "\n" + version.substr(0, version.find('\n')) + "\n" + flags, flags,
         lang == Language::C ? vector_bytes_of(cc, flags) : 16};
  }
  return c;
}
}  // namespace

const std::string& compiler_id(Language lang) { return chosen(lang).id; }

int kernel_vector_bytes() { return chosen(Language::C).vector_bytes; }

void compile_shared_object(const std::string& source, const std::string& so_path, const std::string& what,
                           Language lang, const std::string& include_dir) {
  const Chosen& c = chosen(lang);
  const std::string& cc = c.cc;
  // the compiler writes a temporary file of this process (a killed one's are swept, cache_dir.cpp);
  // its bytes become the checked entry so_path
  std::string tmp = temp_name(so_path), c_path = temp_name(so_path, lang == Language::C ? ".c" : ".cpp");
  write_file_atomic(c_path, source, /*clean_stale=*/false);
  std::string out;
  std::atomic_ref<int64_t>(stats().compiler_invocations).fetch_add(1);  // compiles run side by side
  std::string inc = include_dir.empty() ? "" : " -I " + shell_quote(include_dir);
  int rc = run_command(
      shell_quote(cc) + " " + c.flags + inc + " -o " + shell_quote(tmp) + " " + shell_quote(c_path), out);
  std::remove(c_path.c_str());
  std::optional<std::string> so = rc == 0 ? read_file(tmp) : std::nullopt;
  std::remove(tmp.c_str());
  if (rc != 0)
    throw Error(std::string("kiln.compile: the ") + (lang == Language::C ? "C" : "C++") + " compiler (" + cc +
                ") failed on kernel(s) " + what +
                (out.empty() ? " with exit status " + std::to_string(rc) + " and no output" : ":\n" + out));
  if (!so) throw Error("kiln.compile: the compiler (" + cc + ") wrote no readable " + tmp + " for " + what);
  write_entry(so_path, *so);
}

}  // namespace kiln::runtime
