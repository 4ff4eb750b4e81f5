// Tile kernels used by the tests of both backends (CPU fibers and CUDA thread blocks).
#pragma once
#include <string>

#include "kiln/tile.h"
#include "kiln/tile_ops.h"

namespace kiln::tile_examples {

inline const char* kBarrier = R"(
// Every core adds its core index to the y tile it owns, after a barrier: each core increments the
// counter of core (0, 0), which waits for all of them and then releases everyone with a multicast.
void reader() {
  arrived.remote_inc(0, 0);
  if (core_x() == 0 && core_y() == 0) {
    arrived.wait(num_cores());
    go.mcast_set(whole_grid(), 1);
  }
  go.wait(1);
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(core_y(), core_x()), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(xb + (float)core_index());
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_y(), core_x())).wait();
}
)";

inline const char* kReduceMath = R"(
// sums over rows (a 1 x N result), maxima over columns (M x 1), and unary math, of one 2x2 block
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0, 2, 2), xb).wait();
}
void compute() {
  auto xb = x_cb.scoped_wait();
  {
    auto s = s_cb.scoped_reserve();
    s.store(reduce_sum<0>(xb));
  }
  {
    auto m = m_cb.scoped_reserve();
    m.store(reduce_max<1>(xb));
  }
  auto u = u_cb.scoped_reserve();
  u.store(sigmoid(xb) + tanh(xb) + relu(xb) + abs(xb) + neg(xb) + exp(xb) * 0.5f + log(abs(xb) + 1.0f) +
          sqrt(abs(xb)) + rsqrt(abs(xb) + 1.0f) - xb / 3.0f);
}
void writer() {
  {
    auto s = s_cb.scoped_wait();
    dma(s, sums.slice(0, 0, 1, 2)).wait();
  }
  {
    auto m = m_cb.scoped_wait();
    dma(m, maxes.slice(0, 0, 2, 1)).wait();
  }
  auto u = u_cb.scoped_wait();
  dma(u, math.slice(0, 0, 2, 2)).wait();
}
)";

inline const char* kExchange = R"(
// A barrier in one step (mcast_inc) between cores exchanging data through a tensor: each core
// writes its x tile plus its core index to `stage`, adds 1 to `arrived` on every core, waits for
// its own to count all cores, then reads the tile the next core (in core order) wrote; y gets it.
void reader() {
  {
    auto xb = x_cb.scoped_reserve();
    dma(x.slice(core_y(), core_x()), xb).wait();
  }
  arrived.wait(num_cores());
  const int next = (core_index() + 1) % num_cores();
  auto nb = n_cb.scoped_reserve();
  dma(stage.slice(next / grid_cols(), next % grid_cols()), nb).wait();
}
void compute() {
  {
    auto xb = x_cb.scoped_wait();
    auto sb = s_cb.scoped_reserve();
    sb.store(xb + (float)core_index());
  }
  auto nb = n_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(nb);
}
void writer() {
  {
    auto sb = s_cb.scoped_wait();
    dma(sb, stage.slice(core_y(), core_x())).wait();
  }
  arrived.mcast_inc(whole_grid());
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_y(), core_x())).wait();
}
)";

inline tile::Program exchange_program(const Tensor& x) {  // x: 96 x 96, a tile per core of 3 x 3
  tile::Program p("exchange", kExchange, tile::Grid::grid2d(3, 3));
  p.input("x", x).output("stage", {96, 96}, DType::F32).output("y", {96, 96}, DType::F32);
  p.semaphore("arrived");
  for (const char* cb : {"x_cb", "s_cb", "n_cb", "y_cb"}) p.cb(cb, 1, 1, DType::F32);
  return p;
}

inline const char* kRowMulticast = R"(
// y tile (r, c) = a tile (r, c) + b tile (r, 0): on each grid row the core at x = 0 reads the b
// tile once and multicasts it to the rest of its row.
void reader() {
  long long r = core_y(), c = core_x();
  auto bb = b_cb.scoped_reserve();
  if (c == 0) {
    dma(b.slice(r, 0), bb).wait();
    if (grid_cols() > 1) mcast(bb, b_cb, CoreRange{1, (int)r, grid_cols(), (int)r + 1}).wait();
  } else {
    mcast_receive(bb).wait();
  }
  auto ab = a_cb.scoped_reserve();
  dma(a.slice(r, c), ab).wait();
}
void compute() {
  auto bb = b_cb.scoped_wait();
  auto ab = a_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store(ab + bb);
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(core_y(), core_x())).wait();
}
)";

