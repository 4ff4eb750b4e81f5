// Host side of the layernorm kernels (kernels/layernorm): forward over rows, and backward with its
// three weight-gradient strategies (one core, over columns, over rows with a cross-core reduction).
#include <algorithm>
#include <bit>
#include <map>
#include <mutex>
#include <tuple>

#include "kiln/error.h"
#include "kiln/tile_ops.h"
#include "tile/ops/kept.h"
#include "tile/ops/programs.h"
#include "tile/ops/view2d.h"
#include "tile/program_desc.h"

namespace kiln::tile {

namespace {

DType data_dtype(const char* op, const Tensor& x) {
  if (x.dtype() != DType::F32 && x.dtype() != DType::BF16)
    throw Error(std::string("kiln.tile: ") + op + ": x has dtype " + dtype_name(x.dtype()) +
                "; the tile layernorm kernels take f32 or bf16");
  return x.dtype();
}

void check_row(const char* op, const char* what, const Tensor& v, int64_t C) {
  if (v.numel() != C)
    throw Error(std::string("kiln.tile: ") + op + ": " + what + " of shape " + shape_str(v.shape()) +
                " for rows of " + std::to_string(C) + " elements");
}

}  // namespace

Tensor ops::constant_row(double value, int64_t C, DType t, Device device) {
  static std::mutex mu;
  // kept to the end of the process (device memory is not freed after the driver has gone)
  static auto* made = new std::map<std::tuple<double, int64_t, DType, int>, Tensor>;
  std::lock_guard<std::mutex> l(mu);
  Tensor& r = (*made)[{value, C, t, device.code()}];  // every call looks it up: no string made
  if (!r.defined()) {
    r = (ones({1, C}, {.device = device}) * value).to(t);
    r.realize();
  }
  return r;
}

namespace {

// Rows (tile rows, or single rows) split over the cores in whole groups of `group` (the last one
// may be short), and the cores' pieces of the weight gradients.
void set_row_split(Program& p, int64_t rows, int cores, const std::vector<Work>& pieces, int64_t group = 1) {
  auto w = split_work((rows + group - 1) / group, cores);
  for (int k = 0; k < cores; k++) {
    const int64_t start = std::min(rows, w[k].start * group),
                  count = std::min(rows - start, w[k].count * group);
    p.set_runtime_args(k, {start, count, pieces[k].start, pieces[k].count});
  }
}

}  // namespace

namespace ops {

namespace {

// Each program's inputs, as its builder declares them and a later call binds them: the data in
// x's dtype, the statistics as N x 1 columns (1 x N rows for the backward's dx kernels: a block's
// statistics move as one copy), the gradients to accumulate into in dweight_in's.
Inputs forward_inputs(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const DType t = x.dtype();
  return {{"x", x},
          {"w", weight.to(t)},
          {"b", bias.to(t)},
          {"valid", ops::constant_row(1.0, view2d(x).second, t, x.device())}};  // the column mask
}

Inputs backward_inputs(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                       const Tensor& rstd, const Tensor& dw_in, const Tensor& db_in) {
  const DType t = x.dtype();
  const int64_t N = view2d(x).first;
  return {{"x", x},
          {"dout", dout.to(t)},
          {"w", weight.to(t)},
          {"mean", mean.reshape({1, N})},
          {"rstd", rstd.reshape({1, N})},
          {"dweight_in", dw_in},
          {"dbias_in", db_in.to(dw_in.dtype())}};
}

Inputs wgrad_cols_inputs(const Tensor& dout, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dw_in, const Tensor& db_in) {
  const int64_t N = view2d(x).first;
  return {{"x", x},
          {"dout", dout.to(x.dtype())},
          {"mean", mean.reshape({N, 1})},
          {"rstd", rstd.reshape({N, 1})},
          {"dweight_in", dw_in},
          {"dbias_in", db_in.to(dw_in.dtype())}};
}

void declare(Program& p, const Inputs& inputs, Indexing indexing) {
  for (auto& [name, t] : inputs) p.input(name, t, indexing);
}

}  // namespace

// The rows kernels' stores are long chains of shared-memory reads: 8 compute warps on a GPU overlap
// more of them than 4 (measured on an H100: forward 0.38 -> 0.34 ms, backward 0.89 -> 0.83 ms at
// 32768 x 768).
constexpr int kComputeWarps = 8;

// Compute warps for the rows kernels' blocks of `br` rows: where each warp owns whole rows (br a
// multiple of the warps), their stores need no barrier between warps (kernel_eval.h: row_local).
int rows_compute_warps(int br) { return br >= 8 ? 8 : br >= 4 ? 4 : kComputeWarps; }

// CB memory per core that lets a grid of `cores` share the multiprocessors of an H100 or H200 (132,
// with 228 KB of shared memory each, every block also holding the runtime's 2 KB and 1 KB the GPU
// keeps): several cores per multiprocessor hide each other's waits (measured on an H200: the rows
// forward at 1 core per SM issued one instruction per warp every 15 cycles), and a grid whose cores
// talk to each other must be resident at once.
int64_t cb_budget(int cores) {
  const int64_t per_sm = std::max<int64_t>(1, (cores + kHopperSMs - 1) / kHopperSMs);
  return std::min(kCBBudget, kSharedPerSM / per_sm - kStaticSharedReserve - kSharedKeptPerBlock);
}

// Block size of the rows kernels (kernels/layernorm/*_rows.cpp): rows per block (0: one row does not
// fit, the chunked kernels then stream it) and slots of the streamed inputs' CBs.
struct RowBlocks {
  int rows = 0, slots = 2;
};

// The most rows of 16, 8, 4, 2, 1 whose blocks stay within 32 KB and whose CBs, streamed inputs
// double-buffered, fit `budget_first`, else one core per SM (kCBBudget); then three slots of the
// streamed inputs where that size still fits the same budget. declare(p, rows, slots) declares the
// CBs on a scratch program.
template <class Declare>
RowBlocks search_row_blocks(int64_t row_bytes, int64_t budget_first, Declare declare) {
  auto fits = [&](int br, int slots, int64_t budget) {
    Program p("cb_budget", "", Grid::cores(1));
    declare(p, br, slots);
    return p.cb_bytes() <= budget;
  };
  for (int64_t budget : {budget_first, kCBBudget})
    for (int br = 16; br >= 1; br /= 2) {
      if (br > 1 && br * row_bytes > 32 * 1024) continue;
      if (fits(br, 2, budget)) return {br, fits(br, 3, budget) ? 3 : 2};
    }
  return {};
}

// search_row_blocks, its answer kept per `key` (the kernel and what sizes its CBs) and budget, so
// a call after the first builds no scratch programs.
template <class Declare>
RowBlocks row_blocks(const std::string& key, int64_t row_bytes, int64_t budget, Declare declare) {
  static std::mutex mu;
  static std::map<std::string, RowBlocks> known;
  {
    std::lock_guard<std::mutex> l(mu);
    if (auto it = known.find(key + " " + std::to_string(budget)); it != known.end()) return it->second;
  }
  RowBlocks r = search_row_blocks(row_bytes, budget, declare);
  std::lock_guard<std::mutex> l(mu);
  known[key + " " + std::to_string(budget)] = r;
  return r;
}

Program layernorm_forward_program(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                  int cores) {
  DType t = x.dtype(), f32 = DType::F32;
  auto [N, C] = view2d(x);
  int64_t CT = tiles(C);
  auto rows_cbs = [&](Program& p, int br, int slots) {
    p.gpu_compute_warps(rows_compute_warps(br));
    p.cb("x_cb", 1, CT, t, slots, br).cb("out_cb", 1, CT, t, 2, br);
    p.cb("w_cb", 1, CT, t, 1, 1).cb("b_cb", 1, CT, t, 1, 1);  // row vectors, kept
    p.cb("valid_cb", 1, C % kTileSize ? CT : 1, t, 1, 1);     // the column mask, where C needs one
    p.cb("mean_cb", 1, 1, f32, 2, br).cb("rstd_cb", 1, 1, f32, 2, br);
  };
  if (auto [br, slots] = row_blocks("forward " + std::to_string(C) + " " + dtype_name(t), C * dtype_size(t),
                                    cb_budget(cores), rows_cbs);
      br) {
    Program p = Program::from_library("layernorm/forward_rows.cpp", Grid::cores(cores));
    p.roles({"reader", "writer", "stats_writer"}, "compute");
    const Indexing e = Indexing::Elements;
    declare(p, forward_inputs(x, weight, bias), e);
    p.output("out", x.shape(), t, e, Fill::None)
        .output("mean", {N, 1}, f32, e, Fill::None)
        .output("rstd", {N, 1}, f32, e, Fill::None);
    rows_cbs(p, br, slots);
    p.constant("CT", CT).constant("BR", br).constant("n_cols", C);
    p.constant("eps_bits", std::bit_cast<uint32_t>(static_cast<float>(eps)));
    p.runtime_args({"start", "count"});
    auto w = split_work(N, cores);  // rows: shares within a row of each other
    for (int k = 0; k < cores; k++) p.set_runtime_args(k, {w[k].start, w[k].count});
    return p;
  }
  auto cbs = [&](Program& p, int K) {
    p.gpu_compute_warps(kComputeWarps);
    for (const char* s : {"x_cb", "w_cb", "b_cb", "out_cb"}) p.cb(s, 1, K, t);  // streamed
    p.cb("valid_cb", 1, K, t, 1);
    p.cb("mean_cb", 1, 1, f32).cb("rstd_cb", 1, 1, f32);
    p.cb("sq_dev_cb", 1, 1, f32, 1).cb("chunk_mean_cb", 1, 1, f32, 1);
  };
  int K = block_within_budget(CT, 8, cbs);  // rows stream in chunks of K tiles, whatever C is
  Program p = Program::from_library("layernorm/forward.cpp", Grid::cores(cores));
  declare(p, forward_inputs(x, weight, bias), Indexing::Tiles);
  // every element of the outputs is written
  p.output("out", x.shape(), t, Indexing::Tiles, Fill::None)
      .output("mean", {N, 1}, f32, Indexing::Tiles, Fill::None)
      .output("rstd", {N, 1}, f32, Indexing::Tiles, Fill::None);
  cbs(p, K);
  p.constant("CT", CT).constant("K", K).constant("n_cols", C);
  p.constant("eps_bits", std::bit_cast<uint32_t>(static_cast<float>(eps)));
  p.runtime_args({"start", "count"});
  auto w = split_work(tiles(N), cores);
  for (int k = 0; k < cores; k++) p.set_runtime_args(k, {w[k].start, w[k].count});
  return p;
}

Program layernorm_backward_program(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, const Tensor& dw_in,
                                   const Tensor& db_in, bool wgrad, Grid grid) {
  DType t = x.dtype(), gt = dw_in.dtype(), f32 = DType::F32;
  auto [N, C] = view2d(x);
  int64_t CT = tiles(C);
  const int cores = grid.size();
  // the cross-core reduction reads each piece's partial sums (a row per core) 32 rows a block: with a
  // slot for each (up to 8), all of them are in flight at once
  const int part_slots = static_cast<int>(std::clamp<int64_t>(tiles(wgrad ? cores : 1), 2, 8));
  auto rows_cbs = [&](Program& p, int br, int slots) {
    p.gpu_compute_warps(rows_compute_warps(br));
    p.cb("x_cb", 1, CT, t, slots, br).cb("dout_cb", 1, CT, t, slots, br).cb("dx_cb", 1, CT, t, 2, br);
    p.cb("mean_cb", 1, 1, f32, slots, 1).cb("rstd_cb", 1, 1, f32, slots, 1);  // row vectors
    p.cb("w_cb", 1, CT, t, 1, 1);                                             // a row vector, kept
    p.cb("means_cb", 1, 1, f32, 1, br);  // the two row means side by side
    // the core's weight-gradient sums (row vectors), then the grid reduction tile by tile
    p.cb("dw_part_cb", 1, CT, f32, 1, 1).cb("db_part_cb", 1, CT, f32, 1, 1);
    p.cb("grad_in_cb", 1, 1, gt, 1, 1)
        .cb("part_cb", 1, 1, f32, part_slots)
        .cb("tile_acc_cb", 1, 1, f32, 1, 1);
    p.cb("grad_out_cb", 1, 1, gt, 1, 1);
  };
  if (auto [br, slots] = row_blocks("backward " + std::to_string(C) + " " + dtype_name(t) + " " +
                                        dtype_name(gt) + " " + std::to_string(part_slots),
                                    C * dtype_size(t), cb_budget(cores), rows_cbs);
      br) {  // whole rows in a block
    Program p = Program::from_library("layernorm/backward_rows.cpp", grid);
    p.roles({"reader", "dout_reader", "writer"}, "compute");
    const Indexing e = Indexing::Elements;
    declare(p, backward_inputs(dout, x, weight, mean, rstd, dw_in, db_in), e);
    // every element written (dweight and dbias piece by piece; without WGRAD they are not returned)
    p.output("dx", x.shape(), t, e, Fill::None)
        .output("dweight", {C}, gt, e, Fill::None)
        .output("dbias", {C}, gt, e, Fill::None);
    // the weight gradients' partial sums: a row of C per core (dx alone needs none), each written whole
    const int64_t part_rows = wgrad ? cores : 1;
    p.output("part_dw", {part_rows, C}, f32, e, Fill::None)
        .output("part_db", {part_rows, C}, f32, e, Fill::None);
    rows_cbs(p, br, slots);
    p.semaphore("arrived");
    p.constant("CT", CT).constant("BR", br).constant("n_cols", C).constant("WGRAD", wgrad ? 1 : 0);
    p.runtime_args({"start", "count", "piece_start", "piece_count"});
    // rows in fours (shares within four rows of each other): every block's statistics then start on
    // 16 bytes, so a block of a multiple of 4 rows reads them with one bulk copy
    set_row_split(p, N, cores, split_work(wgrad ? 2 * CT : 0, cores), 4);
    return p;
  }
  auto cbs = [&](Program& p, int K) {
    p.gpu_compute_warps(kComputeWarps);
    for (const char* s : {"x_cb", "dout_cb", "w_cb", "dx_cb"}) p.cb(s, 1, K, t);  // streamed
    p.cb("mean_cb", 1, 1, f32).cb("rstd_cb", 1, 1, f32);
    p.cb("dnorm_mean_cb", 1, 1, f32, 1).cb("dnorm_norm_mean_cb", 1, 1, f32, 1);
    // weight gradients: partial sums streamed out with dx, then the grid reduction tile by tile
    p.cb("part_sum_cb", 1, K, f32);
    p.cb("grad_in_cb", 1, 1, gt, 1).cb("part_cb", 1, 1, f32).cb("tile_acc_cb", 1, 1, f32, 1);
    p.cb("grad_out_cb", 1, 1, gt, 1);
  };
  int K = block_within_budget(CT, 8, cbs);  // rows stream in chunks of K tiles, whatever C is
  Program p = Program::from_library("layernorm/backward.cpp", grid);
  declare(p, backward_inputs(dout, x, weight, mean, rstd, dw_in, db_in), Indexing::Tiles);
  p.output("dx", x.shape(), t, Indexing::Tiles, Fill::None)
      .output("dweight", {C}, gt)
      .output("dbias", {C}, gt);
  // the weight gradients' partial sums: a row of C per tile row of x (dx alone needs none), each
  // written whole
  const int64_t part_rows = wgrad ? tiles(N) : 1;
  p.output("part_dw", {part_rows, C}, f32, Indexing::Elements, Fill::None)
      .output("part_db", {part_rows, C}, f32, Indexing::Elements, Fill::None);
  cbs(p, K);
  p.semaphore("arrived");
  p.constant("CT", CT).constant("K", K).constant("n_cols", C).constant("WGRAD", wgrad ? 1 : 0);
  p.runtime_args({"start", "count", "piece_start", "piece_count"});
  set_row_split(p, tiles(N), cores, split_work(wgrad ? 2 * CT : 0, cores));  // dweight's and dbias's tiles
  return p;
}

Program layernorm_wgrad_cols_program(const Tensor& dout, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dw_in, const Tensor& db_in,
                                     int cores) {
  DType t = x.dtype(), gt = dw_in.dtype(), f32 = DType::F32;
  auto [N, C] = view2d(x);
  int64_t RT = tiles(N), CT = tiles(C);
  // blocks of BR x 1 tiles down a column: their size does not depend on C
  auto cbs = [&](Program& p, int br) {
    p.cb("x_cb", br, 1, t).cb("dout_cb", br, 1, t).cb("mean_cb", br, 1, f32).cb("rstd_cb", br, 1, f32);
    p.cb("dw_in_cb", 1, 1, gt)
        .cb("db_in_cb", 1, 1, gt)
        .cb("dw_acc_cb", 1, 1, f32, 1)
        .cb("db_acc_cb", 1, 1, f32, 1);
    p.cb("dw_out_cb", 1, 1, gt).cb("db_out_cb", 1, 1, gt);
  };
  int br = block_within_budget(RT, 8, cbs);
  Program p = Program::from_library("layernorm/backward_wgrad_cols.cpp", Grid::cores(cores));
  declare(p, wgrad_cols_inputs(dout, x, mean, rstd, dw_in, db_in), Indexing::Tiles);
  p.output("dweight", {C}, gt).output("dbias", {C}, gt);
  cbs(p, br);
  p.constant("BR", br).runtime_args({"start", "count"});
  auto w = split_work(CT, cores);
  for (int k = 0; k < cores; k++) p.set_runtime_args(k, {w[k].start, w[k].count});
  return p;
}

}  // namespace ops

namespace {

// backward.cpp on `grid`: dx, and with wgrad the weight gradients reduced across the grid.
LayerNormBackward backward_rows(const Tensor& dout, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                const Tensor& rstd, const Tensor& dw_in, const Tensor& db_in, bool wgrad,
                                Grid grid) {
  auto [N, C] = ops::view2d(x);
  std::vector<int64_t> key = ops::key_of(ops::Kernel::LayerNormBackward, x);
  key.insert(key.end(), {N, C, static_cast<int64_t>(dw_in.dtype()), static_cast<int64_t>(mean.dtype()),
                         static_cast<int64_t>(rstd.dtype()), wgrad, grid.is_2d, grid.rows, grid.cols});
  auto r = ops::run_kept(
      key,
      [&] { return ops::layernorm_backward_program(dout, x, weight, mean, rstd, dw_in, db_in, wgrad, grid); },
      ops::backward_inputs(dout, x, weight, mean, rstd, dw_in, db_in), {"dx", "dweight", "dbias"});
  if (!wgrad) return {r[0], Tensor(), Tensor()};
  return {r[0], r[1], r[2]};
}

// backward_wgrad_cols.cpp on `cores` cores: dweight and dbias, each core a range of tile columns.
std::pair<Tensor, Tensor> wgrad_cols(const Tensor& dout, const Tensor& x, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dw_in, const Tensor& db_in,
                                     int cores) {
  auto [N, C] = ops::view2d(x);
  std::vector<int64_t> key = ops::key_of(ops::Kernel::LayerNormWgradCols, x);
  key.insert(key.end(), {N, C, static_cast<int64_t>(dw_in.dtype()), static_cast<int64_t>(mean.dtype()),
                         static_cast<int64_t>(rstd.dtype()), cores});
  auto r = ops::run_kept(
      key, [&] { return ops::layernorm_wgrad_cols_program(dout, x, mean, rstd, dw_in, db_in, cores); },
      ops::wgrad_cols_inputs(dout, x, mean, rstd, dw_in, db_in), {"dweight", "dbias"});
  return {r[0], r[1]};
}

}  // namespace

LayerNormForward layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                   int cores) {
  data_dtype("layernorm_forward", x);
  auto [N, C] = ops::view2d(x);
  check_row("layernorm_forward", "weight", weight, C);
  check_row("layernorm_forward", "bias", bias, C);
  std::vector<int64_t> key = ops::key_of(ops::Kernel::LayerNormForward, x);
  key.insert(key.end(), {N, C, std::bit_cast<int64_t>(eps), cores});
  auto r = ops::run_kept(key, [&] { return ops::layernorm_forward_program(x, weight, bias, eps, cores); },
                         ops::forward_inputs(x, weight, bias), {"out", "mean", "rstd"});
  return {r[0], r[1].reshape({N}), r[2].reshape({N})};
}

