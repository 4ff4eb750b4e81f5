// Host side of y = a * b + tanh(c) (kernels/broadcast/mul_add_tanh_{rows,cols}.cpp): block shapes,
// the split of block rows or block columns over the cores.
#include "kiln/error.h"
#include "kiln/tile_ops.h"
#include "tile/ops/kept.h"
#include "tile/ops/programs.h"
#include "tile/ops/view2d.h"

namespace kiln::tile {

namespace ops {

namespace {

// a, b and c in a's dtype, c as one row (as the program declares them and later calls bind them).
Inputs mul_add_tanh_inputs(const Tensor& a, const Tensor& b, const Tensor& c) {
  const DType t = a.dtype();
  return {{"a", a}, {"b", b.to(t)}, {"cvec", c.reshape({1, view2d(a).second}).to(t)}};
}

}  // namespace

Program mul_add_tanh_program(const Tensor& a, const Tensor& b, const Tensor& c, Split split, int cores) {
  auto [M, N] = view2d(a);
  DType t = a.dtype();
  int64_t RT = tiles(M), CT = tiles(N);
  bool rows = split == Split::Rows;
  // rows: thin blocks along a row (c is re-read per block row anyway); cols: tall blocks down a
  // column; as long as the CBs stay within budget
  auto cbs = [&](Program& p, int br, int bc) {
    p.cb("a_cb", br, bc, t).cb("b_cb", br, bc, t).cb("c_cb", 1, bc, t).cb("y_cb", br, bc, t);
    if (!rows) p.cb("tc_cb", 1, bc, DType::F32, 1);
  };
  int br = 1, bc = 1;
  if (rows)
    bc = block_within_budget(CT, 8, [&](Program& p, int k) { cbs(p, 1, k); });
  else
    br = block_within_budget(RT, 8, [&](Program& p, int k) { cbs(p, k, 1); });
  Program p = Program::from_library(
      rows ? "broadcast/mul_add_tanh_rows.cpp" : "broadcast/mul_add_tanh_cols.cpp", Grid::cores(cores));
  for (auto& [name, v] : mul_add_tanh_inputs(a, b, c)) p.input(name, v);
  p.output("y", a.shape(), t);
  cbs(p, br, bc);
  p.constant("BR", br).constant("BC", bc).runtime_args({"start", "count"});
  auto w = split_work(rows ? RT / br : CT / bc, cores);
  for (int k = 0; k < cores; k++) p.set_runtime_args(k, {w[k].start, w[k].count});
  return p;
}

}  // namespace ops

Tensor mul_add_tanh(const Tensor& a, const Tensor& b, const Tensor& c, Split split, int cores) {
  auto [M, N] = ops::view2d(a);
  if (b.shape() != a.shape() || c.numel() != N)
    throw Error("kiln.tile: mul_add_tanh: a " + shape_str(a.shape()) + " and b " + shape_str(b.shape()) +
                " must have one shape and c " + shape_str(c.shape()) + " one row of " + std::to_string(N) +
                " elements");
  std::vector<int64_t> key = ops::key_of(ops::Kernel::MulAddTanh, a);
  key.insert(key.end(), {M, N, split == Split::Rows, cores});
  return ops::run_kept(key, [&] { return ops::mul_add_tanh_program(a, b, c, split, cores); },
                       ops::mul_add_tanh_inputs(a, b, c), {"y"})[0];
}

}  // namespace kiln::tile
