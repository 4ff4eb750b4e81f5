// Atomic file replacement as users expect it: through symlinks, keeping the replaced file's
// permissions and owner, and cleaning up the temporary files of writers killed mid-save.
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/io_test_util.h"
#include "runtime/atomic_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using io_test::read_bytes;
using io_test::write_bytes;

class AtomicFileTest : public io_test::TempDirTest {
 protected:
  Tensor x = ones({3});
  void save(const std::string& p) { io::save_safetensors(p, {{"x", x}}); }
  bool holds_x(const std::string& p) { return io::load_safetensors(p).tensors.count("x") == 1; }
};

TEST_F(AtomicFileTest, SavingThroughASymlinkReplacesTheTargetAndKeepsTheLink) {
  fs::create_directory(path("real"));
  write_bytes(path("real/model.safetensors"), "old");
  fs::create_symlink("real/model.safetensors", path("link"));  // relative, to another directory
  fs::create_symlink(path("link"), path("link2"));             // a chain of links
  save(path("link2"));
  EXPECT_TRUE(fs::is_symlink(path("link")) && fs::is_symlink(path("link2")));
  EXPECT_TRUE(holds_x(path("real/model.safetensors")));
  EXPECT_EQ(files(), (std::vector<std::string>{"link", "link2", "real"}));
  // a dangling link: its target is created
  fs::create_symlink("real/new.safetensors", path("dangling"));
  save(path("dangling"));
  EXPECT_TRUE(fs::is_symlink(path("dangling")));
  EXPECT_TRUE(holds_x(path("real/new.safetensors")));
  // a link loop is an error naming the path
  fs::create_symlink(path("loop_b"), path("loop_a"));
  fs::create_symlink(path("loop_a"), path("loop_b"));
  EXPECT_NE(testing::error_of([&] { save(path("loop_a")); }).find("too many levels of symbolic links"),
            std::string::npos);
  // a directory is no file to replace, nor is a device (renaming over /dev/null would replace it)
  EXPECT_NE(testing::error_of([&] { save(path("real")); }).find("it is a directory"), std::string::npos);
  fs::create_symlink("/dev/null", path("null"));
  EXPECT_NE(testing::error_of([&] { save(path("null")); }).find("it is not a regular file"),
            std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(AtomicFileTest, ReplacedFileKeepsItsPermissionsAndOwner) {
  std::string p = path("ckpt.safetensors");
  for (fs::perms mode : {fs::perms::owner_read | fs::perms::owner_write,
                         fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read}) {
    write_bytes(p, "old");
    fs::permissions(p, mode);
    io::Checkpoint c;
    c.model["x"] = x;
    io::save_checkpoint(p, c);
    EXPECT_EQ(fs::status(p).permissions(), mode);
    EXPECT_EQ(io::load_checkpoint(p).model.count("x"), 1u);
  }
  if (geteuid() == 0) {  // only root may give a file away, so only then can the owner be kept
    ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
    save(p);
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u);
    EXPECT_EQ(st.st_gid, 65534u);
  }
  // a new file gets the usual mode (0666 less the umask)
  mode_t mask = ::umask(022);
  save(path("new.safetensors"));
  ::umask(mask);
  EXPECT_EQ(fs::status(path("new.safetensors")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(AtomicFileTest, TemporariesOfAKilledSaveAreRemovedByTheNextSave) {
  std::string p = path("model.safetensors");
  x.realize();
  pid_t pid = fork();  // a writer killed in the middle of its save
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    runtime::AtomicFile f(p);
    f.write("partial", 7);
    ::kill(::getpid(), SIGKILL);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(files().size(), 1u);
  EXPECT_EQ(files()[0].rfind(".model.safetensors.tmp." + std::to_string(pid) + ".", 0), 0u) << files()[0];
  // temporaries that must stay: a live writer's (this process), another target's
  std::string live = ".model.safetensors.tmp." + std::to_string(getpid()) + ".99999";
  std::string other = ".other.safetensors.tmp." + std::to_string(pid) + ".0";
  // and one that must go: a live pid's, untouched for two days (the pid was reused)
  std::string old = ".model.safetensors.tmp.1.7";
  for (const std::string& n : {live, other, old}) write_bytes(path(n), "x");
  struct timeval two_days_ago[2] = {{time(nullptr) - 2 * 86400, 0}, {time(nullptr) - 2 * 86400, 0}};
  ASSERT_EQ(::utimes(path(old).c_str(), two_days_ago), 0);
  save(p);
  EXPECT_TRUE(holds_x(p));
  std::vector<std::string> want = {live, other, "model.safetensors"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(files(), want);
}

}  // namespace
}  // namespace kiln