inline const char* kScaleElements = R"(
// y = 2 * x + 1 over an element-indexed tensor of any shape, 32x32-element pieces per core
void reader() {
  for (long long r = args().row0; r < x.rows(); r += 32 * num_cores())
    for (long long c = 0; c < x.cols(); c += 32) {
      auto blk = x_cb.scoped_reserve();
      long long h = x.rows() - r < 32 ? x.rows() - r : 32, w = x.cols() - c < 32 ? x.cols() - c : 32;
      dma(x.slice(r, c, h, w), blk).wait();
    }
}
void compute() {
  for (long long r = args().row0; r < x.rows(); r += 32 * num_cores())
    for (long long c = 0; c < x.cols(); c += 32) {
      auto in = x_cb.scoped_wait();
      auto out = y_cb.scoped_reserve();
      out.store(in * 2.0f + 1.0f);
    }
}
void writer() {
  for (long long r = args().row0; r < y.rows(); r += 32 * num_cores())
    for (long long c = 0; c < y.cols(); c += 32) {
      auto blk = y_cb.scoped_wait();
      long long h = y.rows() - r < 32 ? y.rows() - r : 32, w = y.cols() - c < 32 ? y.cols() - c : 32;
      dma(blk, y.slice(r, c, h, w)).wait();
    }
}
)";

// y (1 x C, f32) = the column sums of x * x + x over every row of x (element-indexed), blocks of
// BR rows summed across blocks by the compute role (ColSums); padded rows read 0 and add nothing.
inline const char* kColumnSums = R"(
void reader() {
  for (long long r = 0; r < x.rows(); r += BR) {
    auto blk = x_cb.scoped_reserve();
    dma(x.slice(r, 0, x.rows() - r < BR ? x.rows() - r : BR, x.cols()), blk).wait();
  }
}
void compute() {
  auto sums = col_sums(x_cb), plain = col_sums(x_cb), twice = col_sums(x_cb);
  for (long long r = 0; r < x.rows(); r += BR) {
    auto xb = x_cb.scoped_wait();
    sums.add(xb * xb + xb);
    auto db = d_cb.scoped_scratch();
    db.store(xb * 2.0f, sum_into(plain, xb));  // x's sums in the store's pass
    twice.add(db);                              // what the store wrote
  }
  decltype(sums)* all[] = {&sums, &plain, &twice};
  for (auto* s : all) {
    auto yb = y_cb.scoped_reserve();
    yb.store(*s);
  }
}
void writer() {
  for (long long k = 0; k < 3; k++) {
    auto yb = y_cb.scoped_wait();
    dma(yb, y.slice(k, 0, 1, y.cols())).wait();
  }
}
)";

// kColumnSums (or `src`, with its tensors and CBs) over x (N x C, C a multiple of 32) in blocks of br
// rows, `warps` compute warps on a GPU: y rows 0, 1, 2 = the column sums of x * x + x, x (sum_into)
// and 2 * x (the block stored with them).
inline tile::Program column_sums_program(const Tensor& x, int br, int warps, const char* src = kColumnSums) {
  const int ct = static_cast<int>(x.size(1) / 32);
  tile::Program p("column_sums", src, tile::Grid::cores(1));
  p.input("x", x, tile::Indexing::Elements).output("y", {3, x.size(1)}, DType::F32, tile::Indexing::Elements);
  p.cb("x_cb", 1, ct, DType::F32, 2, br)
      .cb("d_cb", 1, ct, DType::F32, 1, br)
      .cb("y_cb", 1, ct, DType::F32, 1, 1);
  p.constant("BR", br).gpu_compute_warps(warps);
  return p;
}

