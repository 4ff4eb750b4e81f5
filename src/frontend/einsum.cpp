// einsum: parses "ij,jk->ik" style equations (implicit output, repeated labels, "...") and
// evaluates them as diagonal views, permutes, broadcast multiplies and one sum.
#include <algorithm>
#include <map>

#include "frontend/autocast.h"
#include "frontend/graph.h"
#include "kiln/tensor.h"

namespace kiln {

using frontend::fail;

namespace {

// Labels are letter codes (< 128); the k-th "..." dim, aligned from the right, is 128 + k.
constexpr int kEllipsis = -1;

std::string label_name(int l) {
  return l < 128 ? std::string(1, static_cast<char>(l)) : "...(" + std::to_string(l - 128) + ")";
}

std::vector<int> parse_term(const std::string& eq, const std::string& term) {
  std::vector<int> r;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); i++) {
    char c = term[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      r.push_back(c);
    } else if (c == '.') {
      if (term.compare(i, 3, "...") != 0) fail("einsum", "'.' must be part of \"...\" in \"" + eq + "\"");
      if (ellipsis) fail("einsum", "\"...\" appears twice in one term of \"" + eq + "\"");
      ellipsis = true;
      r.push_back(kEllipsis);
      i += 2;
    } else {
      fail("einsum",
           std::string("invalid character '") + c + "' in \"" + eq + "\" (use letters, ',', '->', '...')");
    }
  }
  return r;
}

