// Small file helpers: atomic writes (temp file + rename), reading, directory creation.
#pragma once
#include <optional>
#include <string>

namespace kiln::runtime {

void write_file_atomic(const std::string& path, const std::string& data);
std::optional<std::string> read_file(const std::string& path);
void make_dirs(const std::string& path);  // mkdir -p; throws kiln::Error on failure

}  // namespace kiln::runtime
