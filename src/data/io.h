// Whole-file reads and (atomic) writes for the data readers, with errors that name the file.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "runtime/atomic_file.h"

namespace kiln::data::io {

inline std::vector<uint8_t> read_file(const std::string& what, const std::string& path) {
  auto fail = [&](const std::string& why) { return Error("kiln: " + what + ": \"" + path + "\": " + why); };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int err = errno;
    bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw fail(dir ? "is a directory, not a file" : std::string("cannot stat: ") + std::strerror(err));
  }
  std::vector<uint8_t> bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      throw fail(std::string("read failed: ") + std::strerror(err));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buf, buf + n);
  }
  ::close(fd);
  return bytes;
}

// Written through runtime::AtomicFile: a failed or interrupted write leaves the old file whole.
inline void write_file(const std::string& what, const std::string& path, const void* data, size_t n) {
  try {
    runtime::AtomicFile f(path);
    f.write(data, n);
    f.commit();
  } catch (const Error& e) {
    throw Error("kiln: " + what + ": " + e.what());
  }
}

}  // namespace kiln::data::io
