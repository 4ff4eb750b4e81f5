// Long float sums in chunks (see opt.h): a sum over N elements becomes a sum of chunk sums.
#include <algorithm>
#include <unordered_map>

#include "codegen/opt.h"
#include "ir/rewrite.h"
#include "ir/simplify.h"

namespace kiln::codegen {

using ir::Node;
using ir::NodeRef;
using ir::Op;

namespace {

bool holds_reduce(const NodeRef& n) {
  for (auto& x : ir::toposort({n}))
    if (x->op == Op::REDUCE) return true;
  return false;
}

NodeRef sum_over(const NodeRef& value, DType t, const std::vector<NodeRef>& ranges) {
  std::vector<NodeRef> src{value};
  src.insert(src.end(), ranges.begin(), ranges.end());
  return ir::make(Op::REDUCE, t, {}, src, {static_cast<int64_t>(Op::ADD)});
}

// The divisor of n closest to want within [want/2, 2*want], or 0.
int64_t near_divisor(int64_t n, int64_t want) {
  int64_t best = 0;
  for (int64_t d = std::max<int64_t>(2, want / 2); d <= std::min(n, want * 2); d++)
    if (n % d == 0 && (!best || std::abs(d - want) < std::abs(best - want))) best = d;
  return best;
}

// The sum of x over `ranges`, in chunks of about kSumChunk elements: the innermost loops make a
// chunk (one of them split when that is needed), and the sum over chunks is chunked in turn.
NodeRef chunked_sum(const NodeRef& x, DType t, const std::vector<NodeRef>& ranges, int64_t& next_id) {
  int64_t total = 1;
  for (auto& r : ranges) total *= r->arg[1];
  if (total <= 2 * kSumChunk) return sum_over(x, t, ranges);
  size_t j = ranges.size();  // ranges[j..] is the longest run of inner loops at most two chunks long
  int64_t p = 1;
  while (j > 0 && p * ranges[j - 1]->arg[1] <= 2 * kSumChunk) p *= ranges[--j]->arg[1];
  std::vector<NodeRef> outer(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(j));
  std::vector<NodeRef> inner(ranges.begin() + static_cast<std::ptrdiff_t>(j), ranges.end());
  if (p >= kSumChunk / 4) return chunked_sum(sum_over(x, t, inner), t, outer, next_id);
  // split the next loop r into (a, b) so that b of its steps over the inner loops make a chunk; the
  // last m - a*b steps are summed on their own
  NodeRef r = outer.back();
  outer.pop_back();
  const int64_t m = r->arg[1], want = std::max<int64_t>(2, kSumChunk / p);
  int64_t b = near_divisor(m, want);
  if (!b) b = want;
  const int64_t a = m / b, rem = m - a * b;
  auto at = [&](const NodeRef& idx) { return ir::simplify(ir::substitute(x, {{r.get(), idx}})); };
  NodeRef ra = ir::range(next_id++, a, true), rb = ir::range(next_id++, b, true);
  std::vector<NodeRef> chunk{rb}, over_chunks = outer;
  chunk.insert(chunk.end(), inner.begin(), inner.end());
  over_chunks.push_back(ra);
  NodeRef sum = chunked_sum(sum_over(at(ra * b + rb), t, chunk), t, over_chunks, next_id);
  if (!rem) return sum;
  NodeRef rr = ir::range(next_id++, rem, true);
  std::vector<NodeRef> tail = outer;
  tail.push_back(rr);
  tail.insert(tail.end(), inner.begin(), inner.end());
  return ir::alu(Op::ADD, sum, chunked_sum(at(rr + a * b), t, tail, next_id));
}

}  // namespace

NodeRef chunk_long_sums(const NodeRef& ast, std::vector<std::string>& log) {
  int64_t next_id = 0;
  for (auto& x : ir::toposort({ast}))
    if (x->op == Op::RANGE) next_id = std::max(next_id, x->arg[0] + 1);
  std::unordered_map<const Node*, NodeRef> subs;
  for (auto& n : ir::toposort({ast})) {
    if (n->op != Op::REDUCE || static_cast<Op>(n->arg[0]) != Op::ADD || !is_float(n->dtype) ||
        n->dtype == DType::F64 || holds_reduce(n->src[0]))
      continue;
    std::vector<NodeRef> ranges(n->src.begin() + 1, n->src.end());
    int64_t total = 1;
    for (auto& r : ranges) total *= r->arg[1];
    if (total <= 2 * kSumChunk) continue;
    subs[n.get()] = chunked_sum(n->src[0], n->dtype, ranges, next_id);
    log.push_back("CHUNK_SUM " + std::to_string(total));
  }
  return subs.empty() ? ast : ir::substitute(ast, subs);
}

}  // namespace kiln::codegen
