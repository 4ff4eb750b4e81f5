// Cooperative roles: every role of every core is a ucontext fiber; the launch's worker threads
// (started by watchdog.cpp) each run the fibers of a fixed subset of cores, switching when a role
// blocks on a CB, semaphore or multicast. Deadlock = no thread has a role that can go on.
#include <algorithm>
#include <new>

#include "kiln/error.h"
#include "tile/cpu/launch_state.h"

namespace kiln::tile::cpu {

namespace {

thread_local Worker* tls_worker = nullptr;

std::string role_name(const Launch& L, const Fiber& f) { return core_name(L, *f.core) + " " + f.role; }

// A role's body; an exception out of it (kernel code, or a runtime call out of memory) fails the
// launch with the role's name instead of crossing the fiber's base (which would terminate).
void trampoline() {
  Worker* w = tls_worker;
  Fiber* f = w->current;
  std::string error;
  try {
    f->fn();
  } catch (const std::bad_alloc&) {
    error = "ran out of memory (std::bad_alloc)";
  } catch (const std::exception& e) {
    error = std::string("threw an exception: ") + e.what();
  } catch (...) {
    error = "threw an exception that is not a std::exception";
  }
  Launch& L = *w->launch;
  std::lock_guard<std::mutex> lk(L.mu);
  if (error.empty()) {
    f->state = Fiber::Done;
    return;
  }
  set_error(L, "kiln.tile: kernel '" + L.desc.name + "' " + role_name(L, *f) + " " + error);
  f->state = Fiber::Failed;
}  // returns to the scheduler through uc_link

bool can_run(Fiber* f) { return f->state == Fiber::Runnable || (f->state == Fiber::Blocked && f->ready()); }

void report_deadlock(Launch& L) {
  std::string msg =
      "kiln.tile: deadlock in kernel '" + L.desc.name + "': every role still running is blocked:";
  for (auto& f : L.fibers)
    if (f->state == Fiber::Blocked) msg += "\n  " + role_name(L, *f) + ": " + doing(L, *f);
  set_error(L, msg);
}

// Blocks a role may not leave behind: every reserve pushed, every wait popped, every push consumed.
void check_core_end(Launch& L, Core& c) {
  for (Fiber* f : c.fibers)
    if (f->state != Fiber::Done) return;
  std::string pre = "kiln.tile: kernel '" + L.desc.name + "' " + core_name(L, c) + " ended with ";
  for (auto& cb : c.cbs) {
    const std::string& name = cb.decl->name;
    for (auto& s : cb.slots) {
      if (s.state == Slot::Reserved)
        return set_error(L, pre + "a block of CB '" + name + "' reserved at " + where(s.acquired_at) +
                                " and never pushed");
      if (s.state == Slot::Held)
        return set_error(
            L, pre + "a block of CB '" + name + "' waited at " + where(s.acquired_at) + " and never popped");
    }
    if (cb.pushed > cb.waited)
      return set_error(
          L, pre + std::to_string(cb.pushed - cb.waited) + " block(s) of CB '" + name + "' pushed (last at " +
                 where(cb.slots[(cb.pushed - 1) % cb.slots.size()].pushed_at) + ") that no role waited for");
  }
  for (auto& t : c.transfers)
    if (!t.waited)
      return set_error(L, pre + "a transfer issued at " + where(t.issued_at) + " that was never waited");
}

void worker_loop(Launch& L, Worker& W, int w, int threads) {
  std::vector<Fiber*> mine;
  for (auto& c : L.cores)
    if (c->index % threads == w)
      for (Fiber* f : c->fibers) {
        getcontext(&f->ctx);
        f->ctx.uc_stack.ss_sp = f->stack.get();
        f->ctx.uc_stack.ss_size = kStackBytes;
        f->ctx.uc_link = &W.main;
        makecontext(&f->ctx, trampoline, 0);
        mine.push_back(f);
      }
  std::unique_lock<std::mutex> lk(L.mu);
  size_t rr = 0;
  while (!L.failed) {
    Fiber* next = nullptr;
    bool alive = false;
    for (size_t k = 0; k < mine.size() && !next; k++) {
      Fiber* f = mine[(rr + k) % mine.size()];
      if (f->state == Fiber::Done || f->state == Fiber::Failed) continue;
      alive = true;
      if (can_run(f)) next = f, rr = (rr + k + 1) % mine.size();
    }
    if (!alive) break;
    if (!next) {
      // Nothing here can go on: a deadlock if no other thread runs a role and none could.
      L.sleeping++;
      if (L.sleeping == L.live_workers &&
          std::none_of(L.fibers.begin(), L.fibers.end(), [](auto& f) { return can_run(f.get()); })) {
        report_deadlock(L);
        break;
      }
      uint64_t seen = L.epoch;
      L.cv.wait(lk, [&] { return L.epoch != seen || L.failed; });
      L.sleeping--;
      continue;
    }
    next->state = Fiber::Running;
    W.current = next;
    lk.unlock();
    swapcontext(&W.main, &next->ctx);
    lk.lock();
    W.current = nullptr;
    if (next->state == Fiber::Done && !L.failed) {
      check_core_end(L, *next->core);
      notify_progress(L);
    }
  }
}

}  // namespace

Worker*& this_worker() { return tls_worker; }

void set_error(Launch& L, const std::string& msg) {
  if (!L.failed) L.error = msg;
  L.failed = true;
  L.epoch++;
  L.cv.notify_all();
}

void worker_main(Launch& L, int w, int threads) {
  Worker W{&L, {}, nullptr};
  tls_worker = &W;
  std::string error;
  try {
    worker_loop(L, W, w, threads);
  } catch (const std::bad_alloc&) {
    error = "out of memory";
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::lock_guard<std::mutex> lk(L.mu);
  if (!error.empty())
    set_error(L, "kiln.tile: kernel '" + L.desc.name + "': worker thread " + std::to_string(w) + " of " +
                     std::to_string(threads) + " failed: " + error);
  L.live_workers--;
  L.epoch++;
  L.cv.notify_all();
  tls_worker = nullptr;
}

void notify_progress(Launch& L) {
  L.epoch++;
  if (L.sleeping) L.cv.notify_all();
}

std::string where(abi::Loc at) { return source_position(at.file ? at.file : "", at.line); }

std::string core_name(const Launch& L, const Core& c) {
  if (!L.desc.grid.is_2d) return "core " + std::to_string(c.index);
  return "core " + std::to_string(c.index) + " (x=" + std::to_string(c.x) + ", y=" + std::to_string(c.y) +
         ")";
}

std::string doing(const Launch& L, const Fiber& f) {
  if (f.state == Fiber::Blocked) return f.blocked() + " at " + where(f.blocked_at);
  if (f.state == Fiber::Runnable)
    return "ready to go on, but its worker thread is held by a role that does not return to the runtime";
  if (f.state != Fiber::Running) return f.state == Fiber::Done ? "done" : "failed";
  const Call& c = f.last;
  if (!c.op) return "running kernel code, with no runtime call yet";
  std::string what = c.op;
  if (c.object == Call::CB && c.id >= 0 && c.id < static_cast<int>(L.desc.cbs.size()))
    what += " CB '" + L.desc.cbs[c.id].name + "'";
  if (c.object == Call::Sem && c.id >= 0 && c.id < static_cast<int>(L.desc.semaphores.size()))
    what += " semaphore '" + L.desc.semaphores[c.id] + "'";
  if (c.at.file) what += " at " + where(c.at);
  return "running kernel code; its last runtime call was " + what;
}

void block_until(std::unique_lock<std::mutex>& lk, std::function<bool()> ready,
                 std::function<std::string()> what, abi::Loc at) {
  if (ready()) return;
  Worker* w = tls_worker;
  Fiber* f = w->current;
  f->ready = std::move(ready);
  f->blocked = std::move(what);
  f->blocked_at = at;
  while (!f->ready()) {
    f->state = Fiber::Blocked;
    lk.unlock();
    swapcontext(&f->ctx, &w->main);
    lk.lock();  // the scheduler saw ready() hold; another role may have taken it since
  }
  f->ready = nullptr;
  f->blocked = nullptr;
}

void leave_fiber(std::unique_lock<std::mutex>& lk) {
  Worker* w = tls_worker;
  Fiber* f = w->current;
  f->state = Fiber::Failed;
  lk.unlock();
  swapcontext(&f->ctx, &w->main);  // never resumed: the launch is over
  __builtin_unreachable();
}

void fail_here(std::unique_lock<std::mutex>& lk, const std::string& msg, abi::Loc at) {
  Worker* w = tls_worker;
  Fiber* f = w->current;
  Launch& L = *w->launch;
  set_error(L,
            "kiln.tile: kernel '" + L.desc.name + "' " + role_name(L, *f) + ": " + msg + " at " + where(at));
  leave_fiber(lk);
}

}  // namespace kiln::tile::cpu