// Takes the diagonal of dims a < b (equal sizes): both move to the end, merge, and a stride of
// n + 1 picks the diagonal.
Tensor diagonal(const Tensor& x, int64_t a, int64_t b) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < x.dim(); k++)
    if (k != a && k != b) perm.push_back(k);
  perm.push_back(a);
  perm.push_back(b);
  Tensor t = x.permute(perm);
  int64_t n = x.size(a);
  Shape s(t.shape().begin(), t.shape().end() - 2);
  s.push_back(n * n);
  return t.reshape(s).slice(-1, 0, std::nullopt, n + 1);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& ts) {
  // a product of operands is a (batched) matmul, which autocast lowers; one operand is a view or a sum
  if (ts.size() >= 2)
    if (frontend::AutocastOp ac{frontend::AutocastList::Lower}) {
      std::vector<Tensor> cast;
      for (const Tensor& t : ts) cast.push_back(ac(t));
      return einsum(equation, cast);
    }
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(equation, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ts.size())
    fail("einsum", "\"" + equation + "\" names " + std::to_string(terms.size()) + " operands, got " +
                       std::to_string(ts.size()) + " tensors");
  // number the "..." dims from the right so they broadcast
  int64_t ell = 0;
  std::vector<int64_t> ell_of(ts.size(), 0);
  for (size_t i = 0; i < ts.size(); i++) {
    int64_t named =
        static_cast<int64_t>(std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l >= 0; }));
    bool has = named != static_cast<int64_t>(terms[i].size());
    if ((!has && named != ts[i].dim()) || (has && named > ts[i].dim()))
      fail("einsum", "operand " + std::to_string(i) + " of shape " + shape_str(ts[i].shape()) +
                         " does not fit " + "its subscripts in \"" + equation + "\"");
    ell_of[i] = has ? ts[i].dim() - named : 0;
    ell = std::max(ell, ell_of[i]);
  }
  std::map<int, int64_t> size_of, count;
  std::vector<int> first_seen;
  for (size_t i = 0; i < ts.size(); i++) {
    std::vector<int> labels;
    for (int l : terms[i])
      if (l == kEllipsis)
        for (int64_t k = 0; k < ell_of[i]; k++) labels.push_back(static_cast<int>(128 + ell - ell_of[i] + k));
      else
        labels.push_back(l);
    terms[i] = labels;
    for (size_t k = 0; k < labels.size(); k++) {
      int l = labels[k];
      int64_t n = ts[i].shape()[k];
      if (!size_of.count(l)) {
        size_of[l] = n;
        first_seen.push_back(l);
      } else if (size_of[l] != n && size_of[l] != 1 && n != 1) {
        fail("einsum", "subscript " + label_name(l) + " has size " + std::to_string(n) + " in operand " +
                           std::to_string(i) + " of shape " + shape_str(ts[i].shape()) + " but " +
                           std::to_string(size_of[l]) + " elsewhere in \"" + equation + "\"");
      } else {
        size_of[l] = std::max(size_of[l], n);
      }
      count[l]++;
    }
  }
  // output labels: given, or the "..." dims then the labels used once, in alphabetical order
  std::vector<int> out;
  if (arrow != std::string::npos) {
    std::vector<int> rhs = parse_term(equation, eq.substr(arrow + 2));
    for (int l : rhs) {
      if (l == kEllipsis) {
        for (int64_t k = 0; k < ell; k++) out.push_back(static_cast<int>(128 + k));
        continue;
      }
      if (!size_of.count(l))
        fail("einsum",
             "output subscript " + label_name(l) + " does not appear in the inputs of \"" + equation + "\"");
      if (std::find(out.begin(), out.end(), l) != out.end())
        fail("einsum", "output subscript " + label_name(l) + " appears twice in \"" + equation + "\"");
      out.push_back(l);
    }
  } else {
    for (int64_t k = 0; k < ell; k++) out.push_back(static_cast<int>(128 + k));
    std::vector<int> once;
    for (auto [l, c] : count)
      if (l < 128 && c == 1) once.push_back(l);
    out.insert(out.end(), once.begin(), once.end());  // std::map iterates in order
  }
  std::vector<int> order = out;
  for (int l : first_seen)
    if (std::find(order.begin(), order.end(), l) == order.end()) order.push_back(l);
  auto pos = [&](int l) { return std::find(order.begin(), order.end(), l) - order.begin(); };

  DType t = ts.empty() ? DType::F32 : ts[0].dtype();
  for (auto& x : ts) t = promote_types(t, x.dtype());
  Tensor prod;
  for (size_t i = 0; i < ts.size(); i++) {
    Tensor x = ts[i].to(t);
    std::vector<int> labels = terms[i];
    // repeated subscripts within an operand: take diagonals
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < labels.size() && !again; a++)
        for (size_t b = a + 1; b < labels.size() && !again; b++)
          if (labels[a] == labels[b]) {
            if (x.size(a) != x.size(b))
              fail("einsum", "repeated subscript " + label_name(labels[a]) + " in operand " +
                                 std::to_string(i) + " of shape " + shape_str(ts[i].shape()) +
                                 " needs equal sizes");
            x = diagonal(x, static_cast<int64_t>(a), static_cast<int64_t>(b));
            int l = labels[a];
            labels.erase(labels.begin() + b);
            labels.erase(labels.begin() + a);
            labels.push_back(l);
            again = true;
          }
    }
    // dims in the global order, then 1s for the labels this operand lacks
    std::vector<int64_t> perm(labels.size());
    for (size_t k = 0; k < perm.size(); k++) perm[k] = static_cast<int64_t>(k);
    std::sort(perm.begin(), perm.end(),
              [&](int64_t p, int64_t q) { return pos(labels[p]) < pos(labels[q]); });
    x = x.permute(perm);
    Shape s(order.size(), 1);
    for (size_t k = 0; k < perm.size(); k++) s[pos(labels[perm[k]])] = x.shape()[k];
    x = x.reshape(s);
    prod = prod.defined() ? prod * x : x;
  }
  if (!prod.defined()) fail("einsum", "needs at least one operand");
  Shape full_shape;
  for (int l : order) full_shape.push_back(size_of[l]);
  prod = prod.expand(full_shape);
  std::vector<int64_t> contracted;
  for (size_t k = out.size(); k < order.size(); k++) contracted.push_back(static_cast<int64_t>(k));
  if (contracted.empty()) return prod;
  return prod.sum(contracted).to(t);
}

}  // namespace kiln
