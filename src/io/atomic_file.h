// A file written under a temporary name next to its destination and renamed over it on commit(),
// so the destination holds either its old content or the complete new one, never a partial file.
#pragma once
#include <cstddef>
#include <string>

namespace kiln::io {

class AtomicFile {
 public:
  // Creates the temporary file; throws kiln::Error (naming `path`) if it cannot.
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();  // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void commit();  // flush to disk, rename over the destination, sync the directory

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace kiln::io