LayerNormBackward layernorm_backward(const Tensor& dout, const Tensor& x, const Tensor& weight,
                                     const Tensor& mean, const Tensor& rstd, const Tensor& dweight_in,
                                     const Tensor& dbias_in, WeightGrads strategy, Grid grid) {
  data_dtype("layernorm_backward", x);
  auto [N, C] = ops::view2d(x);
  if (dout.shape() != x.shape())
    throw Error("kiln.tile: layernorm_backward: dout " + shape_str(dout.shape()) + " for x " +
                shape_str(x.shape()));
  check_row("layernorm_backward", "weight", weight, C);
  check_row("layernorm_backward", "mean", mean, N);
  check_row("layernorm_backward", "rstd", rstd, N);
  Tensor dw_in =
      dweight_in.defined() ? dweight_in.reshape({C}) : ops::constant_row(0.0, C, weight.dtype(), x.device());
  Tensor db_in =
      dbias_in.defined() ? dbias_in.reshape({C}) : ops::constant_row(0.0, C, dw_in.dtype(), x.device());
  check_row("layernorm_backward", "dweight_in", dw_in, C);
  check_row("layernorm_backward", "dbias_in", db_in, C);
  switch (strategy) {
    case WeightGrads::SingleCore:
      return backward_rows(dout, x, weight, mean, rstd, dw_in, db_in, true, Grid::grid2d(1, 1));
    case WeightGrads::OverRows:
      if (!grid.is_2d)
        throw Error(
            "kiln.tile: layernorm_backward: WeightGrads::OverRows reduces across a 2D grid; pass "
            "Grid::grid2d(rows, cols), not a plain core count");
      return backward_rows(dout, x, weight, mean, rstd, dw_in, db_in, true, grid);
    case WeightGrads::OverColumns: {
      LayerNormBackward r =
          backward_rows(dout, x, weight, mean, rstd, dw_in, db_in, false, Grid::grid2d(1, grid.size()));
      std::tie(r.dweight, r.dbias) = wgrad_cols(dout, x, mean, rstd, dw_in, db_in, grid.size());
      return r;
    }
  }
  throw Error("kiln.tile: layernorm_backward: unknown strategy");
}

}  // namespace kiln::tile
