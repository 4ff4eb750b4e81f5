// AtomicFile (src/runtime/atomic_file.h): O_EXCL temporary file in the target's directory with the
// target's permissions, write loop, fsync, rename, fsync of the directory; any failure removes the
// temporary file. Also the clean-up of temporary files that killed writers left behind.
#include "runtime/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "kiln/error.h"

namespace kiln::runtime {

namespace {

std::string dir_of(const std::string& path) {
  std::string d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

// `path` with every symlink at its last component followed (a dangling link gives the path it
// names, which is then created).
std::string resolve_links(const std::string& path) {
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40; hops++) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    std::filesystem::path to = std::filesystem::read_symlink(p, ec);
    if (ec) return p.string();
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw Error("kiln: cannot write " + path + ": too many levels of symbolic links");
}

// "<pid>.<n>" then anything: the pid, or -1 if `s` does not start that way.
long long parse_pid_counter(const std::string& s) {
  size_t i = 0;
  long long pid = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && pid <= INT_MAX) pid = pid * 10 + (s[i++] - '0');
  if (i == 0 || pid <= 0 || pid > INT_MAX || i >= s.size() || s[i] != '.') return -1;
  size_t j = ++i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
  return i > j ? pid : -1;
}

// The writer's pid if `file` is a temporary name of target `name` (of any target if empty), else -1.
long long temp_writer(const std::string& file, const std::string& name) {
  if (file.size() < 2 || file[0] != '.') return -1;
  if (!name.empty()) {
    std::string prefix = "." + name + ".tmp.";
    return file.compare(0, prefix.size(), prefix) == 0 ? parse_pid_counter(file.substr(prefix.size())) : -1;
  }
  for (size_t at = file.find(".tmp.", 1); at != std::string::npos; at = file.find(".tmp.", at + 1))
    if (long long pid = parse_pid_counter(file.substr(at + 5)); pid > 0) return pid;
  return -1;
}

bool process_alive(long long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

}  // namespace

std::string temp_name(const std::string& path, const std::string& suffix) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path p(path);
  std::string name = "." + p.filename().string() + ".tmp." + std::to_string(getpid()) + "." +
                     std::to_string(counter.fetch_add(1)) + suffix;
  return (p.parent_path() / name).string();
}

int remove_stale_temps(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const time_t day_ago = std::time(nullptr) - 24 * 3600;
  while (dirent* e = ::readdir(d)) {
    std::string file = e->d_name;
    long long pid = temp_writer(file, name);
    if (pid <= 0) continue;
    std::string full = dir + "/" + file;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((!process_alive(pid) || st.st_mtime < day_ago) && ::unlink(full.c_str()) == 0) removed++;
  }
  ::closedir(d);
  return removed;
}

AtomicFile::AtomicFile(const std::string& path, bool clean_stale) : path_(path) {
  if (std::filesystem::path(path).filename().empty())
    throw Error("kiln: cannot write " + path + ": not a file name");
  target_ = resolve_links(path);
  struct stat old;
  bool exists = ::stat(target_.c_str(), &old) == 0;
  if (exists && S_ISDIR(old.st_mode)) throw Error("kiln: cannot write " + path + ": it is a directory");
  if (exists && !S_ISREG(old.st_mode))  // renaming over a device or a pipe would replace the node itself
    throw Error("kiln: cannot write " + path + ": it is not a regular file");
  if (clean_stale) remove_stale_temps(dir_of(target_), std::filesystem::path(target_).filename().string());
  for (int attempt = 0; attempt < 100; attempt++) {
    tmp_ = temp_name(target_);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    if (errno != EEXIST) break;
  }
  if (fd_ < 0) {
    int err = errno;
    tmp_.clear();
    fail("cannot create a temporary file in " + dir_of(target_), err);
  }
  if (exists) {  // the replacement looks like what it replaces
    if (old.st_uid != ::geteuid() || old.st_gid != ::getegid())
      (void)::fchown(fd_, old.st_uid, old.st_gid);  // best effort: only root may give files away
    if (::fchmod(fd_, old.st_mode & 07777) != 0)
      fail("cannot set the permissions of the temporary file", errno);
  }
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
  throw Error("kiln: cannot write " + path_ + ": " + what + " (" + std::strerror(err) + ")");
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error("kiln: cannot write " + path_ + ": file is closed");
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
  if (fd_ < 0) throw Error("kiln: cannot write " + path_ + ": file is closed");
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  int dfd = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename durable; best effort
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace kiln::runtime
