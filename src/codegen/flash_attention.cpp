// The generated part of the flash-attention kernel (see flash_attention.h).
#include "codegen/flash_attention.h"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <sstream>

#include "ir/attention_layout.h"
#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln::codegen {

using ir::NodeRef;
using ir::Op;

namespace {

using ir::AttentionPart;

struct Tiles {
  int bm, bn, threads, min_blocks;  // min_blocks: resident blocks per SM the registers are sized for
};

// The forward: 16 query rows a warp, BM of them a block; K/V tiles of BN rows; D = 64 fits two
// blocks an SM, D = 128 keeps one. The backward: 16 query (dq) or key (dkv) rows a warp, four warps
// a block, tiles of 64 rows streaming, three (D = 64) or two (D = 128) blocks an SM. Warps times 16
// must be the block's own rows (BM for the forward and dq, BN for dkv).
Tiles tiles_for(AttentionPart part, int64_t d) {
  if (part == AttentionPart::Dq || part == AttentionPart::Dkv) return {64, 64, 128, d == 64 ? 3 : 2};
  return {128, 64, 256, d == 64 ? 2 : 1};
}

const char* const part_names[] = {"attn", "attn_lse", "attn_dq", "attn_dkv"};

}  // namespace

bool flash_attention_fits(const ir::Node& n) {
  const ir::Shape& q = n.src[0]->shape;
  size_t r = q.size();
  DType t = n.src[0]->dtype;
  int64_t d = q[r - 1], dv = n.src[2]->shape[r - 1], tk = n.src[1]->shape[r - 2];
  for (const auto& s : n.src)  // q, k, v, dO in the one 16-bit dtype, lse and delta in f32
    if (s->dtype != t && s->dtype != DType::F32) return false;
  return (t == DType::BF16 || t == DType::F16) && d == dv && (d == 64 || d == 128) && tk >= 1;
}

