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
  abi::Loc acquired_at{}, pushed_at{}, popped_at{};
};

struct CBState {
  const CBDecl* decl;
  size_t block_bytes;
  std::vector<std::byte> mem;
  std::vector<Slot> slots;
  int64_t reserved = 0, pushed = 0, waited = 0, popped = 0;  // blocks handed out so far
  std::byte* block(int slot) { return mem.data() + slot * block_bytes; }
};

struct TransferState {
  enum Kind { Read, Write, McastSend, McastRecv } kind;
  abi::BlockRef block;
  abi::Loc issued_at;
  bool waited = false;
};

struct Core;

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
};

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

struct Launch {
  Program::Desc* desc;
  std::vector<TensorView> tensors;
  std::vector<std::unique_ptr<Core>> cores;
  std::vector<std::unique_ptr<Fiber>> fibers;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t epoch = 0;  // bumped on every state change a blocked role may wait for
  int live_workers = 0, sleeping = 0;
  bool failed = false;
  std::string error;
};

// The worker thread running fibers now (thread-local): its launch, scheduler context and fiber.
struct Worker {
  Launch* launch;
  ucontext_t main;
  Fiber* current = nullptr;
};
Worker*& this_worker();

// Runs every role of every core to completion on up to KILN_THREADS threads (src/tile/cpu/fibers.cpp);
// throws kiln::Error for a deadlock, a failed check or leftover blocks.
void run_cores(Launch& L);

// From a role, with lk holding L.mu: returns once ready() holds, yielding to other roles until then.
void block_until(std::unique_lock<std::mutex>& lk, std::function<bool()> ready,
                 std::function<std::string()> what, abi::Loc at);
// From a role, with lk holding L.mu: fails the launch with `msg` (prefixed by kernel, core and role,
// followed by the source position) and never returns.
[[noreturn]] void fail_here(std::unique_lock<std::mutex>& lk, const std::string& msg, abi::Loc at);
// With L.mu held: wakes threads whose roles may now go on.
void notify_progress(Launch& L);
std::string where(abi::Loc at);
std::string core_name(const Launch& L, const Core& c);

// The table compiled kernels call (src/tile/cpu/runtime.cpp).
const abi::Runtime& runtime_table();
// Compiles (or finds cached) the program's entry point (src/tile/cpu/compile.cpp).
using Entry = int (*)(const abi::Runtime*, abi::RoleFn*);
Entry compile(const Program::Desc& d);

}  // namespace kiln::tile::cpu
