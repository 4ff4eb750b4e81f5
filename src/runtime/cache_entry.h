// Program-cache entries on disk (CPU shared objects, CUDA cubins, their index files, compiler
// records): the payload followed by a 24-byte footer (magic, payload size, FNV-1a 64 of the
// payload), written atomically, checked before anything is loaded from it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::runtime {

uint64_t fnv1a64(std::string_view bytes);

// `payload` + footer: what an entry file holds.
std::string seal_entry(std::string_view payload);
// The payload of an entry file's bytes, or nullopt (with `why`) if the footer does not match them.
std::optional<std::string_view> unseal_entry(std::string_view file, std::string* why = nullptr);

// Writes `payload` as the entry `path`: temporary file, fsync, rename, fsync of the directory.
void write_entry(const std::string& path, std::string_view payload);
// The payload of entry `path`; nullopt if there is none or it is damaged (truncated, altered, not
// an entry); a damaged one is reported at KILN_DEBUG=1, as the caller will build it again.
std::optional<std::string> read_entry(const std::string& path);

}  // namespace kiln::runtime
