// The CPU backend's state for one launch: per-core CBs, semaphores and transfers, the role fibers,
// and the lock that guards every piece of it that more than one role can touch.
#pragma once
#include <ucontext.h>

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/tile/abi.h"
#include "tile/program_desc.h"

namespace kiln::tile::cpu {

// A slot of a CB ring. Its generation goes up on every reserve (odd) and every wait (even), so a
// block handle knows which hand-out it came from, and whether push (odd) or pop (even) ended it.
struct Slot {
  enum State { Free, Reserved, Ready, Held } state = Free;
  unsigned gen = 0;
  int pending_in = 0, pending_out = 0;  // transfers into / out of the block not yet waited
  abi::Loc pending_at{};                // where the last of them was issued
  bool awaiting_mcast = false, mcast_arrived = false;
  int64_t mcast_seq = 0;  // while awaiting: the CB's count of receives posted before this one
  abi::Loc acquired_at{}, pushed_at{}, popped_at{};
};

struct CBState {
  const CBDecl* decl;
  size_t block_bytes;
  std::vector<std::byte> mem;
  std::vector<Slot> slots;
  int64_t reserved = 0, pushed = 0, waited = 0, popped = 0;  // blocks handed out so far
  int64_t mcast_posted = 0;                                  // mcast_receive() calls so far
  std::byte* block(int slot) { return mem.data() + slot * block_bytes; }
};

struct TransferState {
  enum Kind { Read, Write, McastSend, McastRecv } kind;
  abi::BlockRef block;
  abi::Loc issued_at;
  bool waited = false;
};

struct Core;

// The runtime call a role made last (what a watchdog report says a role in kernel code did last).
struct Call {
  const char* op = nullptr;  // "reserve() on", "value() of", ...; null: no call yet
  enum Object { None, CB, Sem } object = None;
  int id = -1;
  abi::Loc at{};
};

struct Fiber {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  Core* core;
  std::string role;
  abi::RoleFn fn;
  enum State { Runnable, Running, Blocked, Done, Failed } state = Runnable;
  std::function<bool()> ready;           // while Blocked: may it go on?
  std::function<std::string()> blocked;  // while Blocked: what it waits for (deadlock reports)
  abi::Loc blocked_at{};
  Call last;
};
inline constexpr size_t kStackBytes = 256 * 1024;  // per role

struct Core {
  int index, x, y;
  std::vector<CBState> cbs;
  std::vector<long long> sems;
  std::vector<TransferState> transfers;
  std::vector<long long> args;
  std::vector<Fiber*> fibers;
};

// A bound tensor as the kernel sees it: 2D, row-major.
struct TensorView {
  std::byte* data;
  const TensorDecl* decl;
  int64_t rows, cols;  // elements
};

// Everything a role can touch, owned here: a launch the watchdog gives up on outlives its program
// (its stuck threads keep it, see run_cores).
struct Launch {
  Program::Desc desc;  // a copy of the program's declarations
  std::vector<Tensor> inputs;
  std::vector<std::vector<std::byte>> outputs;  // by tensor index (empty for inputs)
  std::vector<TensorView> tensors;
  std::vector<std::unique_ptr<Core>> cores;
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::mutex mu;
  std::condition_variable cv;    // roles' progress, for sleeping worker threads
  std::condition_variable done;  // a worker thread exited, for the launching thread
  uint64_t epoch = 0;            // bumped on every state change a blocked role may wait for
  int live_workers = 0, sleeping = 0, exited = 0;
  std::vector<char> worker_exited;  // per worker thread
  bool failed = false;
  bool abandoned = false;  // the launching thread returned without this launch's stuck threads
  std::string error;
};

// The worker thread running fibers now (thread-local): its launch, scheduler context and fiber.
struct Worker {
  Launch* launch;
  ucontext_t main;
  Fiber* current = nullptr;
};
Worker*& this_worker();

// Runs every role of every core to completion on up to KILN_THREADS threads of its own, watched
// (src/tile/cpu/watchdog.cpp); throws kiln::Error for a deadlock, a failed check, leftover blocks,
// an exception in a role, or no progress for KILN_TILE_TIMEOUT_MS. A launch whose threads are stuck
// in kernel code is handed to them (L is null afterwards) and kept for the rest of the process.
void run_cores(std::unique_ptr<Launch>& L);
// Worker thread w of `threads`: runs the fibers of cores w, w + threads, ... until they end or the
// launch fails; every exception becomes the launch's error (src/tile/cpu/fibers.cpp).
void worker_main(Launch& L, int w, int threads);
// With L.mu held: fails the launch with msg (the first error wins) and wakes every thread.
void set_error(Launch& L, const std::string& msg);
// Threads the watchdog gave up on that still run kernel code.
int abandoned_threads_running();

// From a role, with lk holding L.mu: returns once ready() holds, yielding to other roles until then.
void block_until(std::unique_lock<std::mutex>& lk, std::function<bool()> ready,
                 std::function<std::string()> what, abi::Loc at);
// From a role, with lk holding L.mu: fails the launch with `msg` (prefixed by kernel, core and role,
// followed by the source position) and never returns.
[[noreturn]] void fail_here(std::unique_lock<std::mutex>& lk, const std::string& msg, abi::Loc at);
// From a role, with lk holding L.mu: ends the role where it is (the launch failed) and never returns.
[[noreturn]] void leave_fiber(std::unique_lock<std::mutex>& lk);
// With L.mu held: wakes threads whose roles may now go on.
void notify_progress(Launch& L);
std::string where(abi::Loc at);
std::string core_name(const Launch& L, const Core& c);
// What a role was doing, for deadlock and watchdog reports: its blocked operation, or its last
// runtime call while it runs kernel code.
std::string doing(const Launch& L, const Fiber& f);

// The table compiled kernels call (src/tile/cpu/runtime.cpp).
const abi::Runtime& runtime_table();
// Compiles (or finds cached) the program's entry point (src/tile/cpu/compile.cpp).
using Entry = int (*)(const abi::Runtime*, abi::RoleFn*);
Entry compile(const Program::Desc& d);

}  // namespace kiln::tile::cpu
