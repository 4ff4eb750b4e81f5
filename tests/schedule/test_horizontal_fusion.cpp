// Horizontal fusion (schedule/horizontal_fusion.cpp), tested by counting the kernels a realize runs:
// independent flat elementwise kernels become one kernel of segments, with the values they had
// apart; kernels that depend on each other or index their inputs otherwise keep their own.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include "codegen/passes.h"
#include "helpers.h"
#include "hfuse_scope.h"
#include "ir/node.h"
#include "schedule/schedule.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The kernels one realize of ts runs, and their values (each checked against the reference).
int64_t kernels_for(std::vector<Tensor> ts) {
  int64_t before = stats().kernels_run;
  realize(ts);
  int64_t n = stats().kernels_run - before;
  for (auto& t : ts) expect_matches_reference(t, 1e-5, 1e-6);
  return n;
}

using kiln::testing::with_hfuse;

Tensor r(Shape s, uint64_t seed, DType t = DType::F32) { return random_tensor(s, t, -2, 2, seed); }

}  // namespace

TEST(HorizontalFusion, IndependentElementwiseKernelsAreOne) {
  // sizes of 2, not a multiple of a vector, and large; another dtype; a 2-D output
  Tensor a = r({2}, 1), b = r({37}, 2), c = r({1000}, 3), d = r({7, 9}, 4, DType::F64),
         e = r({13}, 5, DType::BF16);
  auto make = [&] { return std::vector<Tensor>{a * 2 + 1, b.exp(), c * c, d.sqrt().abs(), e * 3}; };
  EXPECT_EQ(with_hfuse(true, [&] { return kernels_for(make()); }), 1);
  // by default (KILN_HFUSE=1) only a step a kiln::Jit records is grouped, not a one-off realize
  kiln::testing::HFuse scope(false);
  settings().hfuse = 1;
  EXPECT_EQ(kernels_for(make()), 5);
  Jit step([&](const std::vector<Tensor>&) {
    std::vector<Tensor> outs = make();
    return outs;
  });
  int64_t before = stats().kernels_run;
  step({});
  EXPECT_EQ(stats().kernels_run - before, 1);
  EXPECT_EQ(with_hfuse(false, [&] { return kernels_for(make()); }), 5);
}

TEST(HorizontalFusion, ValuesAreTheSameBitsAsApart) {
  std::vector<Tensor> in;
  for (int64_t n : {2, 3, 5, 17, 64, 1023, 4099}) in.push_back(r({n}, static_cast<uint64_t>(n)));
  auto run = [&] {
    std::vector<Tensor> outs;
    for (auto& x : in) outs.push_back((x * 0.3 + 1).exp() / (x * x + 0.5).sqrt());
    realize(outs);
    std::vector<std::vector<float>> v;
    for (auto& o : outs) v.push_back(o.to_vector<float>());
    return v;
  };
  EXPECT_EQ(with_hfuse(true, run), with_hfuse(false, run));
}

TEST(HorizontalFusion, AKernelReadingAnotherIsNotInItsGroup) {
  Tensor a = r({64}, 6), b = r({64}, 7);
  auto make = [&] {
    Tensor u = (a * 2).contiguous();  // read by v, reversed (so v is no output of u's kernel)
    Tensor v = u.flip({0}) + 1;
    Tensor w = b * 3;  // independent of both
    return std::vector<Tensor>{u, v, w};
  };
  EXPECT_EQ(with_hfuse(false, [&] { return kernels_for(make()); }), 3);
  EXPECT_EQ(with_hfuse(true, [&] { return kernels_for(make()); }), 2);  // u; then v with w
}

TEST(HorizontalFusion, BroadcastAndScalarKernelsKeepTheirOwn) {
  // a broadcast would cost a modulo per element in the flat loop; a one-element output simplifies
  // its loop away
  Tensor x = r({8, 16}, 8), bias = r({16}, 9), y = r({1}, 10), z = r({100}, 11);
  EXPECT_EQ(kernels_for({x + bias, y * 2, z.exp()}), 3);
}

TEST(HorizontalFusion, SegmentsAreBoundedPerKernel) {
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < schedule::kMaxSegments + 3; i++) outs.push_back(r({5 + i}, 100 + i) * 2);
  EXPECT_EQ(with_hfuse(true, [&] { return kernels_for(outs); }), 2);
}

TEST(HorizontalFusion, CSourceRunsEachSegmentOverItsPartOfTheThreadsRange) {
  using namespace kiln::ir;
  NodeRef s0 = segment_range(0, 10, 0), s1 = segment_range(1, 7, 10);
  auto g = [](int64_t i) { return make(Op::DEFINE_GLOBAL, DType::F32, {}, {}, {i}); };
  auto store = [&](int64_t out, int64_t in, const NodeRef& seg) {
    NodeRef v = make(Op::LOAD, DType::F32, {}, {g(in), seg});
    return make(Op::STORE, DType::F32, {}, {g(out), seg, v * const_float(2, DType::F32)});
  };
  NodeRef ast = make(Op::SINK, DType::F32, {}, {store(0, 2, s0), store(1, 3, s1)});
  codegen::Lowered c = codegen::lower(ast, codegen::Target::CPU, {});
  EXPECT_EQ(c.program.outer_size, 17);
  EXPECT_NE(c.source.find("sidx0 = (start <= 0LL ? 0LL"), std::string::npos) << c.source;
  EXPECT_NE(c.source.find("sidx1 = (start <= 10LL ? 0LL"), std::string::npos) << c.source;
  codegen::Lowered cu = codegen::lower(ast, codegen::Target::CUDA, {});
  EXPECT_EQ(cu.launch.work, 17);
  EXPECT_NE(cu.source.find("sidx0 < 10LL; sidx0 += (int64_t)gridDim.x * blockDim.x"), std::string::npos)
      << cu.source;
  EXPECT_NE(cu.source.find("sidx1 < 7LL"), std::string::npos) << cu.source;
}
