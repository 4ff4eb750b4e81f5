// Helpers for the kiln::io tests: a per-test temporary directory, raw file bytes, a tensor's bytes.
#pragma once
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "ir/node.h"
#include "runtime/buffer.h"

namespace kiln::io_test {

// A fresh directory per test, removed (with its content) afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-io-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> files() const {  // names in the directory, sorted
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::filesystem::path dir_;
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// The realized tensor's row-major bytes as stored in memory.
inline std::string tensor_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  c.realize();
  std::shared_ptr<const Buffer> b = on_host(c.node()->buffer);
  return std::string(static_cast<const char*>(b->data), b->nbytes());
}

using testing::error_of;

}  // namespace kiln::io_test
