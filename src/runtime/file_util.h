// Small file and process helpers: atomic writes (temp file + fsync + rename), reading, directory
// creation, running a shell command.
#pragma once
#include <optional>
#include <string>

namespace kiln::runtime {

// `data` written to `path` through AtomicFile (see atomic_file.h for `clean_stale`).
void write_file_atomic(const std::string& path, const std::string& data, bool clean_stale = true);
// The content of the regular file `path`; nullopt if it cannot be read or is not a regular file.
std::optional<std::string> read_file(const std::string& path);
void make_dirs(const std::string& path);  // mkdir -p; throws kiln::Error on failure
// Runs a shell command: its exit status (-1 if it did not exit normally) and combined output.
int run_command(const std::string& cmd, std::string& output);
std::string shell_quote(const std::string& s);  // 'single-quoted' for the shell

}  // namespace kiln::runtime
