// The ref device's interpreter (src/runtime/ref) against the CPU backend's compiled C on the same
// linear programs: hand-built programs for the ops and dtypes the C renderer handles (integer
// wrapping, division by zero, shifts, NaN in MAX, 16-bit floats, casts, bitcasts, the renderer's
// fusions) must agree bit for bit; frontend kernels (register lanes, chunked sums, scatter-adds)
// within rounding. Then what ref adds: loads and stores outside their buffer are errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>
#include <kiln/tile.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codegen/passes.h"
#include "codegen/render_c.h"
#include "helpers.h"
#include "runtime/backend.h"
#include "runtime/ref/program.h"

namespace kiln::testing {
namespace {

using codegen::Program;
using ir::Op;

const Device kRef{Device::Kind::REF, 0};
constexpr int64_t kN = 24;  // elements each program computes

// A program over [0, kN): loads of the inputs, then one output per instruction asked for.
struct Builder {
  Program p;
  int range = -1;
  std::vector<int> loads;

  Builder(const std::string& name, const std::vector<DType>& inputs) {
    p.name = p.symbol = "ref_check_" + name;
    p.outer_size = kN;
    std::vector<int> globals;
    for (DType t : inputs) globals.push_back(global(t, false));
    range = add(Op::RANGE, DType::I64, {}, {0, kN, 0, 1});
    for (size_t k = 0; k < inputs.size(); k++) loads.push_back(add(Op::LOAD, inputs[k], {globals[k], range}));
  }
  int add(Op op, DType t, std::vector<int> src = {}, std::vector<int64_t> arg = {}, double f = 0) {
    p.insts.push_back({op, t, std::move(src), std::move(arg), f});
    return static_cast<int>(p.insts.size()) - 1;
  }
  int global(DType t, bool written) {
    p.globals.push_back(t);
    p.written.push_back(written);
    return add(Op::DEFINE_GLOBAL, t, {}, {static_cast<int64_t>(p.globals.size() - 1)});
  }
  // out[i] = v: a new output buffer, stored to inside the loop
  void output(int v) {
    // DEFINE_GLOBALs may come anywhere before their use: the renderers read them by index
    int g = global(p.insts[static_cast<size_t>(v)].dtype, true);
    add(Op::STORE, p.insts[static_cast<size_t>(v)].dtype, {g, range, v});
  }
  Program done() {
    add(Op::ENDRANGE, DType::I64);
    return std::move(p);
  }
};

// A program with the bytes of its inputs (kN elements each).
struct Case {
  Program program;
  std::vector<std::vector<uint8_t>> inputs;
};

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// kN values of dtype t taken (cycling) from `values`, converted as a C cast would.
std::vector<uint8_t> values_of(DType t, const std::vector<double>& values) {
  std::vector<double> v(kN);
  for (int64_t i = 0; i < kN; i++) v[static_cast<size_t>(i)] = values[static_cast<size_t>(i) % values.size()];
  Buffer b(t, kN);
  for (int64_t i = 0; i < kN; i++) {
    double x = v[static_cast<size_t>(i)];
    if (is_float(t))
      b.set_f(i, x);
    else
      b.set_i(i, static_cast<int64_t>(x));
  }
  std::vector<uint8_t> out(b.nbytes());
  std::memcpy(out.data(), b.data, out.size());
  return out;
}

// Every case's outputs (their bytes, in order), loaded in one call and run on device d.
std::vector<std::vector<std::vector<uint8_t>>> run_all(Device d, const std::vector<Case>& cases) {
  runtime::Backend& b = runtime::backend(d);
  std::vector<std::shared_ptr<const codegen::Lowered>> lowered;
  for (const Case& c : cases) {
    auto l = std::make_shared<codegen::Lowered>();
    l->program = c.program;
    l->source = codegen::render_c(c.program);
    lowered.push_back(l);
  }
  std::vector<runtime::Launch> launches = b.load(lowered);
  std::vector<std::vector<std::vector<uint8_t>>> out;
  for (size_t i = 0; i < cases.size(); i++) {
    const Program& p = cases[i].program;
    std::vector<std::unique_ptr<Buffer>> bufs;
    std::vector<void*> args;
    size_t in = 0;
    for (size_t g = 0; g < p.globals.size(); g++) {
      bufs.push_back(std::make_unique<Buffer>(p.globals[g], kN, d));
      if (!p.written[g]) b.upload(bufs.back()->data, cases[i].inputs.at(in++).data(), bufs.back()->nbytes());
      args.push_back(bufs.back()->data);
    }
    b.launcher().launch(launches[i], args.data());
    out.emplace_back();
    for (size_t g = 0; g < p.globals.size(); g++)
      if (p.written[g]) {
        out.back().emplace_back(bufs[g]->nbytes());
        b.download(out.back().back().data(), bufs[g]->data, bufs[g]->nbytes());
      }
  }
  return out;
}

// ref and the CPU's compiled C agree on every byte of every output (a NaN on any NaN: libm's and
// the compiled code's NaNs may differ in sign).
void expect_ref_matches_cpu(const std::vector<Case>& cases) {
  auto cpu = run_all(Device::cpu(), cases), ref = run_all(kRef, cases);
  for (size_t i = 0; i < cases.size(); i++)
    for (size_t o = 0; o < cpu[i].size(); o++) {
      const Program& p = cases[i].program;
      size_t g = 0, seen = 0;
      for (; g < p.written.size(); g++)
        if (p.written[g] && seen++ == o) break;
      DType t = p.globals[g];
      size_t es = static_cast<size_t>(dtype_size(t));
      for (int64_t k = 0; k < kN; k++) {
        if (std::memcmp(&cpu[i][o][static_cast<size_t>(k) * es], &ref[i][o][static_cast<size_t>(k) * es],
                        es) == 0)
          continue;
        Buffer bc(t, 1), br(t, 1);
        std::memcpy(bc.data, &cpu[i][o][static_cast<size_t>(k) * es], es);
        std::memcpy(br.data, &ref[i][o][static_cast<size_t>(k) * es], es);
        if (is_float(t) && std::isnan(bc.get_f(0)) && std::isnan(br.get_f(0))) continue;
        ADD_FAILURE() << p.name << " output " << o << " (" << dtype_name(t) << ") element " << k << ": cpu "
                      << (is_float(t) ? bc.get_f(0) : static_cast<double>(bc.get_i(0))) << ", ref "
                      << (is_float(t) ? br.get_f(0) : static_cast<double>(br.get_i(0))) << "\n"
                      << codegen::render_c(p);
        break;
      }
    }
}

const std::vector<DType> kInts = {DType::Bool, DType::U8,  DType::I8,  DType::I16,
                                  DType::I32,  DType::U32, DType::I64, DType::U64};
const std::vector<DType> kFloats = {DType::F16, DType::BF16, DType::F32, DType::F64};

double lowest(DType t) {
  if (t == DType::Bool || is_unsigned(t)) return 0;
  return -std::ldexp(1.0, dtype_size(t) * 8 - 1);
}

TEST(RefInterpreter, IntegerOpsMatchTheCompiledC) {
  std::vector<Case> cases;
  for (DType t : kInts) {
    double lo = lowest(t),
           hi = t == DType::Bool ? 1 : -lo - 1 + (is_unsigned(t) ? std::ldexp(1.0, dtype_size(t) * 8) : 0);
    if (t == DType::U64) hi = 1e18;
    if (t == DType::I64) hi = 9e18;  // 2^63 - 1 is no double
    std::vector<double> a = {0, 1, -1, 2, 7, -7, 100, -100, 127, lo, hi, lo + 1, hi - 1, 3, 250, 65537},
                        b = {3, -1, 0, -3, 2, 5, -9, 7, 1, 2, 3, -2, 40, 0, 9, -5};
    bool sigfpe = t == DType::I32 || t == DType::I64;  // C's INT_MIN / -1 traps: not asked of the CPU
    Builder x("int_" + std::string(dtype_name(t)), {t, t});
    int pa = x.loads[0], pb = x.loads[1];
    std::vector<Op> ops = {Op::ADD, Op::MUL, Op::MAX, Op::AND, Op::OR, Op::XOR, Op::CMPLT, Op::CMPNE};
    if (t != DType::Bool) ops.insert(ops.end(), {Op::IDIV, Op::MOD, Op::SHL, Op::SHR});
    for (Op op : ops) {
      if (sigfpe && (op == Op::IDIV || op == Op::MOD)) continue;
      x.output(x.add(op, ir::is_comparison(op) ? DType::Bool : t, {pa, pb}));
    }
    x.output(x.add(Op::MULACC, t, {pa, pb, pa}));
    x.output(x.add(Op::WHERE, t, {x.add(Op::CMPLT, DType::Bool, {pa, pb}), pa, pb}));
    cases.push_back({x.done(), {values_of(t, a), values_of(t, b)}});
    if (sigfpe) {  // division with the divisor never -1
      Builder y("intdiv_" + std::string(dtype_name(t)), {t, t});
      y.output(y.add(Op::IDIV, t, {y.loads[0], y.loads[1]}));
      y.output(y.add(Op::MOD, t, {y.loads[0], y.loads[1]}));
      cases.push_back(
          {y.done(), {values_of(t, a), values_of(t, {3, 1, 0, -3, 2, 5, -9, 7, 1, 2, 3, -2, 40, 0, 9, -5})}});
    }
  }
  expect_ref_matches_cpu(cases);
}

TEST(RefInterpreter, FloatOpsMatchTheCompiledC) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<double> a = {0.5, -1.25, 3, nan, inf, -inf, 0, -0.0, 1e-3, 7.5, 100, -3, 2, 1e-40, 65504, 0.1},
                      b = {2, 0.75, nan, 1, -inf, 2, 0, 5, -2, 7.5, 0.001, 3, -0.0, 1e30, 1, 3};
  std::vector<Case> cases;
  for (DType t : kFloats) {
    Builder x("float_" + std::string(dtype_name(t)), {t, t});
    int pa = x.loads[0], pb = x.loads[1];
    for (Op op : {Op::ADD, Op::MUL, Op::MAX, Op::IDIV, Op::CMPLT, Op::CMPNE})
      x.output(x.add(op, ir::is_comparison(op) ? DType::Bool : t, {pa, pb}));
    x.output(x.add(Op::MULACC, t, {pa, pb, pa}));
    x.output(x.add(Op::WHERE, t, {x.add(Op::CMPLT, DType::Bool, {pb, pa}), pa, pb}));
    x.output(x.add(Op::MUL, t, {pa, x.add(Op::RECIP, t, {pb})}));  // rendered as a / b
    cases.push_back({x.done(), {values_of(t, a), values_of(t, b)}});

    Builder u("unary_" + std::string(dtype_name(t)), {t});
    int v = u.loads[0];
    for (Op op : {Op::EXP2, Op::LOG2, Op::SIN, Op::SQRT, Op::TRUNC, Op::RECIP}) u.output(u.add(op, t, {v}));
    int log2e = u.add(Op::CONST, t, {}, {}, 1.4426950408889634);
    u.output(u.add(Op::EXP2, t, {u.add(Op::MUL, t, {v, log2e})}));  // e^x, rendered as expf
    std::vector<double> wide = {0.5,  -1.25, 3,    nan, inf,  -inf,  0,   -0.0,
                                1e-3, 88.5,  -103, 130, -160, 1e-40, 1e4, 0.1};
    cases.push_back({u.done(), {values_of(t, wide)}});
  }
  expect_ref_matches_cpu(cases);
}

TEST(RefInterpreter, CastsAndBitcastsMatchTheCompiledC) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<DType> all = kInts;
  all.insert(all.end(), kFloats.begin(), kFloats.end());
  std::vector<Case> cases;
  for (DType from : all) {
    // float -> integer casts of values out of the target's range are undefined in C: none here
    std::vector<double> v = is_float(from)
                                ? std::vector<double>{0, 0.5, 1, 2.75, 100.5, 127, 3.9, 0.25}
                                : std::vector<double>{0, 1, -1, 127, -128, 255, 300, -70000, 1e9, 3};
    Builder x("cast_" + std::string(dtype_name(from)), {from});
    for (DType to : all) x.output(x.add(Op::CAST, to, {x.loads[0]}));
    cases.push_back({x.done(), {values_of(from, v)}});
    if (is_float(from)) {  // negatives and specials into signed integers and floats
      Builder y("cast_signed_" + std::string(dtype_name(from)), {from});
      for (DType to : {DType::Bool, DType::I8, DType::I16, DType::I32, DType::I64})
        y.output(y.add(Op::CAST, to, {y.loads[0]}));
      cases.push_back({y.done(), {values_of(from, {-1.5, -100.25, 3, -0.0, -127.9})}});
      Builder z("cast_special_" + std::string(dtype_name(from)), {from});
      for (DType to : kFloats) z.output(z.add(Op::CAST, to, {z.loads[0]}));
      z.output(z.add(Op::CAST, DType::Bool, {z.loads[0]}));
      cases.push_back(
          {z.done(), {values_of(from, {nan, inf, -inf, 1e30, -1e-30, 65519, 65520, 1.00390625})}});
    }
  }
  for (auto [from, to] : std::vector<std::pair<DType, DType>>{{DType::F32, DType::I32},
                                                              {DType::F32, DType::U32},
                                                              {DType::I32, DType::F32},
                                                              {DType::U32, DType::F32},
                                                              {DType::F64, DType::I64},
                                                              {DType::I64, DType::F64},
                                                              {DType::U64, DType::F64},
                                                              {DType::I32, DType::U32},
                                                              {DType::U64, DType::I64}}) {
    Builder x("bitcast_" + std::string(dtype_name(from)) + "_" + dtype_name(to), {from});
    x.output(x.add(Op::BITCAST, to, {x.loads[0]}));
    cases.push_back(
        {x.done(),
         {values_of(from, is_float(from) ? std::vector<double>{0, 1, -1, 1.5, -2.25, nan, inf, 1e-40}
                                         : std::vector<double>{0, 1, -1, 2, -2, 12345678, 2147483647})}});
  }
  expect_ref_matches_cpu(cases);
}

