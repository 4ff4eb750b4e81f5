// The realize driver (see realize.h): the stages in order, and the KILN_DEBUG=1 summary.
#include "engine/realize.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "engine/stages.h"
#include "engine/viz.h"
#include "ir/symbolic.h"
#include "kiln/debug.h"
#include "runtime/backend.h"

namespace kiln::engine {

namespace {

thread_local int t_realizing = 0;

double ms_since(std::chrono::steady_clock::time_point t0, std::chrono::steady_clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count() * 1e3;
}

// KILN_DEBUG=1: one line per realize: kernels, where their programs came from, memory, host time
// (and its parts: rewrite and schedule, runner choice and lowering, loading or compiling programs,
// the memory plan).
void summarize(size_t kernels, const Stats& before, const Memory& m, double host_ms,
               const std::vector<double>& ms) {
  Stats& now = stats();
  std::fprintf(stderr,
               "kiln: scheduled %zu kernels (programs: %lld from memory, %lld from disk, %lld compiled), "
               "%.2f MB new buffers, planned peak %.2f MB (no reuse: %.2f MB), %.3f ms to schedule and "
               "compile (schedule %.3f, lower %.3f, load %.3f, memory %.3f)\n",
               kernels, static_cast<long long>(now.memory_cache_hits - before.memory_cache_hits),
               static_cast<long long>(now.disk_cache_hits - before.disk_cache_hits),
               static_cast<long long>(now.kernels_compiled - before.kernels_compiled),
               static_cast<double>(m.buffers.own_bytes + m.plan.arena_bytes) / 1e6, m.plan.arena_bytes / 1e6,
               m.plan.no_reuse_bytes / 1e6, host_ms, ms[0], ms[1], ms[2], ms[3]);
}

}  // namespace

bool realizing() { return t_realizing > 0; }

void realize(const std::vector<ir::NodeRef>& roots, Device device) {
  struct Scope {
    Scope() { t_realizing++; }
    ~Scope() { t_realizing--; }
  } scope;
  auto t0 = std::chrono::steady_clock::now();
  Rewritten g = rewrite(roots);
  runtime::Backend& b = runtime::backend(device);
  schedule::Schedule sched = schedule_kernels(g.roots, b);
  if (ir::vars_in_use()) bind_symbolic(sched, g.roots, device);
  auto t_sched = std::chrono::steady_clock::now();
  Runners runners = choose_runners(sched, b);
  Lowerings lowered = lower(sched, runners, b);
  auto t_lower = std::chrono::steady_clock::now();
  // the compiler viewer records the graphs before any kernel output is attached to them
  std::unique_ptr<viz::Record> rec =
      viz::enabled() ? std::make_unique<viz::Record>(roots, g.roots, sched, lowered, device) : nullptr;
  Stats before = stats();
  auto t_viz = std::chrono::steady_clock::now();
  std::vector<runtime::Launch> programs = load(sched, lowered, runners, b);  // compile (cached)
  auto t_load = std::chrono::steady_clock::now();
  Memory mem = plan_memory(sched, g, device);
  auto t1 = std::chrono::steady_clock::now();
  try {
    std::vector<Bound> bound = bind_launches(sched, lowered, programs, runners, mem, b, device);
    run(sched, lowered, bound, mem, b, rec.get());
  } catch (...) {
    forget_outputs(sched);
    throw;
  }
  release(sched, mem);
  // roots the rewrites turned into other (already computed) nodes share their buffers
  for (size_t i = 0; i < roots.size(); i++)
    if (!roots[i]->buffer) ir::set_buffer(*roots[i], g.roots[i]->buffer);
  if (rec) rec->finish(ms_since(t0, t1));
  if (settings().debug >= 1)
    summarize(
        sched.kernels.size(), before, mem, ms_since(t0, t1),
        {ms_since(t0, t_sched), ms_since(t_sched, t_lower), ms_since(t_viz, t_load), ms_since(t_load, t1)});
}

}  // namespace kiln::engine
