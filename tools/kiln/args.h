// The `kiln` tool's command-line options: `--name value` pairs, numbers checked against their range,
// input files and output directories checked before any work starts. Every problem is a kiln::Error
// naming the command, the option and the value.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

class Args {
 public:
  // argv[2...] of `kiln <cmd>`: --name value pairs; every name must be in `known`, none twice.
  Args(int argc, char** argv, std::string cmd, const std::vector<std::string>& known);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string text(const std::string& name, const std::string& fallback) const;
  // A whole number in [lo, hi] ("1e3" and "2.5" are refused: the message gives the range).
  int64_t integer(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  // A finite number in (lo, hi] (lo excluded: durations and temperatures are positive).
  double positive(const std::string& name, double fallback, double hi) const;
  // The contents of the file `--name` names: an error if it is missing, a directory or unreadable.
  std::string read_file(const std::string& name) const;
  // `--name`'s directory (created if missing) after checking a file can be written in it.
  std::string output_dir(const std::string& name, const std::string& fallback) const;
  // An error message that starts with "kiln <cmd>: ".
  std::string error(const std::string& what) const { return "kiln " + cmd_ + ": " + what; }

 private:
  std::string cmd_;
  std::map<std::string, std::string> values_;  // by name with its dashes
};

}  // namespace kiln::cli
