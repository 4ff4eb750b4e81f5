// Shape ops and several-tensor ops (src/frontend/shape.cpp, einsum.cpp) against the reference
// interpreter and PyTorch's definitions as host index maps, including empty and 0-D tensors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <algorithm>
#include <map>

#include "frontend/op_check.h"

namespace kiln {
namespace {

using namespace opcheck;
using V = std::vector<double>;
using I = std::vector<int64_t>;
using At = std::function<double(const I&, const std::vector<Host>&)>;

// Host oracle: the value of every output element from its multi-index.
Want map_oracle(Shape out, At at) {
  return [out, at](const std::vector<Host>& h) {
    V r;
    for (int64_t f = 0; f < numel_of(out); f++) r.push_back(at(unflat(f, out), h));
    return r;
  };
}
double get(const Host& h, const I& idx) { return h.v[flat(idx, h.shape)]; }
int64_t nd(int64_t d, size_t rank) { return d < 0 ? d + int64_t(rank) : d; }
int64_t pmod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

const std::vector<DType> kTypes = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool, DType::F16};

// Checks the pieces of a split of x along d against host slices [start_i, start_i + size_i).
void add_pieces(Batch& b, const std::string& l, const Tensor& x, const std::vector<Tensor>& parts, int64_t d,
                const I& sizes, bool squeeze = false) {
  ASSERT_EQ(parts.size(), sizes.size()) << l;
  int64_t start = 0;
  for (size_t p = 0; p < parts.size(); p++) {
    Shape want = x.shape();
    want[d] = sizes[p];
    if (squeeze) want.erase(want.begin() + d);
    EXPECT_EQ(parts[p].shape(), want) << l << " piece " << p;
    b.add(l + " piece " + std::to_string(p), parts[p], {x}, map_oracle(want, [=](const I& o, auto& h) {
            I i = o;
            if (squeeze) i.insert(i.begin() + d, 0);
            i[d] += start;
            return get(h[0], i);
          }));
    start += sizes[p];
  }
}

TEST(ShapeOps, SplitChunkUnbindNarrow) {
  Batch b;
  int k = 0;
  for (DType t : kTypes) {
    k++;
    Tensor x = input({7, 4}, t, -5, 5, 10 + k, k % 4), y = input({2, 6, 3}, t, -5, 5, 20 + k, (k + 1) % 4);
    std::string n = dname(t);
    add_pieces(b, "split 3 " + n, x, x.split(3), 0, {3, 3, 1});
    add_pieces(b, "split 4 d=-1 " + n, x, x.split(4, -1), 1, {4});
    add_pieces(b, "split 10 " + n, x, x.split(10), 0, {7});
    add_pieces(b, "split sizes " + n, y, y.split(I{1, 0, 5}, 1), 1, {1, 0, 5});
    add_pieces(b, "chunk 3 " + n, x, x.chunk(3), 0, {3, 3, 1});
    add_pieces(b, "chunk 4 d=1 " + n, y, y.chunk(4, 1), 1, {2, 2, 2});  // PyTorch: 3 chunks of 2
    add_pieces(b, "chunk 5 " + n, y, y.chunk(5, -2), 1, {2, 2, 2});
    add_pieces(b, "chunk 2 of 7 " + n, x, x.chunk(2), 0, {4, 3});
    add_pieces(b, "chunk 10 of 4 " + n, x, x.chunk(10, 1), 1, {1, 1, 1, 1});
    add_pieces(b, "unbind " + n, y, y.unbind(1), 1, I(6, 1), true);
    add_pieces(b, "unbind -1 " + n, x, x.unbind(-1), 1, I(4, 1), true);
    b.add("narrow " + n, x.narrow(0, 2, 3), {x}, map_oracle({3, 4}, [](const I& o, auto& h) {
            return get(h[0], {o[0] + 2, o[1]});
          }));
    Tensor nr = x.narrow(1, -3, 2);
    b.add("narrow negative start " + n, nr, {x}, map_oracle({7, 2}, [](const I& o, auto& h) {
            return get(h[0], {o[0], o[1] + 1});
          }));
  }
  b.run();
  // empty dims, as PyTorch
  EXPECT_EQ(zeros({0, 3}).split(2).size(), 1u);
  auto ch = zeros({0, 3}).chunk(3);
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[2].shape(), (Shape{0, 3}));
  EXPECT_EQ(zeros({3, 0}).unbind(1).size(), 0u);
  EXPECT_EQ(zeros({3, 4}).narrow(1, 4, 0).shape(), (Shape{3, 0}));
}

