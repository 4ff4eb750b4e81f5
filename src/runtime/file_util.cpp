// Whole-file writes (atomic, through AtomicFile) and reads, directory creation, shell commands.
#include "runtime/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "kiln/error.h"
#include "runtime/atomic_file.h"

namespace kiln::runtime {

void write_file_atomic(const std::string& path, const std::string& data, bool clean_stale) {
  AtomicFile f(path, clean_stale);
  f.write(data.data(), data.size());
  f.commit();
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);  // a directory or a device is no file's content
  if (ok) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (ok) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!ok) return std::nullopt;
  return out;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw Error("kiln: cannot create directory " + path + ": " + ec.message());
}

int run_command(const std::string& cmd, std::string& output) {
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) output.append(buf, n);
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace kiln::runtime
