// The runtime table compiled tile kernels call on the CPU: CB ring protocol, DMA between tensors
// and blocks, semaphores and multicast, each with the debug checks of the tile programming model.
#include <algorithm>
#include <cstring>

#include "kiln/dtype.h"
#include "tile/cpu/launch_state.h"

namespace kiln::tile::cpu {

namespace {

struct Ctx {
  Launch& L;
  Core& core;
  std::unique_lock<std::mutex> lk;
};

// Every runtime call starts here: takes the launch's lock, notes the call (for watchdog reports) and
// ends the role if the launch already failed, so a role of a failed launch stops at its next call.
Ctx enter(const char* op, Call::Object object, int id, abi::Loc at) {
  Worker* w = this_worker();
  std::unique_lock<std::mutex> lk(w->launch->mu);
  if (w->launch->failed) leave_fiber(lk);
  w->current->last = Call{op, object, id, at};
  return Ctx{*w->launch, *w->current->core, std::move(lk)};
}

CBState& cb_at(Ctx& c, int cb, abi::Loc at) {
  if (cb < 0 || cb >= static_cast<int>(c.core.cbs.size()))
    fail_here(c.lk, "no CB with id " + std::to_string(cb), at);
  return c.core.cbs[cb];
}

std::string cb_name(const CBState& cb) { return "CB '" + cb.decl->name + "'"; }

// The slot behind a block handle, if the handle is still live; otherwise a clear error.
Slot& live_slot(Ctx& c, abi::BlockRef b, abi::Loc at) {
  CBState& cb = cb_at(c, b.cb, at);
  if (b.slot < 0 || b.slot >= static_cast<int>(cb.slots.size())) fail_here(c.lk, "bad block handle", at);
  Slot& s = cb.slots[b.slot];
  bool live = s.gen == b.gen && (s.state == Slot::Reserved || s.state == Slot::Held);
  if (live) return s;
  bool producer = b.gen % 2 == 1;  // reserve hands out odd generations, wait even ones
  bool latest = s.gen == b.gen || s.gen == b.gen + 1;
  std::string msg = "block of " + cb_name(cb) + " used after " + (producer ? "push()" : "pop()");
  if (latest) msg += " (at " + where(producer ? s.pushed_at : s.popped_at) + ")";
  fail_here(c.lk, msg, at);
}

std::byte* checked_block(Ctx& c, abi::BlockRef b, bool write, abi::Loc at) {
  Slot& s = live_slot(c, b, at);
  CBState& cb = c.core.cbs[b.cb];
  if (s.pending_in)
    fail_here(c.lk,
              "block of " + cb_name(cb) + (write ? " written" : " read") +
                  " before its DMA completed: call .wait() on the transfer issued at " + where(s.pending_at) +
                  " first",
              at);
  if (write && s.pending_out)
    fail_here(c.lk,
              "block of " + cb_name(cb) + " written while the DMA issued at " + where(s.pending_at) +
                  " still reads it: call .wait() on that transfer first",
              at);
  return cb.block(b.slot);
}

int add_transfer(Core& core, TransferState::Kind kind, abi::BlockRef b, abi::Loc at) {
  core.transfers.push_back(TransferState{kind, b, at, false});
  return static_cast<int>(core.transfers.size()) - 1;
}

// ---- grid ----
int core_index() { return this_worker()->current->core->index; }
int core_x() { return this_worker()->current->core->x; }
int core_y() { return this_worker()->current->core->y; }
const long long* args() {
  static const long long none = 0;
  auto& a = this_worker()->current->core->args;
  return a.empty() ? &none : a.data();
}

const TensorView& tensor_at(Ctx& c, int t, abi::Loc at) {
  if (t < 0 || t >= static_cast<int>(c.L.tensors.size()))
    fail_here(c.lk, "no tensor with id " + std::to_string(t), at);
  return c.L.tensors[t];
}

int64_t tiles(int64_t n) { return (n + kTileSize - 1) / kTileSize; }

void tensor_dims(int t, long long* rows, long long* cols) {
  Ctx c = enter("rows() or cols() of a tensor", Call::None, -1, {});
  const TensorView& v = tensor_at(c, t, {"?", 0});
  bool el = v.decl->indexing == Indexing::Elements;
  *rows = el ? v.rows : tiles(v.rows);
  *cols = el ? v.cols : tiles(v.cols);
}

// ---- circular buffers ----
abi::BlockRef cb_reserve(int id, abi::Loc at) {
  Ctx c = enter("reserve() on", Call::CB, id, at);
  CBState& cb = cb_at(c, id, at);
  int n = static_cast<int>(cb.slots.size());
  block_until(
      c.lk, [&] { return cb.slots[cb.reserved % n].state == Slot::Free; },
      [&] { return "reserve() on " + cb_name(cb) + " (all " + std::to_string(n) + " blocks in use)"; }, at);
  int slot = cb.reserved++ % n;
  Slot& s = cb.slots[slot];
  s.state = Slot::Reserved;
  s.gen++;
  s.acquired_at = at;
  s.awaiting_mcast = s.mcast_arrived = false;
  notify_progress(c.L);
  return abi::BlockRef{id, slot, s.gen};
}

void require_no_pending(Ctx& c, CBState& cb, Slot& s, const char* op, abi::Loc at) {
  if (s.pending_in || s.pending_out)
    fail_here(c.lk,
              std::string(op) + " on " + cb_name(cb) +
                  " of a block whose DMA was not waited: call .wait() on the " + "transfer issued at " +
                  where(s.pending_at) + " first",
              at);
}

void cb_push(int id, abi::Loc at) {
  Ctx c = enter("push() on", Call::CB, id, at);
  CBState& cb = cb_at(c, id, at);
  if (cb.pushed == cb.reserved) fail_here(c.lk, "push() on " + cb_name(cb) + " without a reserved block", at);
  Slot& s = cb.slots[cb.pushed % cb.slots.size()];
  require_no_pending(c, cb, s, "push()", at);
  s.state = Slot::Ready;
  s.pushed_at = at;
  cb.pushed++;
  notify_progress(c.L);
}

abi::BlockRef cb_wait(int id, abi::Loc at) {
  Ctx c = enter("wait() on", Call::CB, id, at);
  CBState& cb = cb_at(c, id, at);
  block_until(
      c.lk, [&] { return cb.waited < cb.pushed; },
      [&] { return "wait() on " + cb_name(cb) + " (no block pushed)"; }, at);
  int slot = static_cast<int>(cb.waited++ % cb.slots.size());
  Slot& s = cb.slots[slot];
  s.state = Slot::Held;
  s.gen++;
  s.acquired_at = at;
  notify_progress(c.L);
  return abi::BlockRef{id, slot, s.gen};
}

void cb_pop(int id, abi::Loc at) {
  Ctx c = enter("pop() on", Call::CB, id, at);
  CBState& cb = cb_at(c, id, at);
  if (cb.popped == cb.waited) fail_here(c.lk, "pop() on " + cb_name(cb) + " without a waited block", at);
  Slot& s = cb.slots[cb.popped % cb.slots.size()];
  require_no_pending(c, cb, s, "pop()", at);
  s.state = Slot::Free;
  s.popped_at = at;
  cb.popped++;
  notify_progress(c.L);
}

void* block_data(abi::BlockRef b, int write, abi::Loc at) {
  Ctx c = enter("an access to a block of", Call::CB, b.cb, at);
  return checked_block(c, b, write != 0, at);
}

// ---- DMA ----
// The element rectangle a slice covers, checked against the block and the tensor.
struct Rect {
  int64_t r0, c0, rows, cols;  // elements; rows/cols already clipped to the tensor
};

// [start, start + size) lies in [0, extent), checked without forming start + size (a slice of
// INT64_MAX rows would wrap past the check).
bool within(int64_t start, int64_t size, int64_t extent) {
  return start >= 0 && size >= 0 && start <= extent && size <= extent - start;
}

// "a..b", or "a..a+b" where the end does not fit in 64 bits.
std::string span(int64_t start, int64_t size) {
  int64_t end;
  if (__builtin_add_overflow(start, size, &end))
    return std::to_string(start) + ".." + std::to_string(start) + "+" + std::to_string(size);
  return std::to_string(start) + ".." + std::to_string(end);
}

Rect slice_rect(Ctx& c, const TensorView& v, const CBState& cb, abi::Slice s, abi::Loc at) {
  const std::string& tn = v.decl->name;
  auto range = [&](const char* unit, int64_t R, int64_t C) {
    return span(s.row, s.rows) + " x " + span(s.col, s.cols) + " " + unit + " of tensor '" + tn + "' (" +
           std::to_string(R) + "x" + std::to_string(C) + " " + unit + ")";
  };
  std::string block = cb.decl->shape_str();
  if (v.decl->indexing == Indexing::Tiles) {
    if (cb.decl->tile_rows != kTileSize)
      fail_here(c.lk,
                "dma between tile-indexed tensor '" + tn + "' and a block of " + block + " of " +
                    cb_name(cb) +
                    ": blocks of short tiles move through element-indexed accessors (Indexing::Elements)",
                at);
    if (s.rows != cb.decl->rows || s.cols != cb.decl->cols)
      fail_here(c.lk,
                "dma between a slice of " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                    " tiles of tensor '" + tn + "' and a block of " + block + " of " + cb_name(cb) +
                    ": shapes must match (a smaller piece, such as the last of an uneven split, needs an "
                    "element-indexed tensor: Indexing::Elements)",
                at);
    int64_t R = tiles(v.rows), C = tiles(v.cols);
    if (!within(s.row, s.rows, R) || !within(s.col, s.cols, C))
      fail_here(c.lk, "tensor slice out of range: tiles " + range("tiles", R, C), at);
    int64_t r0 = s.row * kTileSize, c0 = s.col * kTileSize;
    return Rect{r0, c0, std::min<int64_t>(s.rows * kTileSize, v.rows - r0),
                std::min<int64_t>(s.cols * kTileSize, v.cols - c0)};
  }
  if (s.rows > cb.decl->height() || s.cols > cb.decl->width() || s.rows < 0 || s.cols < 0)
    fail_here(c.lk,
              "dma of " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " elements of tensor '" +
                  tn + "' does not fit a block of " + block + " of " + cb_name(cb),
              at);
  if (!within(s.row, s.rows, v.rows) || !within(s.col, s.cols, v.cols))
    fail_here(c.lk, "tensor slice out of range: elements " + range("elements", v.rows, v.cols), at);
  return Rect{s.row, s.col, s.rows, s.cols};
}

int dma_read(int t, abi::Slice s, abi::BlockRef b, float pad, abi::Loc at) {
  Ctx c = enter("dma() into a block of", Call::CB, b.cb, at);
  const TensorView& v = tensor_at(c, t, at);
  std::byte* dst = checked_block(c, b, true, at);
  CBState& cb = c.core.cbs[b.cb];
  Rect r = slice_rect(c, v, cb, s, at);
  Slot& slot = cb.slots[b.slot];
  slot.pending_in++;
  slot.pending_at = at;
  int id = add_transfer(c.core, TransferState::Read, b, at);
  c.lk.unlock();  // the block is ours until the transfer is waited: copy without the lock
  size_t es = dtype_size(v.decl->dtype);
  int64_t bw = cb.decl->width(), bh = cb.decl->height();
  uint32_t pad32;
  uint16_t pad16 = float_to_bf16(pad);
  std::memcpy(&pad32, &pad, 4);
  // padding with fixed-size copies the compiler turns into (vector) stores: a block row of a row
  // vector is mostly padding
  auto fill = [&](std::byte* p, int64_t n) {
    if (es == 4)
      for (int64_t j = 0; j < n; j++) std::memcpy(p + j * 4, &pad32, 4);
    else
      for (int64_t j = 0; j < n; j++) std::memcpy(p + j * 2, &pad16, 2);
  };
  for (int64_t i = 0; i < bh; i++) {
    std::byte* row = dst + i * bw * es;
    int64_t valid = i < r.rows ? r.cols : 0;
    if (valid) std::memcpy(row, v.data + ((r.r0 + i) * v.cols + r.c0) * es, valid * es);
    fill(row + valid * es, bw - valid);
  }
  return id;
}

int dma_write(abi::BlockRef b, int t, abi::Slice s, abi::Loc at) {
  Ctx c = enter("dma() out of a block of", Call::CB, b.cb, at);
  const TensorView& v = tensor_at(c, t, at);
  if (!v.decl->output)
    fail_here(c.lk, "dma into input tensor '" + v.decl->name + "': inputs are read-only, declare an output",
              at);
  std::byte* src = checked_block(c, b, false, at);
  CBState& cb = c.core.cbs[b.cb];
  Rect r = slice_rect(c, v, cb, s, at);
  Slot& slot = cb.slots[b.slot];
  slot.pending_out++;
  slot.pending_at = at;
  int id = add_transfer(c.core, TransferState::Write, b, at);
  c.lk.unlock();
  size_t es = dtype_size(v.decl->dtype);
  int64_t bw = cb.decl->width();
  for (int64_t i = 0; i < r.rows; i++)
    std::memcpy(v.data + ((r.r0 + i) * v.cols + r.c0) * es, src + i * bw * es, r.cols * es);
  return id;
}

void transfer_wait(int id, abi::Loc at) {
  Ctx c = enter("wait() on a transfer", Call::None, -1, at);
  if (id < 0 || id >= static_cast<int>(c.core.transfers.size()))
    fail_here(c.lk, "wait() on an unknown transfer", at);
  if (c.core.transfers[id].waited) return;
  // by value: other roles of this core may add transfers (growing the vector) while this one blocks
  const TransferState::Kind kind = c.core.transfers[id].kind;
  const abi::BlockRef blk = c.core.transfers[id].block;
  Slot& s = c.core.cbs[blk.cb].slots[blk.slot];
  if (kind == TransferState::McastRecv)
    block_until(
        c.lk, [&] { return s.mcast_arrived || s.gen != blk.gen; },
        [&] { return "wait() for a multicast into " + cb_name(c.core.cbs[blk.cb]) + " (none arrived)"; }, at);
  TransferState& t = c.core.transfers[id];
  t.waited = true;
  if (s.gen == blk.gen) {
    if (kind == TransferState::Write) s.pending_out--;
    if (kind == TransferState::Read || kind == TransferState::McastRecv) s.pending_in--;
  }
  notify_progress(c.L);
}

// ---- cross-core ----
// Cores [x0, x1) x [y0, y1) in 64 bits: one core's range (x, x + 1) cannot wrap.
void check_range(Ctx& c, long long x0, long long x1, long long y0, long long y1, abi::Loc at) {
  const Grid& g = c.L.desc.grid;
  if (x0 < 0 || y0 < 0 || x0 >= x1 || y0 >= y1 || x1 > g.cols || y1 > g.rows)
    fail_here(c.lk,
              "core range x " + std::to_string(x0) + ".." + std::to_string(x1) + ", y " + std::to_string(y0) +
                  ".." + std::to_string(y1) + " is empty or outside the " + std::to_string(g.rows) + "x" +
                  std::to_string(g.cols) + " grid",
              at);
}
void check_range(Ctx& c, abi::CoreRange r, abi::Loc at) { check_range(c, r.x0, r.x1, r.y0, r.y1, at); }

Core& core_at(Ctx& c, int x, int y) { return *c.L.cores[y * c.L.desc.grid.cols + x]; }

// The receiver's slot that the next multicast into CB dst fills, or null: of the receives still
// waiting, the one posted first (as on the GPU, where the k-th payload goes to the k-th receive),
// which after the ring wrapped need not be the lowest slot.
Slot* receiving_slot(Core& core, int dst) {
  Slot* first = nullptr;
  for (auto& s : core.cbs[dst].slots)
    if (s.state == Slot::Reserved && s.awaiting_mcast && !s.mcast_arrived &&
        (!first || s.mcast_seq < first->mcast_seq))
      first = &s;
  return first;
}

int mcast(abi::BlockRef b, int dst, abi::CoreRange r, abi::Loc at) {
  Ctx c = enter("mcast() into", Call::CB, dst, at);
  check_range(c, r, at);
  std::byte* src = checked_block(c, b, false, at);
  CBState& dcb = cb_at(c, dst, at);
  std::vector<Core*> receivers;
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++)
      if (&core_at(c, x, y) != &c.core) receivers.push_back(&core_at(c, x, y));
  block_until(
      c.lk,
      [&] {
        for (Core* rc : receivers)
          if (!receiving_slot(*rc, dst)) return false;
        return true;
      },
      [&] {
        std::string missing;
        for (Core* rc : receivers)
          if (!receiving_slot(*rc, dst)) missing += (missing.empty() ? "" : ", ") + core_name(c.L, *rc);
        return "mcast() into " + cb_name(dcb) + " waiting for mcast_receive() on " + missing;
      },
      at);
  for (Core* rc : receivers) {
    Slot* s = receiving_slot(*rc, dst);
    CBState& rcb = rc->cbs[dst];
    std::memcpy(rcb.block(static_cast<int>(s - rcb.slots.data())), src, rcb.block_bytes);
    s->mcast_arrived = true;
  }
  int id = add_transfer(c.core, TransferState::McastSend, b, at);
  c.core.transfers[id].waited = true;  // the copy is done; wait() has nothing left to do
  notify_progress(c.L);
  return id;
}

int mcast_receive(abi::BlockRef b, abi::Loc at) {
  Ctx c = enter("mcast_receive() on", Call::CB, b.cb, at);
  Slot& s = live_slot(c, b, at);
  CBState& cb = c.core.cbs[b.cb];
  if (s.state != Slot::Reserved)
    fail_here(c.lk, "mcast_receive() needs a block reserved on " + cb_name(cb) + ", not a waited one", at);
  s.awaiting_mcast = true;
  s.mcast_arrived = false;
  s.mcast_seq = cb.mcast_posted++;
  s.pending_in++;
  s.pending_at = at;
  int id = add_transfer(c.core, TransferState::McastRecv, b, at);
  notify_progress(c.L);
  return id;
}

long long& sem_at(Ctx& c, Core& core, int sem, abi::Loc at) {
  if (sem < 0 || sem >= static_cast<int>(core.sems.size()))
    fail_here(c.lk, "no semaphore with id " + std::to_string(sem), at);
  return core.sems[sem];
}

std::string sem_name(Ctx& c, int sem) { return "semaphore '" + c.L.desc.semaphores[sem] + "'"; }

void sem_set(int sem, long long v, abi::Loc at) {
  Ctx c = enter("set() on", Call::Sem, sem, at);
  sem_at(c, c.core, sem, at) = v;
  notify_progress(c.L);
}

void sem_inc(int sem, long long n, abi::Loc at) {
  Ctx c = enter("inc() on", Call::Sem, sem, at);
  sem_at(c, c.core, sem, at) += n;
  notify_progress(c.L);
}

void sem_wait(int sem, long long v, abi::Loc at) {
  Ctx c = enter("wait() on", Call::Sem, sem, at);
  long long& value = sem_at(c, c.core, sem, at);
  block_until(
      c.lk, [&] { return value >= v; },
      [&, v] {
        return "wait(" + std::to_string(v) + ") on " + sem_name(c, sem) + " (value " + std::to_string(value) +
               ")";
      },
      at);
}

long long sem_value(int sem, abi::Loc at) {
  Ctx c = enter("value() of", Call::Sem, sem, at);
  return sem_at(c, c.core, sem, at);
}

void sem_remote_inc(int sem, int x, int y, long long n, abi::Loc at) {
  Ctx c = enter("remote_inc() on", Call::Sem, sem, at);
  check_range(c, x, x + 1LL, y, y + 1LL, at);
  sem_at(c, core_at(c, x, y), sem, at) += n;
  notify_progress(c.L);
}

// f(value) for the semaphore on every core of r.
template <class F>
void each_core(const char* op, int sem, abi::CoreRange r, abi::Loc at, F f) {
  Ctx c = enter(op, Call::Sem, sem, at);
  check_range(c, r, at);
  for (int y = r.y0; y < r.y1; y++)
    for (int x = r.x0; x < r.x1; x++) f(sem_at(c, core_at(c, x, y), sem, at));
  notify_progress(c.L);
}

void sem_mcast_set(int sem, abi::CoreRange r, long long v, abi::Loc at) {
  each_core("mcast_set() on", sem, r, at, [&](long long& s) { s = v; });
}

void sem_mcast_inc(int sem, abi::CoreRange r, long long n, abi::Loc at) {
  each_core("mcast_inc() on", sem, r, at, [&](long long& s) { s += n; });
}

void fail(const char* msg, abi::Loc at) {
  Ctx c = enter("a failed check", Call::None, -1, at);
  fail_here(c.lk, msg, at);
}

void compute_only(const char* what, abi::Loc at) {
  Ctx c = enter(what, Call::None, -1, at);
  const std::string& role = this_worker()->current->role;
  if (role != c.L.desc.compute_role)
    fail_here(c.lk,
              std::string(what) + " in data-movement role '" + role +
                  "': column sums are held by the compute role's threads",
              at);
}

}  // namespace

const abi::Runtime& runtime_table() {
  static const abi::Runtime t{core_index,    core_x,        core_y,   args,          tensor_dims,
                              cb_reserve,    cb_push,       cb_wait,  cb_pop,        block_data,
                              dma_read,      dma_write,     mcast,    mcast_receive, transfer_wait,
                              sem_set,       sem_inc,       sem_wait, sem_value,     sem_remote_inc,
                              sem_mcast_set, sem_mcast_inc, fail,     compute_only};
  return t;
}

}  // namespace kiln::tile::cpu
