// The generated part of the flash-attention kernel (see flash_attention.h).
#include "codegen/flash_attention.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <sstream>

#include "ir/attention_layout.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

namespace {

struct Tiles {
  int bm, bn, threads, min_blocks;  // min_blocks: resident blocks per SM the registers are sized for
};

// 16 query rows a warp; K/V tiles of 64 rows. D = 64 fits two blocks an SM; D = 128 keeps one.
Tiles tiles_for(int64_t d) { return d == 64 ? Tiles{128, 64, 256, 2} : Tiles{128, 64, 256, 1}; }

}  // namespace

bool flash_attention_fits(const ir::Node& n) {
  const ir::Shape& q = n.src[0]->shape;
  size_t r = q.size();
  int64_t d = q[r - 1], dv = n.src[2]->shape[r - 1], tk = n.src[1]->shape[r - 2];
  return (n.dtype == DType::BF16 || n.dtype == DType::F16) && d == dv && (d == 64 || d == 128) && tk >= 1;
}

Lowered lower_attention(const NodeRef& ast, Target target) {
  const NodeRef& a = ast->src.at(0);
  if (target != Target::CUDA)
    throw Error("kiln.codegen: the flash-attention kernel runs on CUDA only (" + a->str() + ")");
  auto l = ir::AttentionLayout::from_args(a->arg);
  Tiles t = tiles_for(l.d);
  int64_t batch = 1;
  for (auto b : l.batch) batch *= b;
  int64_t nmb = (l.tq + t.bm - 1) / t.bm;

  Lowered out;
  Program& p = out.program;
  std::ostringstream name;
  name << "attn_" << batch << "_" << l.tq << "_" << l.tk << "_" << l.d << (l.causal ? "_causal" : "");
  p.name = name.str();
  p.hash = ast->hash * 31 + 2;
  char hex[24];
  std::snprintf(hex, sizeof hex, "_%012llx", static_cast<unsigned long long>(p.hash & 0xffffffffffffull));
  p.symbol = p.name + hex;
  int64_t inputs = 0;
  for (auto& g : a->src) inputs = std::max(inputs, g->ival());
  p.globals.assign(static_cast<size_t>(inputs + 1), a->dtype);
  p.written.assign(p.globals.size(), false);
  p.written[0] = true;
  double pairs = static_cast<double>(l.tq) * static_cast<double>(l.tk);
  if (l.causal && l.tq <= l.tk) pairs -= static_cast<double>(l.tq) * static_cast<double>(l.tq - 1) / 2;
  p.flops = 4.0 * static_cast<double>(batch) * pairs * static_cast<double>(l.d);

  char scale[64];
  std::snprintf(scale, sizeof scale, "%af",
                static_cast<double>(static_cast<float>(a->fval * std::numbers::log2e)));
  std::ostringstream s;
  const std::string ns = p.symbol + "_impl";  // the kernel itself takes the symbol
  s << "namespace " << ns << " {\n"
    << "constexpr int D = " << l.d << ", BM = " << t.bm << ", BN = " << t.bn << ", NT = " << t.threads
    << ", NMB = " << nmb << ", TQ = " << l.tq << ", TK = " << l.tk << ";\n"
    << "constexpr long long BATCH = " << batch << ";\n"
    << "constexpr bool CAUSAL = " << (l.causal ? "true" : "false")
    << ", F16 = " << (a->dtype == DType::F16 ? "true" : "false") << ";\n"
    << "constexpr float SCALE_LOG2 = " << scale << ";\n"
    << "constexpr long long Q_RS = " << l.q.row_stride << ", K_RS = " << l.k.row_stride
    << ", V_RS = " << l.v.row_stride << ";\n"
    << "__device__ __forceinline__ void offsets(long long bh, long long& q, long long& k, long long& v) {\n"
    << "  q = " << l.q.offset << "; k = " << l.k.offset << "; v = " << l.v.offset << ";\n";
  for (size_t i = l.batch.size(); i-- > 0;) {
    if (l.batch[i] == 1) continue;
    s << "  { long long i = bh % " << l.batch[i] << "; bh /= " << l.batch[i] << "; q += i * "
      << l.q.batch_strides[i] << "; k += i * " << l.k.batch_strides[i] << "; v += i * "
      << l.v.batch_strides[i] << "; }\n";
  }
  s << "}\n"
    << flash_attention_kernel_source() << "}  // namespace " << ns << "\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << t.threads << ", " << t.min_blocks << ") "
    << p.symbol << "(uint16_t* out";
  for (int64_t i = 1; i <= inputs; i++) s << ", const uint16_t* in" << i;
  s << ") {\n  " << ns << "::flash_forward(out, in" << a->src[0]->ival() << ", in" << a->src[1]->ival()
    << ", in" << a->src[2]->ival() << ");\n}\n";
  out.source = s.str();
  out.launch.kind = CudaLaunch::Kind::Grid;
  out.launch.work = nmb * batch;
  out.launch.block = t.threads;
  out.launch.smem_bytes = static_cast<int64_t>(t.bm + 4 * t.bn) * l.d * 2;
  std::ostringstream opt;
  opt << "FLASH_ATTENTION(BM=" << t.bm << " BN=" << t.bn << " D=" << l.d << (l.causal ? " causal" : "")
      << ", " << out.launch.work << " blocks)";
  out.opts.push_back(opt.str());
  return out;
}

}  // namespace kiln::codegen