TEST(ShapeOps, UnflattenRepeatTileInterleave) {
  Batch b;
  int k = 0;
  for (DType t : kTypes) {
    k++;
    std::string n = dname(t);
    Tensor x = input({6, 4}, t, -5, 5, 30 + k, k % 4), z = input({}, t, -5, 5, 40 + k);
    Tensor u = x.unflatten(0, {2, -1});
    EXPECT_EQ(u.shape(), (Shape{2, 3, 4}));
    b.add("unflatten " + n, u, {x}, [](auto& h) { return h[0].v; });
    b.add("unflatten -1 " + n, x.unflatten(-1, {2, 1, 2}), {x}, [](auto& h) { return h[0].v; });
    for (I times : {I{2, 3}, I{2, 1, 3}, I{1, 1}, I{0, 2}, I{3, 2, 1, 2}}) {
      Tensor r = x.repeat(times);
      Shape os = r.shape();
      b.add("repeat " + n + " " + shape_str(times), r, {x}, map_oracle(os, [](const I& o, auto& h) {
              I i(o.end() - 2, o.end());
              return get(h[0], {i[0] % 6, i[1] % 4});
            }));
    }
    Tensor tl = x.tile({3});  // PyTorch prepends 1s: (1, 3)
    EXPECT_EQ(tl.shape(), (Shape{6, 12}));
    b.add("tile " + n, tl, {x}, map_oracle({6, 12}, [](const I& o, auto& h) {
            return get(h[0], {o[0], o[1] % 4});
          }));
    b.add("repeat 0-d " + n, z.repeat({2, 3}), {z},
          map_oracle({2, 3}, [](const I&, auto& h) { return h[0].v[0]; }));
    for (int64_t d : {0, 1, -1}) {
      int64_t dd = nd(d, 2);
      Shape os{6, 4};
      os[dd] *= 3;
      b.add("repeat_interleave d=" + std::to_string(d) + " " + n, x.repeat_interleave(3, d), {x},
            map_oracle(os, [dd](const I& o, auto& h) {
              I i = o;
              i[dd] /= 3;
              return get(h[0], i);
            }));
    }
    b.add("repeat_interleave flat " + n, x.repeat_interleave(2), {x},
          map_oracle({48}, [](const I& o, auto& h) { return h[0].v[o[0] / 2]; }));
    EXPECT_EQ(x.repeat_interleave(0, 1).shape(), (Shape{6, 0}));
  }
  b.run();
}

TEST(ShapeOps, Roll) {
  Batch b;
  int k = 0;
  for (DType t : kTypes)
    for (auto [shifts, dims] : std::vector<std::pair<I, I>>{{{1}, {0}},
                                                            {{-2}, {1}},
                                                            {{7}, {-1}},
                                                            {{2, -1}, {0, 1}},
                                                            {{1, 1}, {1, 1}},
                                                            {{3}, {}},
                                                            {{0}, {0}},
                                                            {{-13}, {}}}) {
      k++;
      Tensor x = input({3, 5}, t, -5, 5, 50 + k, k % 4);
      std::string l =
          std::string("roll ") + dname(t) + " shifts=" + shape_str(shifts) + " dims=" + shape_str(dims);
      b.add(l, x.roll(shifts, dims), {x}, map_oracle({3, 5}, [shifts, dims](const I& o, auto& h) {
              if (dims.empty()) return h[0].v[pmod(o[0] * 5 + o[1] - shifts[0], 15)];
              I i = o;
              for (size_t q = 0; q < dims.size(); q++) {
                int64_t d = nd(dims[q], 2), n = h[0].shape[d];
                i[d] = pmod(i[d] - shifts[q], n);
              }
              return get(h[0], i);
            }));
    }
  b.run();
  EXPECT_EQ(zeros({0, 3}).roll({2}, {0}).shape(), (Shape{0, 3}));
}

