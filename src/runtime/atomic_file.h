// A file written under a temporary name next to its destination and renamed over it on commit(),
// so the destination holds either its old content or the complete new one, never a partial file.
// Used for saved tensors (src/io) and the program cache alike.
#pragma once
#include <cstddef>
#include <string>

namespace kiln::runtime {

class AtomicFile {
 public:
  // Creates the temporary file; throws kiln::Error (naming `path`) if it cannot. A symlink at `path`
  // is followed: its final target is replaced (in the target's directory), the link stays. An
  // existing target keeps its permission bits (and owner, where we may set it); one that is not a
  // regular file (a directory, a device) is an error. Stale temporary files of the same target (see
  // remove_stale_temps) are removed first when `clean_stale`.
  explicit AtomicFile(const std::string& path, bool clean_stale = true);
  ~AtomicFile();  // not committed: the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void commit();  // flush to disk, rename over the destination, sync the directory
  const std::string& target() const { return target_; }  // the file replaced (links resolved)

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, target_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// A fresh temporary name for `path` in its directory: ".<name>.tmp.<pid>.<n>" + `suffix`.
std::string temp_name(const std::string& path, const std::string& suffix = "");

// Removes, in directory `dir`, temporary files ".<name>.tmp.<pid>.<n>[suffix]" left by writers that
// died (kill -9, power loss) for the target `name` (every target when `name` is empty). A file is
// stale when process <pid> no longer exists on this host, or when it was last modified more than a
// day ago (its pid may have been reused). Live writers' files are kept: a writer keeps its process
// alive until it renames or removes its file. Returns how many it removed.
int remove_stale_temps(const std::string& dir, const std::string& name = "");

}  // namespace kiln::runtime
