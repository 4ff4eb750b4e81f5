// AtomicFile (src/io/atomic_file.h): O_EXCL temporary file in the destination's directory, write
// loop, fsync, rename, fsync of the directory; any failure removes the temporary file.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kiln/error.h"

namespace kiln::io {

namespace {
std::string dir_of(const std::string& path) {
  std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}
}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path p(path);
  if (p.filename().empty()) throw Error("kiln::io: cannot write " + path + ": not a file name");
  for (int attempt = 0; attempt < 100; attempt++) {
    std::string name = "." + p.filename().string() + ".tmp." + std::to_string(getpid()) + "." +
                       std::to_string(counter.fetch_add(1));
    tmp_ = (p.parent_path() / name).string();
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  int err = errno;
  tmp_.clear();
  fail("cannot create a temporary file in " + dir_of(path), err);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  throw Error("kiln::io: cannot write " + path_ + ": " + what + " (" + std::strerror(err) + ")");
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("kiln::io: cannot write " + path_ + ": file is closed");
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    p += k, n -= static_cast<size_t>(k);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error("kiln::io: cannot write " + path_ + ": file is closed");
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  int dfd = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename durable; best effort
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace kiln::io