// C's INT_MIN / -1 traps; ref wraps it (as the frontend's semantics say integers do)
TEST(RefInterpreter, DivisionOfTheMinimumByMinusOneWraps) {
  Builder x("idiv_min", {DType::I32, DType::I32});
  x.output(x.add(Op::IDIV, DType::I32, {x.loads[0], x.loads[1]}));
  x.output(x.add(Op::MOD, DType::I32, {x.loads[0], x.loads[1]}));
  auto out =
      run_all(kRef, {{x.done(), {values_of(DType::I32, {-2147483648.0}), values_of(DType::I32, {-1})}}});
  int32_t q, r;
  std::memcpy(&q, out[0][0].data(), 4);
  std::memcpy(&r, out[0][1].data(), 4);
  EXPECT_EQ(q, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(r, 0);
}

// Frontend kernels on both devices: f32 within rounding (the compiled C may vectorize a sum in
// another order), the rest exactly.
void expect_same_on_both(const std::function<Tensor(Device)>& f, double rtol) {
  Tensor c = f(Device::cpu()), r = f(kRef);
  ASSERT_EQ(r.device(), kRef);
  std::vector<double> want = c.to_vector<double>(), got = r.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++)
    if (!(std::fabs(got[i] - want[i]) <= rtol * std::fabs(want[i]) ||
          (std::isnan(got[i]) && std::isnan(want[i])))) {
      ADD_FAILURE() << "element " << i << ": ref " << got[i] << ", cpu " << want[i];
      return;
    }
}

