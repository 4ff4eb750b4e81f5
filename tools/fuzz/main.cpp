// kiln_fuzz: differential fuzzing of kiln against its float64 reference interpreter. Graphs run in
// processes of their own, so crashes and hangs are findings too; see --help.
#include <fcntl.h>
#include <kiln/kiln.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checker.h"

namespace {

using kiln::fuzz::Corruption;
using kiln::fuzz::Result;
using Clock = std::chrono::steady_clock;
constexpr char kRecordEnd = '\x1e';  // ends each graph's result in a child that runs several

struct Options {
  uint64_t seed = 1;
  int64_t count = 100;
  double grad_fraction = 0.3;
  int jobs = 1;
  std::string device = "cpu";
  bool selftest = false;
  std::optional<uint64_t> print;
  double timeout_s = 60;
  bool verbose = false;
  int64_t per_process = 0;  // graphs a child runs (0: 1 on the CPU, 25 on the GPU)
  double time_limit_s = 0;  // start no graph after this many seconds (0: no limit)
};

// SIGINT/SIGTERM or the time limit: start no more graphs, finish those running, print the tally.
volatile std::sig_atomic_t g_stop = 0;
void request_stop(int) { g_stop = 1; }

const char* kUsage =
    "usage: kiln_fuzz [--seed S] [--count N] [--grad-fraction F] [--jobs J] [--device cpu|cuda]\n"
    "                 [--timeout SECONDS] [--selftest] [--print SEED] [--verbose] [--per-process K]\n"
    "                 [--time-limit SECONDS]\n"
    "Generates N random op graphs (graph i from seed S+i), runs each in its own process and compares\n"
    "kiln's results and gradients with the float64 reference interpreter. Prints each finding with its\n"
    "seed and a standalone C++ repro; exits 1 if there is any. --print SEED writes the repro of one\n"
    "seed (give the same --grad-fraction). --selftest corrupts some graphs' results on purpose and\n"
    "passes only if exactly those are reported. --per-process K runs K graphs in each child (default\n"
    "1; 25 with --device cuda, where a process's start is costly); the graphs of a child that crashes\n"
    "or hangs run again one per process, to find the one that did. --time-limit (or SIGINT/SIGTERM)\n"
    "starts no more graphs after that time, lets the running ones finish and prints the tally.\n";

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--count")
      o.count = std::stoll(value());
    else if (a == "--grad-fraction")
      o.grad_fraction = std::stod(value());
    else if (a == "--jobs")
      o.jobs = std::max(1, std::stoi(value()));
    else if (a == "--device")
      o.device = value();
    else if (a == "--timeout")
      o.timeout_s = std::stod(value());
    else if (a == "--selftest")
      o.selftest = true;
    else if (a == "--print")
      o.print = std::stoull(value());
    else if (a == "--verbose")
      o.verbose = true;
    else if (a == "--time-limit")
      o.time_limit_s = std::stod(value());
    else if (a == "--per-process")
      o.per_process = std::max<int64_t>(1, std::stoll(value()));
    else
      throw std::invalid_argument("unknown argument " + a);
  }
  if (o.device != "cpu" && o.device != "cuda") throw std::invalid_argument("--device is cpu or cuda");
  if (!o.per_process) o.per_process = o.device == "cuda" ? 25 : 1;
  return true;
}

void write_all(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// A child process running `body`, which writes its answer to the given fd; in its own process
// group, so that a hang is killed with the compilers it started.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  uint64_t seed = 0;  // the first of its n graphs
  int64_t n = 1;
  std::string out;
  Clock::time_point start;
  bool timed_out = false;
  int status = 0;
};

template <class F>
Child spawn(uint64_t seed, int64_t n, const Options& o, F body) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    close(p[0]);
    int rc = 0;
    try {
      if (o.device == "cuda") kiln::set_default_device(kiln::Device::cuda());
      write_all(p[1], body());
    } catch (const std::exception& e) {
      write_all(p[1], std::string("error\n") + e.what() + "\n");
      rc = 3;
    }
    _exit(rc);
  }
  setpgid(pid, pid);
  close(p[1]);
  return {pid, p[0], seed, n, "", Clock::now()};
}