TEST(ShapeOps, PadModes) {
  Batch b;
  int k = 0;
  for (DType t : kTypes)
    for (std::string mode : {"reflect", "replicate", "constant"})
      for (I pads : {I{1, 2}, I{2, 0, 1, 3}, I{0, 0, 2, 2}, I{3, 3}}) {
        k++;
        Shape s{3, 4, 5};
        if (mode == "reflect" && pads.size() > 2 && pads[2] >= 4) continue;
        Tensor x = input(s, t, -5, 5, 60 + k, k % 4);
        Shape os = s;
        for (size_t p = 0; p < pads.size() / 2; p++) os[2 - p] += pads[2 * p] + pads[2 * p + 1];
        std::string l = "pad " + mode + " " + dname(t) + " " + shape_str(pads);
        b.add(l, x.pad(pads, mode, 1.0), {x}, map_oracle(os, [pads, mode, s](const I& o, auto& h) {
                I i = o;
                for (size_t p = 0; p < pads.size() / 2; p++) {
                  size_t d = 2 - p;
                  int64_t n = s[d], j = o[d] - pads[2 * p];
                  if (mode == "constant" && (j < 0 || j >= n)) return 1.0;
                  if (mode == "reflect") j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
                  if (mode == "replicate") j = std::clamp<int64_t>(j, 0, n - 1);
                  i[d] = j;
                }
                return get(h[0], i);
              }));
      }
  b.run();
  testing::expect_values(tensor({1.0f, 2.0f, 3.0f}).pad({2, 2}, "reflect"), {3, 2, 1, 2, 3, 2, 1});
  testing::expect_values(tensor({1.0f, 2.0f, 3.0f}).pad({2, 1}, "replicate"), {1, 1, 1, 2, 3, 3});
}

// The cat of host tensors along d.
Want cat_oracle(Shape out, int64_t d) {
  return map_oracle(out, [d](const I& o, const std::vector<Host>& h) {
    int64_t at = o[d];
    for (auto& x : h) {
      if (x.shape == Shape{0}) continue;
      if (at < x.shape[d]) {
        I i = o;
        i[d] = at;
        return get(x, i);
      }
      at -= x.shape[d];
    }
    return -999.0;
  });
}

TEST(ShapeOps, CatStack) {
  Batch b;
  int k = 0;
  for (DType t : kTypes) {
    std::string n = dname(t);
    auto in = [&](Shape s) { return k++, input(s, t, -5, 5, 70 + k, k % 4); };
    Tensor a = in({2, 3}), c = in({4, 3}), e = in({0, 3}), f = in({2, 5}), g = in({2, 3});
    b.add("cat 0 " + n, cat({a, c, e, g}, 0), {a, c, e, g}, cat_oracle({8, 3}, 0));
    b.add("cat -1 " + n, cat({a, f, a}, -1), {a, f, a}, cat_oracle({2, 11}, 1));
    b.add("cat one " + n, cat({c}, 0), {c}, cat_oracle({4, 3}, 0));
    b.add("cat all empty " + n, cat({e, e}, 0), {e, e}, cat_oracle({0, 3}, 0));
    Tensor legacy = zeros({0}, {.dtype = t});
    b.add("cat legacy empty " + n, cat({legacy, a, legacy}, 1), {legacy, a, legacy}, cat_oracle({2, 3}, 1));
    Tensor x3 = in({2, 3, 4}), y3 = in({2, 1, 4});
    b.add("cat 3d " + n, cat({x3, y3, x3}, 1), {x3, y3, x3}, cat_oracle({2, 7, 4}, 1));
    for (int64_t d : {0, 1, 2, -1}) {
      Tensor s = stack({a, g, a}, d);
      int64_t dd = nd(d, 3);
      Shape os{2, 3};
      os.insert(os.begin() + dd, 3);
      EXPECT_EQ(s.shape(), os);
      b.add("stack d=" + std::to_string(d) + " " + n, s, {a, g, a}, map_oracle(os, [dd](const I& o, auto& h) {
              I i = o;
              i.erase(i.begin() + dd);
              return get(h[o[dd]], i);
            }));
    }
    Tensor v1 = in({3}), v2 = in({3}), s0 = in({});
    b.add("vstack 1d " + n, vstack({v1, v2}), {v1, v2},
          map_oracle({2, 3}, [](const I& o, auto& h) { return h[o[0]].v[o[1]]; }));
    b.add("vstack mixed " + n, vstack({a, v1}), {a, v1},
          map_oracle({3, 3}, [](const I& o, auto& h) { return o[0] < 2 ? get(h[0], o) : h[1].v[o[1]]; }));
    b.add("hstack 1d " + n, hstack({v1, s0, v2}), {v1, s0, v2}, map_oracle({7}, [](const I& o, auto& h) {
            int64_t i = o[0];
            return i < 3 ? h[0].v[i] : i == 3 ? h[1].v[0] : h[2].v[i - 4];
          }));
    b.add("hstack 2d " + n, hstack({a, f}), {a, f}, cat_oracle({2, 8}, 1));
  }
  // dtype promotion
  Tensor ci = cat({tensor(std::vector<int32_t>{1, 2}), tensor({0.5f})});
  EXPECT_EQ(ci.dtype(), DType::F32);
  b.run();
  testing::expect_values(ci, {1, 2, 0.5});
  // -0.0 keeps its sign (no adding of zero pads)
  Tensor nz = cat({tensor({1.0f}), tensor({-0.0f})});
  EXPECT_TRUE(std::signbit(nz.to_vector<float>()[1]));
}