Tensor input(const Shape& s, DType t, uint64_t seed, Device d) {
  return random_tensor(s, t, -1, 1, seed).to(Device::cpu()).to(d);
}

TEST(RefInterpreter, KernelsWithRegisterLanesMatchTheCpu) {
  // (8, 64) @ (64, 16): a 4 x 8 tile of lanes per accumulator; with K = 2100 the sum is also chunked
  // and its lane loops open inside others of the same name
  for (int64_t k : {64, 2100})
    expect_same_on_both(
        [&](Device d) {
          return input({8, k}, DType::F32, 1, d).matmul(input({k, 16}, DType::F32, 2, d));
        },
        1e-5);
  expect_same_on_both([](Device d) { return input({6, 40}, DType::F32, 3, d).softmax(1); }, 1e-6);
  expect_same_on_both([](Device d) { return input({5000}, DType::F32, 4, d).sum(); }, 1e-5);
  expect_same_on_both(
      [](Device d) {
        return (input({4, 12}, DType::BF16, 5, d) * input({4, 12}, DType::BF16, 6, d)).exp();
      },
      0);
}

TEST(RefInterpreter, ScatterAddsMatchTheCpu) {
  // an embedding's gradient: a one-hot sum lowered to adds into a zeroed output (STORE {1})
  Tensor ids = tensor(std::vector<int64_t>{3, 1, 3, 0, 2, 3, 6, 1}, {8}).to(Device::cpu());
  Tensor w = input({7, 5}, DType::F32, 7, Device::cpu()).requires_grad_();
  (nn::functional::embedding(ids, w) * input({8, 5}, DType::F32, 8, Device::cpu())).sum().backward();
  EXPECT_NE(kernel_opts(w.grad()).find("SCATTER_ONEHOT 7"), std::string::npos) << kernel_opts(w.grad());
  expect_same_on_both(
      [&](Device d) {
        Tensor wd = w.detach().to(d).requires_grad_();
        (nn::functional::embedding(ids.to(d), wd) * input({8, 5}, DType::F32, 8, d)).sum().backward();
        return wd.grad();
      },
      0);
}