bool drain(Child& c) {  // false at end of file
  char buf[65536];
  ssize_t n = read(c.fd, buf, sizeof buf);
  if (n > 0) c.out.append(buf, static_cast<size_t>(n));
  return n > 0 || (n < 0 && errno == EINTR);
}

// Runs children from `make(seed, n)` for seeds first..first+count, `per` seeds each and `jobs` at a
// time, handing each finished one to `done`.
template <class Make, class Done>
void run_all(const Options& o, uint64_t first, int64_t count, int64_t per, Make make, Done done) {
  std::vector<Child> running;
  int64_t next = 0;
  auto t0 = Clock::now();
  auto stopping = [&] {
    return g_stop ||
           (o.time_limit_s > 0 && std::chrono::duration<double>(Clock::now() - t0).count() > o.time_limit_s);
  };
  while ((next < count && !stopping()) || !running.empty()) {
    while (static_cast<int>(running.size()) < o.jobs && next < count && !stopping()) {
      int64_t n = std::min(per, count - next);
      running.push_back(make(first + static_cast<uint64_t>(next), n));
      next += n;
    }
    std::vector<pollfd> fds;
    for (auto& c : running) fds.push_back({c.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (size_t k = 0; k < running.size();) {
      Child& c = running[k];
      bool open = !(fds[k].revents & (POLLIN | POLLHUP)) || drain(c);
      if (!open) {
        close(c.fd);
        waitpid(c.pid, &c.status, 0);
        done(c);
        running.erase(running.begin() + static_cast<long>(k));
        fds.erase(fds.begin() + static_cast<long>(k));
        continue;
      }
      double age = std::chrono::duration<double>(Clock::now() - c.start).count();
      if (!c.timed_out && age > o.timeout_s) {
        kill(-c.pid, SIGKILL);
        c.timed_out = true;
      }
      k++;
    }
  }
}

// The repro of a seed, from a fresh process that only generates (for crashes and hangs).
std::string repro_of(uint64_t seed, const Options& o) {
  std::string text;
  Options one = o;
  one.jobs = 1;
  run_all(
      one, seed, 1, 1,
      [&](uint64_t s, int64_t n) {
        return spawn(s, n, o, [&] { return kiln::fuzz::describe(s, o.grad_fraction); });
      },
      [&](Child& c) {
        bool ok = !c.timed_out && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
        text = ok ? c.out : "(no repro: generating the graph failed too)\n" + c.out;
      });
  return text;
}

std::string result_text(const Result& r) {
  const char* status = r.status == Result::Status::Ok         ? "ok"
                       : r.status == Result::Status::Mismatch ? "mismatch"
                                                              : "error";
  return std::string(status) + " " + (r.grad ? (r.bounded ? "grad" : "grad-unbounded") : "forward") + " " +
         std::to_string(r.max_error) + "\n" + r.report;
}

struct Tally {
  int64_t graphs = 0, with_grad = 0, unbounded = 0, mismatches = 0, errors = 0, crashes = 0, hangs = 0;
  int64_t corrupted = 0, caught = 0, clean_flagged = 0;
};

int fuzz(const Options& o) {
  Tally t;
  auto start = Clock::now();
  auto make = [&](uint64_t first, int64_t n) {
    return spawn(first, n, o, [=, &o] {
      if (n == 1) {
        Corruption c = o.selftest ? kiln::fuzz::corruption_of(first) : Corruption::None;
        return result_text(kiln::fuzz::check(first, o.grad_fraction, c));
      }
      std::string all;
      for (uint64_t seed = first; seed < first + static_cast<uint64_t>(n); seed++) {
        Corruption c = o.selftest ? kiln::fuzz::corruption_of(seed) : Corruption::None;
        try {
          all += result_text(kiln::fuzz::check(seed, o.grad_fraction, c));
        } catch (const std::exception& e) {
          all += std::string("error\n") + e.what() + "\n";
        }
        all += kRecordEnd;
      }
      return all;
    });
  };
  std::function<void(Child&)> done;
  auto one = [&](Child& c) {
    t.graphs++;
    std::string kind, head = c.out.substr(0, c.out.find('\n'));
    std::string body = c.out.find('\n') == std::string::npos ? "" : c.out.substr(c.out.find('\n') + 1);
    bool clean_exit = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
    if (c.timed_out)
      kind = "hang", t.hangs++;
    else if (!clean_exit && !WIFEXITED(c.status))
      kind = std::string("crash (") + strsignal(WTERMSIG(c.status)) + ")", t.crashes++;
    else if (!clean_exit || head.rfind("error", 0) == 0)
      kind = "error", t.errors++;
    else if (head.rfind("mismatch", 0) == 0)
      kind = "mismatch", t.mismatches++;
    if (head.find(" grad") != std::string::npos) t.with_grad++;
    if (head.find(" grad-unbounded ") != std::string::npos) t.unbounded++;
    if (o.verbose) std::printf("seed %llu: %s\n", static_cast<unsigned long long>(c.seed), head.c_str());
    bool corrupted = o.selftest && kiln::fuzz::corruption_of(c.seed) != Corruption::None;
    if (corrupted) {
      t.corrupted++;
      if (!kind.empty())
        t.caught++;
      else
        std::printf("seed %llu: corrupted on purpose, not caught\n", static_cast<unsigned long long>(c.seed));
      return;
    }
    if (kind.empty()) return;
    t.clean_flagged++;
    if (kind == "hang" || kind.rfind("crash", 0) == 0) body = repro_of(c.seed, o);
    std::printf("=== seed %llu: %s\n%s\n", static_cast<unsigned long long>(c.seed), kind.c_str(),
                body.c_str());
    std::fflush(stdout);
  };
  done = [&](Child& c) {
    if (c.n == 1) return one(c);
    bool clean_exit = !c.timed_out && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
    if (!clean_exit)  // which graph crashed or hung: each again in a process of its own
      return run_all(o, c.seed, c.n, 1, make, done);
    size_t at = 0;
    for (int64_t i = 0; i < c.n; i++) {
      size_t end = c.out.find(kRecordEnd, at);
      Child r = c;
      r.seed = c.seed + static_cast<uint64_t>(i);
      r.n = 1;
      r.out = end == std::string::npos ? "error\nno result from the child\n" : c.out.substr(at, end - at);
      at = end == std::string::npos ? c.out.size() : end + 1;
      one(r);
    }
  };
  run_all(o, o.seed, o.count, o.per_process, make, done);
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "%lld graphs, %lld with gradients, %lld mismatches, %lld errors, %lld crashes, %lld hangs, %.1f s"
      " (%.2f graphs/s)\n",
      static_cast<long long>(t.graphs), static_cast<long long>(t.with_grad),
      static_cast<long long>(t.mismatches), static_cast<long long>(t.errors),
      static_cast<long long>(t.crashes), static_cast<long long>(t.hangs), secs, t.graphs / secs);
  if (!o.selftest) return t.clean_flagged ? 1 : 0;
  bool pass = t.caught == t.corrupted && t.clean_flagged == 0 && t.corrupted > 0;
  std::printf("selftest: %lld of %lld corrupted graphs caught, %lld of %lld clean graphs flagged: %s\n",
              static_cast<long long>(t.caught), static_cast<long long>(t.corrupted),
              static_cast<long long>(t.clean_flagged), static_cast<long long>(t.graphs - t.corrupted),
              pass ? "pass" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; i++)
      if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h")
        return std::printf("%s", kUsage), 0;
    parse(argc, argv, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_fuzz: %s\n%s", e.what(), kUsage);
    return 2;
  }
  if (o.print) return std::printf("%s", repro_of(*o.print, o).c_str()), 0;
  if (o.device == "cuda") {  // asked in a child: the parent must not initialize CUDA before forking
    std::string why;
    Options one = o;
    one.device = "cpu";
    run_all(
        one, 0, 1, 1,
        [&](uint64_t s, int64_t n) {
          return spawn(s, n, one, [] {
            std::string w;
            return kiln::cuda_available(&w) ? std::string() : w.empty() ? std::string("unknown") : w;
          });
        },
        [&](Child& c) {
          bool answered = !c.timed_out && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
          why = answered ? c.out : "checking for one failed";
        });
    if (!why.empty()) {
      std::printf("skipped: no usable CUDA GPU: %s\n", why.c_str());
      return 0;
    }
  }
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  return fuzz(o);
}
