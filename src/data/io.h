// Whole-file reads and writes for the data readers, with errors that name the file.
#pragma once
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kiln/error.h"

namespace kiln::data::io {

inline std::vector<uint8_t> read_file(const std::string& what, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("kiln: " + what + ": cannot open \"" + path + "\"");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& what, const std::string& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("kiln: " + what + ": cannot write \"" + path + "\"");
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) throw Error("kiln: " + what + ": write to \"" + path + "\" failed");
}

}  // namespace kiln::data::io