// y = expr over blocks of a, v (one block of each CB): the CB shapes say which broadcast applies
inline std::string bcast_kernel(const std::string& expr) {
  return R"(
void reader() {
  auto ab = a_cb.scoped_reserve();
  auto vb = v_cb.scoped_reserve();
  Transfer t1 = dma(a.slice(0, 0, a_cb.rows, a_cb.cols), ab);
  Transfer t2 = dma(v.slice(0, 0, v_cb.rows, v_cb.cols), vb);
  t1.wait();
  t2.wait();
}
void compute() {
  auto ab = a_cb.scoped_wait();
  auto vb = v_cb.scoped_wait();
  auto yb = y_cb.scoped_reserve();
  yb.store()" +
         expr + R"();
}
void writer() {
  auto yb = y_cb.scoped_wait();
  dma(yb, y.slice(0, 0, y_cb.rows, y_cb.cols)).wait();
}
)";
}

// Waits for two blocks of x_cb while the reader pushes one: a deadlock (the line marked BLOCKS).
inline const char* kMulticastOrder = R"(
// Core 0 multicasts the three tiles of x, in order, to core 1. Core 1's r_cb is a ring of two
// slots; its last two receives are posted into slots 1 and then 0 (the ring wrapped) before the
// sender sends again: payload k must land in the k-th receive posted, so y = x.
void reader() {
  if (core_x() == 0) {
    for (long long i = 0; i < 3; i++) {
      if (i == 1) ready.wait(1);  // both later receives are posted
      auto xb = x_cb.scoped_reserve();
      dma(x.slice(i, 0), xb).wait();
      mcast(xb, r_cb, CoreRange{1, 0, 2, 1}).wait();
    }
    return;
  }
  auto b1 = r_cb.reserve();
  mcast_receive(b1).wait();
  r_cb.push();
  auto b2 = r_cb.reserve();  // slot 1
  Transfer t2 = mcast_receive(b2);
  auto b3 = r_cb.reserve();  // slot 0 again, once compute popped the first payload
  Transfer t3 = mcast_receive(b3);
  ready.remote_inc(0, 0);
  t2.wait();
  r_cb.push();
  t3.wait();
  r_cb.push();
}
void compute() {
  for (int i = 0; i < 3; i++) {
    if (core_x() == 0) {
      auto xb = x_cb.scoped_wait();
    } else {
      auto rb = r_cb.scoped_wait();
      auto yb = y_cb.scoped_reserve();
      yb.store(rb);
    }
  }
}
void writer() {
  if (core_x() == 1)
    for (long long i = 0; i < 3; i++) {
      auto yb = y_cb.scoped_wait();
      dma(yb, y.slice(i, 0)).wait();
    }
}
)";

inline tile::Program multicast_order_program(const Tensor& x) {  // x: 96 x 32, three tiles
  tile::Program p("multicast_order", kMulticastOrder, tile::Grid::grid2d(1, 2));
  p.input("x", x).output("y", {96, 32}, DType::F32).semaphore("ready");
  p.cb("x_cb", 1, 1, DType::F32).cb("r_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return p;
}

// Core 0 multicasts the 64 tiles of x, in order, to core 1 through a ring of two slots: each
// payload goes into a slot core 1's compute role has just read and freed, so y = x only if no
// sender overwrites a slot before its reader is done with it.
inline const char* kMulticastStream = R"(
void reader() {
  for (long long i = 0; i < 64; i++) {
    if (core_x() == 0) {
      auto xb = x_cb.scoped_reserve();
      dma(x.slice(i, 0), xb).wait();
      mcast(xb, r_cb, CoreRange{1, 0, 2, 1}).wait();
    } else {
      auto rb = r_cb.scoped_reserve();
      mcast_receive(rb).wait();
    }
  }
}
void compute() {
  for (int i = 0; i < 64; i++) {
    if (core_x() == 0) {
      auto xb = x_cb.scoped_wait();
    } else {
      auto rb = r_cb.scoped_wait();
      auto yb = y_cb.scoped_reserve();
      yb.store(rb);
    }
  }
}
void writer() {
  if (core_x() == 1)
    for (long long i = 0; i < 64; i++) {
      auto yb = y_cb.scoped_wait();
      dma(yb, y.slice(i, 0)).wait();
    }
}
)";