TEST(RefInterpreter, AStoreOutsideItsBufferIsAnError) {
  Builder x("store_past_end", {DType::F32});
  int one = x.add(Op::CONST, DType::I64, {}, {1});
  int g = x.global(DType::F32, true);
  x.add(Op::STORE, DType::F32, {g, x.add(Op::ADD, DType::I64, {x.range, one}), x.loads[0]});
  Case c{x.done(), {values_of(DType::F32, {1})}};
  EXPECT_EQ(error_of([&] { run_all(kRef, {c}); }),
            "kiln.ref: kernel ref_check_store_past_end stores element 24 of argument 1 (f32), which holds 24 "
            "elements");
}

TEST(RefInterpreter, ALoadOutsideItsBufferIsAnError) {
  Builder x("load_before_start", {});
  int in = x.global(DType::I32, false);
  int minus = x.add(Op::CONST, DType::I64, {}, {-3});
  x.output(x.add(Op::LOAD, DType::I32, {in, x.add(Op::ADD, DType::I64, {x.range, minus})}));
  Case c{x.done(), {values_of(DType::I32, {1})}};
  EXPECT_EQ(
      error_of([&] { run_all(kRef, {c}); }),
      "kiln.ref: kernel ref_check_load_before_start loads element -3 of argument 0 (i32), which holds 24 "
      "elements");
}