// Host einsum for letter-only equations with an explicit output.
V h_einsum(const std::string& eq, const std::vector<Host>& h) {
  std::string lhs = eq.substr(0, eq.find("->")), rhs = eq.substr(eq.find("->") + 2);
  std::vector<std::string> terms;
  size_t st = 0;
  for (size_t c; (c = lhs.find(',', st)) != std::string::npos; st = c + 1)
    terms.push_back(lhs.substr(st, c - st));
  terms.push_back(lhs.substr(st));
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); i++)
    for (size_t k = 0; k < terms[i].size(); k++) size[terms[i][k]] = h[i].shape[k];
  std::string all;
  for (auto [ch, s] : size) all += ch;
  Shape space;
  for (char ch : all) space.push_back(size[ch]);
  Shape os;
  for (char ch : rhs) os.push_back(size[ch]);
  V out(size_t(numel_of(os)), 0);
  for (int64_t f = 0; f < numel_of(space); f++) {
    I a = unflat(f, space);
    auto val = [&](char ch) { return a[all.find(ch)]; };
    double p = 1;
    for (size_t i = 0; i < terms.size(); i++) {
      I idx;
      for (char ch : terms[i]) idx.push_back(val(ch));
      p *= get(h[i], idx);
    }
    I o;
    for (char ch : rhs) o.push_back(val(ch));
    out[flat(o, os)] += p;
  }
  return out;
}

TEST(ShapeOps, Einsum) {
  struct E {
    std::string eq;
    std::vector<Shape> shapes;
    std::string host_eq;  // the explicit letter-only form for the host oracle ("" = reference only)
  };
  std::vector<E> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}, "ij,jk->ik"},
      {"ij,jk", {{3, 4}, {4, 5}}, "ij,jk->ik"},  // implicit output
      {"ij->ji", {{3, 4}}, "ij->ji"},
      {"ii->i", {{4, 4}}, "ii->i"},
      {"ii", {{4, 4}}, "ii->"},  // trace
      {"iji->j", {{3, 2, 3}}, "iji->j"},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, "bij,bjk->bik"},
      {"i,j->ij", {{3}, {4}}, "i,j->ij"},
      {"i,i->", {{5}, {5}}, "i,i->"},
      {"ij->", {{3, 4}}, "ij->"},
      {"ba", {{3, 4}}, "ba->ab"},  // implicit output is alphabetical
      {" i j , j k -> i k ", {{2, 3}, {3, 2}}, "ij,jk->ik"},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, "ij,jk,kl->il"},
      {"Ab,bc->Ac", {{2, 3}, {3, 2}}, "Ab,bc->Ac"},
      {"ij,ij->ij", {{0, 3}, {0, 3}}, "ij,ij->ij"},
      {"ij,jk->ik", {{2, 0}, {0, 3}}, "ij,jk->ik"},
      {"...ij,...jk->...ik", {{2, 3, 4}, {1, 4, 5}}, ""},
      {"...ij,jk", {{2, 2, 3, 4}, {4, 5}}, ""},
      {"i...->...", {{3, 2, 4}}, ""},
      {"...->...", {{}}, ""},
      {"->", {{}}, "->"},
  };
  Batch b;
  int k = 0;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::F16})
    for (auto& c : cases) {
      std::vector<Tensor> ts;
      for (auto& s : c.shapes) {
        k++;
        ts.push_back(input(s, t, -2, 2, 90 + k, k % 4));
      }
      Tensor r = einsum(c.eq, ts);
      EXPECT_EQ(r.dtype(), t) << c.eq;
      Want w = nullptr;
      if (!c.host_eq.empty()) w = [he = c.host_eq](const std::vector<Host>& h) { return h_einsum(he, h); };
      b.add("einsum \"" + c.eq + "\" " + dname(t), r, ts, w, -1, t == DType::F16 ? 0.05 : -1);
    }
  // against other kiln ops
  Tensor x = input({2, 3, 4}, DType::F64, -2, 2, 1), y = input({2, 4, 5}, DType::F64, -2, 2, 2);
  b.add(
      "einsum batched matmul", einsum("...ij,...jk->...ik", {x, y}) - x.matmul(y), {},
      [](const std::vector<Host>&) { return V(30, 0.0); }, 0, 1e-12);
  b.run();
  EXPECT_EQ(einsum("...ij,...jk->...ik", {x, y.slice(0, 0, 1)}).shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(einsum("i...->...", {zeros({3, 2, 4})}).shape(), (Shape{2, 4}));
}