inline tile::Program multicast_stream_program(const Tensor& x) {  // x: 2048 x 32, 64 tiles
  tile::Program p("multicast_stream", kMulticastStream, tile::Grid::grid2d(1, 2));
  p.input("x", x).output("y", {2048, 32}, DType::F32);
  p.cb("x_cb", 1, 1, DType::F32).cb("r_cb", 1, 1, DType::F32).cb("y_cb", 1, 1, DType::F32);
  return p;
}

inline const char* kReadThenSignal = R"(
// Core 1 reads `stage` (zeros) and then signals core 0, which only then overwrites stage with x:
// the read has landed once its wait() returned and the signal went out, so y (what core 1 read) is
// all zeros. Rows of 125 f32 elements are not 16-byte multiples: on a GPU they move element by
// element, the slowest reads there are.
void reader() {
  if (core_x() == 1) {
    auto sb = s_cb.scoped_reserve();
    dma(stage.slice(0, 0, 64, 125), sb).wait();
    done.remote_inc(0, 0);
  } else {
    auto xb = x_cb.scoped_reserve();
    dma(x.slice(0, 0, 64, 125), xb).wait();
  }
}
void compute() {
  if (core_x() == 1) {
    auto sb = s_cb.scoped_wait();
    auto yb = y_cb.scoped_reserve();
    yb.store(sb);
  } else {
    auto xb = x_cb.scoped_wait();
    auto wb = w_cb.scoped_reserve();
    wb.store(xb);
  }
}
void writer() {
  if (core_x() == 1) {
    auto yb = y_cb.scoped_wait();
    dma(yb, y.slice(0, 0, 64, 125)).wait();
  } else {
    auto wb = w_cb.scoped_wait();
    done.wait(1);
    dma(wb, stage.slice(0, 0, 64, 125)).wait();
  }
}
)";

inline tile::Program read_then_signal_program(const Tensor& x) {  // x: 64 x 125
  const tile::Indexing e = tile::Indexing::Elements;
  tile::Program p("read_then_signal", kReadThenSignal, tile::Grid::grid2d(1, 2));
  p.input("x", x, e).output("stage", {64, 125}, DType::F32, e).output("y", {64, 125}, DType::F32, e);
  p.semaphore("done");
  for (const char* cb : {"x_cb", "s_cb", "w_cb", "y_cb"}) p.cb(cb, 2, 4, DType::F32, 1);
  return p;
}

inline const char* kDeadlock = R"(
void reader() {
  auto xb = x_cb.scoped_reserve();
  dma(x.slice(0, 0), xb).wait();
}
void compute() {
  auto a = x_cb.scoped_wait();
  auto b = x_cb.scoped_wait();  // BLOCKS
  auto yb = y_cb.scoped_reserve();
  yb.store(a + b);
}
)";

// The shipped add kernel over a tensor pair, blocks of br x bc tiles.
inline tile::Program add_program(const Tensor& a, const Tensor& b, int cores, int br, int bc,
                                 DType t = DType::F32) {
  tile::Program p = tile::Program::from_library("eltwise/add.cpp", tile::Grid::cores(cores));
  p.input("a", a).input("b", b).output("y", a.shape(), t);
  p.cb("a_cb", br, bc, t).cb("b_cb", br, bc, t).cb("y_cb", br, bc, t);
  p.constant("block_rows", br).constant("block_cols", bc);
  p.runtime_args({"row0", "rows", "col0", "cols"});
  return p;
}

// The shipped matmul kernel on `cores` cores (blocks of bm x bk, bk x bn, bm x bn tiles).
inline tile::Program matmul_program(const Tensor& a, const Tensor& b, int cores, int bm, int bk, int bn,
                                    DType t) {
  int64_t M = a.size(0), N = b.size(1);
  tile::Program p = tile::Program::from_library("matmul/matmul.cpp", tile::Grid::cores(cores));
  p.input("a", a).input("b", b).output("y", {M, N}, t);
  p.cb("a_cb", bm, bk, t).cb("b_cb", bk, bn, t).cb("y_cb", bm, bn, t);
  p.constant("BM", bm).constant("BK", bk).constant("BN", bn);
  p.runtime_args({"start", "count"});
  auto w = tile::split_work((M / 32 / bm) * (N / 32 / bn), cores);
  for (int c = 0; c < cores; c++) p.set_runtime_args(c, {w[c].start, w[c].count});
  return p;
}

}  // namespace kiln::tile_examples
