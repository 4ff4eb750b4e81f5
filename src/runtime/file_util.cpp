// Atomic file writes and directory creation for the on-disk caches.
#include "runtime/file_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "kiln/error.h"

namespace kiln::runtime {

void write_file_atomic(const std::string& path, const std::string& data) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  std::string tmp = path + ".tmp" + std::to_string(getpid()) + "_" + std::to_string(rng() % 1000000);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw Error("kiln: cannot write " + tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("kiln: cannot rename " + tmp + " to " + path);
  }
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
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