TEST(ShapeOps, Errors) {
  Tensor x = zeros({3, 4});
  expect_error([&] { x.split(0); }, {"kiln.split:", "positive", "0"});
  expect_error([&] { x.split(I{1, 1}); }, {"kiln.split:", "add up to 2", "size 3"});
  expect_error([&] { x.chunk(0); }, {"kiln.chunk:", "positive", "0"});
  expect_error([&] { x.chunk(-2); }, {"kiln.chunk:", "-2"});
  expect_error([&] { full({}, 1.0).unbind(); }, {"kiln.unbind:", "0-D"});
  expect_error([&] { x.unflatten(1, {3, 2}); }, {"kiln.unflatten:", "(3, 2)", "size 4"});
  expect_error([&] { x.repeat({2}); }, {"kiln.repeat:", "(3, 4)"});
  expect_error([&] { x.repeat({2, -1}); }, {"kiln.repeat:", "negative"});
  expect_error([&] { x.repeat_interleave(-1); }, {"kiln.repeat_interleave:", "-1"});
  expect_error([&] { x.roll({1, 2}, {0}); }, {"kiln.roll:", "differ in length"});
  expect_error([&] { x.roll({1}, {2}); }, {"kiln.roll:", "dim 2 out of range"});
  expect_error([&] { x.narrow(1, 3, 2); }, {"kiln.narrow:", "exceeds", "size 4"});
  expect_error([&] { x.narrow(1, -5, 1); }, {"kiln.narrow:", "-5"});
  expect_error([&] { x.pad({4, 0}, "reflect"); }, {"kiln.pad:", "reflect", "smaller"});
  expect_error([&] { x.pad({1, 0}, "circular"); }, {"kiln.pad:", "unknown mode 'circular'"});
  expect_error([&] { zeros({3, 0}).pad({1, 1}, "replicate"); }, {"kiln.pad:", "replicate", "empty"});
  expect_error([&] { cat({}, 0); }, {"kiln.cat:", "at least one"});
  expect_error([&] { cat({x, zeros({3, 5})}, 0); }, {"kiln.cat:", "(3, 5)", "(3, 4)"});
  expect_error([&] { cat({x, zeros({3})}, 0); }, {"kiln.cat:", "(3,)"});
  expect_error([&] { cat({x, x}, 2); }, {"kiln.cat:", "dim 2 out of range"});
  expect_error([&] { cat({full({}, 1.0)}, 0); }, {"kiln.cat:", "zero-dimensional"});
  expect_error([&] { stack({x, zeros({4, 3})}, 0); }, {"kiln.stack:", "(3, 4)", "(4, 3)"});
  expect_error([&] { stack({x}, 3); }, {"kiln.stack:", "dim 3"});
  expect_error([&] { einsum("ij,jk->ik", {x}); }, {"kiln.einsum:", "2 operands", "1 tensors"});
  expect_error([&] { einsum("ij,jk->ik", {x, zeros({5, 2})}); }, {"kiln.einsum:", "subscript j", "size 5"});
  expect_error([&] { einsum("ijk->i", {x}); }, {"kiln.einsum:", "(3, 4)", "does not fit"});
  expect_error([&] { einsum("ij->k", {x}); }, {"kiln.einsum:", "output subscript k"});
  expect_error([&] { einsum("ij->ii", {x}); }, {"kiln.einsum:", "appears twice"});
  expect_error([&] { einsum("i1->i", {x}); }, {"kiln.einsum:", "invalid character '1'"});
  expect_error([&] { einsum("i.j->i", {x}); }, {"kiln.einsum:", "..."});
  expect_error([&] { einsum("ii->i", {x}); }, {"kiln.einsum:", "subscript i", "size 4", "(3, 4)"});
}

}  // namespace
}  // namespace kiln
