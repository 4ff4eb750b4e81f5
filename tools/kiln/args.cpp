// Option parsing and checks for the `kiln` tool (see args.h).
#include "args.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/error.h"

namespace kiln::cli {

namespace fs = std::filesystem;

Args::Args(int argc, char** argv, std::string cmd, const std::vector<std::string>& known)
    : cmd_(std::move(cmd)) {
  for (int i = 2; i < argc; i++) {
    std::string s = argv[i];
    if (std::find(known.begin(), known.end(), s) == known.end())
      throw Error(error("unknown option '" + s + "' (see kiln --help)"));
    if (values_.count(s)) throw Error(error(s + " is given twice"));
    if (i + 1 >= argc) throw Error(error(s + " needs a value"));
    values_[s] = argv[++i];
  }
}

std::string Args::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Args::integer(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& v = it->second;
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi)
    throw Error(error(name + " " + v + ": expected a whole number from " + std::to_string(lo) + " to " +
                      std::to_string(hi)));
  return n;
}

double Args::positive(const std::string& name, double fallback, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const std::string& v = it->second;
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x) || x <= 0 || x > hi) {
    std::ostringstream h;
    h << hi;
    throw Error(error(name + " " + v + ": expected a number above 0 and at most " + h.str()));
  }
  return x;
}

std::string Args::read_file(const std::string& name) const {
  const std::string path = text(name, "");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(error(name + " " + path + " is a directory, not a file"));
  if (!fs::exists(path, ec)) throw Error(error(name + " " + path + ": no such file"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(error(name + " " + path + ": cannot be read"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string Args::output_dir(const std::string& name, const std::string& fallback) const {
  const std::string dir = text(name, fallback);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(error(name + " " + dir + " is a file, not a directory"));
  fs::create_directories(dir, ec);
  if (ec) throw Error(error(name + " " + dir + ": cannot create the directory (" + ec.message() + ")"));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(error(name + " " + dir + ": the directory is not writable"));
  return dir;
}

}  // namespace kiln::cli