TEST(RefInterpreter, AnOpItCannotInterpretIsAnErrorNamingIt) {
  Builder x("iota", {});
  x.output(x.add(Op::IOTA, DType::I64, {}, {0}));
  Program p = x.done();
  EXPECT_EQ(error_of([&] { runtime::ref_device::decode(p); }),
            "kiln.ref: kernel ref_check_iota, instruction 1 (IOTA i64): no interpretation for this op");
}

TEST(RefDevice, NamesParsesAndCodes) {
  EXPECT_EQ(Device::parse("ref"), kRef);
  EXPECT_EQ(kRef.str(), "ref");
  for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(5), kRef})
    EXPECT_EQ(Device::from_code(d.code()), d);
  EXPECT_THROW(Device::parse("ref:1"), Error);
  EXPECT_THROW(Device::parse("cuda:32"), Error);  // past what a node's 8-bit device code holds
}

TEST(RefDevice, RunsWithoutACompiler) {
  Settings saved = settings();
  settings().cc = "/nonexistent/cc";
  clear_memory_cache();
  Tensor a = tensor({1.0f, 2.0f}).to(kRef), b = tensor({3.0f, 4.0f}).to(kRef);
  EXPECT_EQ((a.dot(b) * 1.5f).item<float>(), 16.5f);
  settings() = saved;
}

TEST(RefDevice, TileProgramsAreNotRunOnIt) {
  tile::Program p = tile::Program::from_library("eltwise/add.cpp", tile::Grid::cores(1));
  Tensor a = zeros({32, 32}, {.device = kRef});
  p.input("a", a).input("b", a).output("y", a.shape(), DType::F32);
  std::string e = error_of([&] { p.run(); });
  EXPECT_NE(e.find("input 'a' is on ref: a program runs on the CPU or a CUDA GPU"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln::testing