Lowered lower_attention(const NodeRef& ast, Target target) {
  const NodeRef& a = ast->src.at(0);
  if (target != Target::CUDA)
    throw Error("kiln.codegen: the flash-attention kernel runs on CUDA only (" + a->str() + ")");
  auto l = ir::AttentionLayout::from_args(a->arg);
  Tiles t = tiles_for(l.part, l.d);
  int64_t batch = 1;
  for (auto b : l.batch) batch *= b;
  int64_t nmb = (l.tq + t.bm - 1) / t.bm, nkb = (l.tk + t.bn - 1) / t.bn;
  bool forward = l.part == AttentionPart::Out || l.part == AttentionPart::Lse;
  DType in = a->src[0]->dtype;

  Lowered out;
  Program& p = out.program;
  std::ostringstream name;
  name << part_names[static_cast<int>(l.part)] << (l.with_lse ? "_lse" : "") << "_" << batch << "_" << l.tq
       << "_" << l.tk << "_" << l.d << (l.causal ? "_causal" : "");
  p.name = name.str();
  p.hash = ast->hash * 31 + 2;
  char hex[24];
  std::snprintf(hex, sizeof hex, "_%012llx", static_cast<unsigned long long>(p.hash & 0xffffffffffffull));
  p.symbol = p.name + hex;
  int64_t inputs = 0;
  for (auto& g : a->src) inputs = std::max(inputs, g->ival());
  p.globals.assign(static_cast<size_t>(inputs + 1), a->dtype);
  for (auto& g : a->src) p.globals[static_cast<size_t>(g->ival())] = g->dtype;
  p.written.assign(p.globals.size(), false);
  p.written[0] = true;
  if (l.with_lse) {
    p.globals[1] = DType::F32;
    p.written[1] = true;
  }
  double pairs = static_cast<double>(l.tq) * static_cast<double>(l.tk);
  if (l.causal && l.tq <= l.tk) pairs -= static_cast<double>(l.tq) * static_cast<double>(l.tq - 1) / 2;
  const double matmuls[] = {2, 1, 3, 4};  // tq x tk x d products of each part
  p.flops =
      2.0 * matmuls[static_cast<int>(l.part)] * static_cast<double>(batch) * pairs * static_cast<double>(l.d);

  auto hexfloat = [](double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(static_cast<float>(x)));
    return std::string(buf);
  };
  const char* rs[] = {"Q_RS", "K_RS", "V_RS", "O_RS", "L_RS", "DL_RS"};
  std::ostringstream s;
  const std::string ns = p.symbol + "_impl";  // the kernel itself takes the symbol
  s << "namespace " << ns << " {\n"
    << "constexpr int D = " << l.d << ", BM = " << t.bm << ", BN = " << t.bn << ", NT = " << t.threads
    << ", NMB = " << nmb << ", TQ = " << l.tq << ", TK = " << l.tk << ";\n"
    << "constexpr long long BATCH = " << batch << ";\n"
    << "constexpr bool CAUSAL = " << (l.causal ? "true" : "false")
    << ", F16 = " << (in == DType::F16 ? "true" : "false")
    << ", STORE_O = " << (l.part == AttentionPart::Out ? "true" : "false")
    << ", STORE_LSE = " << (l.part == AttentionPart::Lse || l.with_lse ? "true" : "false") << ";\n"
    << "constexpr float SCALE = " << hexfloat(a->fval)
    << ", SCALE_LOG2 = " << hexfloat(a->fval * std::numbers::log2e) << ";\n";
  for (size_t i = 0; i < 6; i++)
    s << "constexpr long long " << rs[i] << " = " << (i < l.operands.size() ? l.operands[i].row_stride : 0)
      << ";\n";
  s << "__device__ __forceinline__ void offsets(long long bh, long long (&off)[" << l.operands.size()
    << "]) {\n";
  for (size_t o = 0; o < l.operands.size(); o++)
    s << "  off[" << o << "] = " << l.operands[o].offset << ";\n";
  for (size_t i = l.batch.size(); i-- > 0;) {
    if (l.batch[i] == 1) continue;
    s << "  { long long i = bh % " << l.batch[i] << "; bh /= " << l.batch[i] << ";";
    for (size_t o = 0; o < l.operands.size(); o++)
      s << " off[" << o << "] += i * " << l.operands[o].batch_strides[i] << ";";
    s << " }\n";
  }
  s << "}\n"
    << flash_attention_common_source()
    << (forward ? flash_attention_kernel_source() : flash_attention_backward_kernel_source())
    << "}  // namespace " << ns << "\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << t.threads << ", " << t.min_blocks << ") "
    << p.symbol << "(";
  for (int64_t i = 0; i <= inputs; i++) s << (i ? ", " : "") << "void* g" << i;  // by global index
  auto arg = [&](size_t o) {
    const char* type = a->src[o]->dtype == DType::F32 ? "const float*" : "const uint16_t*";
    return std::string("(") + type + ")g" + std::to_string(a->src[o]->ival());
  };
  s << ") {\n  " << ns << "::";
  if (l.part == AttentionPart::Out)
    s << "flash_forward((uint16_t*)g0, " << (l.with_lse ? "(float*)g1" : "nullptr") << ", ";
  else if (l.part == AttentionPart::Lse)
    s << "flash_forward(nullptr, (float*)g0, ";
  else
    s << (l.part == AttentionPart::Dq ? "flash_dq" : "flash_dkv") << "((uint16_t*)g0, ";
  for (size_t o = 0; o < a->src.size(); o++) s << (o ? ", " : "") << arg(o);
  s << ");\n}\n";
  out.source = s.str();
  out.launch.kind = CudaLaunch::Kind::Grid;
  out.launch.work = (l.part == AttentionPart::Dkv ? nkb : nmb) * batch;
  out.launch.block = t.threads;
  out.launch.smem_bytes = l.part == AttentionPart::Dkv
                              ? static_cast<int64_t>(2 * t.bn + 4 * t.bm) * l.d * 2 + 4 * t.bm * 4
                          : l.part == AttentionPart::Dq ? static_cast<int64_t>(2 * t.bm + 4 * t.bn) * l.d * 2
                                                        : static_cast<int64_t>(t.bm + 4 * t.bn) * l.d * 2;
  std::ostringstream opt;
  opt << "FLASH_ATTENTION(" << part_names[static_cast<int>(l.part)] << " BM=" << t.bm << " BN=" << t.bn
      << " D=" << l.d << (l.causal ? " causal" : "") << ", " << out.launch.work << " blocks)";
  out.opts.push_back(opt.str());
  return out;
}

}  // namespace kiln::codegen
