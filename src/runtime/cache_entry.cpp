// Program-cache entries (see cache_entry.h). The footer goes last so that a shared object stays
// loadable as it is: the dynamic loader reads only what the ELF headers point at.
#include "runtime/cache_entry.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include "kiln/debug.h"
#include "runtime/file_util.h"

namespace kiln::runtime {

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'N', 'T', '1'};
constexpr size_t kFooter = 24;

void put_u64(std::string& out, uint64_t v) {
  for (int k = 0; k < 8; k++) out += static_cast<char>(v >> (8 * k));
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int k = 0; k < 8; k++) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[k])) << (8 * k);
  return v;
}
}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string seal_entry(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + kFooter);
  out.append(payload);
  out.append(kMagic, sizeof kMagic);
  put_u64(out, payload.size());
  put_u64(out, fnv1a64(payload));
  return out;
}

std::optional<std::string_view> unseal_entry(std::string_view file, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<std::string_view> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (file.size() < kFooter) return no(std::to_string(file.size()) + " bytes, too short for an entry");
  const char* f = file.data() + file.size() - kFooter;
  if (std::memcmp(f, kMagic, sizeof kMagic) != 0) return no("no entry footer (truncated or not an entry)");
  uint64_t size = get_u64(f + 8);
  if (size != file.size() - kFooter)
    return no("size " + std::to_string(file.size() - kFooter) + " bytes, the footer says " +
              std::to_string(size));
  if (fnv1a64(file.substr(0, size)) != get_u64(f + 16)) return no("checksum mismatch");
  return file.substr(0, size);
}

void write_entry(const std::string& path, std::string_view payload) {
  // stale temporaries are cleared once per directory (cache_dir.cpp), not on each of many writes
  write_file_atomic(path, seal_entry(payload), /*clean_stale=*/false);
}

std::optional<std::string> read_entry(const std::string& path) {
  std::optional<std::string> bytes = read_file(path);
  if (!bytes) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && settings().debug >= 1)
      std::fprintf(stderr, "kiln: cache entry %s is unreadable (not a regular file); rebuilding it\n",
                   path.c_str());
    return std::nullopt;
  }
  std::string why;
  std::optional<std::string_view> payload = unseal_entry(*bytes, &why);
  if (!payload) {
    if (settings().debug >= 1)
      std::fprintf(stderr, "kiln: cache entry %s is damaged (%s); rebuilding it\n", path.c_str(),
                   why.c_str());
    return std::nullopt;
  }
  bytes->resize(payload->size());
  return bytes;
}

}  // namespace kiln::runtime
