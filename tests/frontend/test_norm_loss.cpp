// Normalization, embedding and loss functionals (src/frontend/norm.cpp, loss.cpp): against the
// reference interpreter and against PyTorch's formulas computed in double here; kernel counts; errors.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "helpers.h"

namespace kiln {
namespace {

using testing::error_of;
using testing::expect_matches_reference;
using testing::expect_values;
using testing::random_tensor;
using V = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t kernels_for(const Tensor& t) {
  int64_t before = stats().kernels_run;
  t.realize();
  return stats().kernels_run - before;
}

// normalizes each row of `rows` rows x `len` values (host, double)
V norm_rows(const V& x, size_t rows, size_t len, double eps) {
  V y(x.size());
  for (size_t r = 0; r < rows; r++) {
    double m = 0, v = 0;
    for (size_t i = 0; i < len; i++) m += x[r * len + i];
    m /= static_cast<double>(len);
    for (size_t i = 0; i < len; i++) v += (x[r * len + i] - m) * (x[r * len + i] - m);
    v /= static_cast<double>(len);
    for (size_t i = 0; i < len; i++) y[r * len + i] = (x[r * len + i] - m) / std::sqrt(v + eps);
  }
  return y;
}

TEST(NormLoss, LayerNorm) {
  Tensor x = random_tensor({6, 4}, DType::F32, -3, 3, 1).t();  // non-contiguous (4, 6)
  Tensor w = random_tensor({6}, DType::F32, 0.5, 2, 2), b = random_tensor({6}, DType::F32, -1, 1, 3);
  Tensor y = F::layer_norm(x, {6}, w, b);
  auto g = y.node();
  EXPECT_LE(kernels_for(y), 3);
  expect_matches_reference(y, g, 1e-4, 1e-5);
  V want = norm_rows(x.contiguous().to_vector<double>(), 4, 6, 1e-5);
  auto wv = w.to_vector<double>(), bv = b.to_vector<double>();
  for (size_t i = 0; i < want.size(); i++) want[i] = want[i] * wv[i % 6] + bv[i % 6];
  expect_values(y, want, 1e-5, 1e-5);
  // two normalized dims, no affine, broadcasting batch dims; f16 / bf16 / f64; empty batch
  Tensor x3 = random_tensor({2, 3, 4}, DType::F64, -2, 2, 4);
  Tensor y3 = F::layer_norm(x3, {3, 4}, std::nullopt, std::nullopt, 1e-3);
  expect_values(y3, norm_rows(x3.to_vector<double>(), 2, 12, 1e-3), 1e-12, 1e-12);
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor yh = F::layer_norm(random_tensor({3, 8}, t, -2, 2, 5), {8});
    EXPECT_EQ(yh.dtype(), t);
    expect_matches_reference(yh, yh.node(), 3e-2, 1e-2);
  }
  EXPECT_EQ(F::layer_norm(zeros({0, 5}), {5}).shape(), (Shape{0, 5}));
}

TEST(NormLoss, RmsNorm) {
  Tensor x = random_tensor({3, 5}, DType::F32, -2, 2, 6), w = random_tensor({5}, DType::F32, 0.5, 1.5, 7);
  Tensor y = F::rms_norm(x, {5}, w);
  expect_matches_reference(y, y.node(), 1e-4, 1e-5);
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  V want(15);
  for (size_t r = 0; r < 3; r++) {
    double s = 0;
    for (size_t i = 0; i < 5; i++) s += xv[r * 5 + i] * xv[r * 5 + i];
    double inv = 1 / std::sqrt(s / 5 + std::numeric_limits<float>::epsilon());
    for (size_t i = 0; i < 5; i++) want[r * 5 + i] = xv[r * 5 + i] * inv * wv[i];
  }
  expect_values(y, want, 1e-5, 1e-6);
  Tensor y2 = F::rms_norm(x, {3, 5}, std::nullopt, 0.5);
  double s = 0;
  for (double v : xv) s += v * v;
  V want2;
  for (double v : xv) want2.push_back(v / std::sqrt(s / 15 + 0.5));
  expect_values(y2, want2, 1e-5, 1e-6);
}

TEST(NormLoss, BatchNorm) {
  Tensor x = random_tensor({4, 3, 5}, DType::F32, -2, 3, 8);
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor w = random_tensor({3}, DType::F32, 0.5, 2, 9), b = random_tensor({3}, DType::F32, -1, 1, 10);
  Tensor y = F::batch_norm(x, &rm, &rv, w, b, true, 0.2, 1e-5);
  expect_matches_reference(y, y.node(), 1e-4, 1e-5);
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
  V want(xv.size()), wrm(3), wrv(3);
  for (size_t c = 0; c < 3; c++) {
    double m = 0, v = 0;
    for (size_t n = 0; n < 4; n++)
      for (size_t l = 0; l < 5; l++) m += xv[n * 15 + c * 5 + l];
    m /= 20;
    for (size_t n = 0; n < 4; n++)
      for (size_t l = 0; l < 5; l++) v += std::pow(xv[n * 15 + c * 5 + l] - m, 2);
    for (size_t n = 0; n < 4; n++)
      for (size_t l = 0; l < 5; l++)
        want[n * 15 + c * 5 + l] = (xv[n * 15 + c * 5 + l] - m) / std::sqrt(v / 20 + 1e-5) * wv[c] + bv[c];
    wrm[c] = 0.8 * 0 + 0.2 * m;
    wrv[c] = 0.8 * 1 + 0.2 * v / 19;  // unbiased
  }
  expect_values(y, want, 1e-5, 1e-5);
  expect_values(rm, wrm, 1e-5, 1e-6);
  expect_values(rv, wrv, 1e-5, 1e-6);
  // eval mode uses the running statistics
  Tensor ye = F::batch_norm(x, &rm, &rv, std::nullopt, std::nullopt, false);
  V we(xv.size());
  for (size_t i = 0; i < xv.size(); i++) {
    size_t c = (i / 5) % 3;
    we[i] = (xv[i] - wrm[c]) / std::sqrt(wrv[c] + 1e-5);
  }
  expect_values(ye, we, 1e-5, 1e-5);
  // 2-D input, no running stats in training
  Tensor x2 = random_tensor({6, 2}, DType::F64, -1, 1, 11);
  Tensor y2 = F::batch_norm(x2, nullptr, nullptr, std::nullopt, std::nullopt, true);
  auto x2v = x2.t().contiguous().to_vector<double>();
  V n2 = norm_rows(x2v, 2, 6, 1e-5), w2(12);
  for (size_t i = 0; i < 6; i++)
    for (size_t c = 0; c < 2; c++) w2[i * 2 + c] = n2[c * 6 + i];
  expect_values(y2, w2, 1e-12, 1e-12);
}

TEST(NormLoss, GroupNorm) {
  Tensor x = random_tensor({2, 4, 3}, DType::F32, -2, 2, 12);
  Tensor w = random_tensor({4}, DType::F32, 0.5, 2, 13), b = random_tensor({4}, DType::F32, -1, 1, 14);
  Tensor y = F::group_norm(x, 2, w, b);
  expect_matches_reference(y, y.node(), 1e-4, 1e-5);
  V want = norm_rows(x.to_vector<double>(), 4, 6, 1e-5);
  auto wv = w.to_vector<double>(), bv = b.to_vector<double>();
  for (size_t i = 0; i < want.size(); i++) want[i] = want[i] * wv[(i / 3) % 4] + bv[(i / 3) % 4];
  expect_values(y, want, 1e-5, 1e-5);
}

TEST(NormLoss, Embedding) {
  Tensor w = random_tensor({5, 3}, DType::F32, -1, 1, 15);
  Tensor idx = tensor(std::vector<int64_t>{4, 0, 2, 2, 1, 3}, {2, 3});
  Tensor e = F::embedding(idx, w);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  expect_matches_reference(e, e.node(), 0, 0);
  auto wv = w.to_vector<double>();
  V want;
  for (int64_t i : {4, 0, 2, 2, 1, 3})
    for (int j = 0; j < 3; j++) want.push_back(wv[static_cast<size_t>(i * 3 + j)]);
  expect_values(e, want);
  expect_values(F::embedding(tensor(std::vector<int32_t>{1}), w), {wv[3], wv[4], wv[5]});
}

// PyTorch's cross_entropy for class indices, (N, C) logits, in double
double ce_host(const V& x, const std::vector<int64_t>& t, size_t n, size_t c, const V* w, int64_t ignore,
               const std::string& red, double eps, V* per) {
  double total = 0, wsum = 0;
  for (size_t i = 0; i < n; i++) {
    double m = -INFINITY, s = 0;
    for (size_t k = 0; k < c; k++) m = std::max(m, x[i * c + k]);
    for (size_t k = 0; k < c; k++) s += std::exp(x[i * c + k] - m);
    auto lp = [&](size_t k) { return x[i * c + k] - m - std::log(s); };
    double li = 0;
    if (t[i] != ignore) {
      auto ti = static_cast<size_t>(t[i]);
      double wt = w ? (*w)[ti] : 1;
      double smooth = 0;
      for (size_t k = 0; k < c; k++) smooth -= lp(k) * (w ? (*w)[k] : 1);
      li = (1 - eps) * (-lp(ti) * wt) + eps / static_cast<double>(c) * smooth;
      wsum += wt;
    }
    if (per) per->push_back(li);
    total += li;
  }
  return red == "sum" ? total : total / wsum;
}

TEST(NormLoss, CrossEntropyClassIndices) {
  const size_t n = 6, c = 4;
  Tensor x = random_tensor({n, c}, DType::F32, -3, 3, 16);
  std::vector<int64_t> tv = {0, 3, -100, 2, 1, 3};
  Tensor t = tensor(tv);
  Tensor w = tensor({0.5f, 2.0f, 1.0f, 1.5f});
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  for (const char* red : {"mean", "sum", "none"})
    for (double eps : {0.0, 0.2})
      for (bool weighted : {false, true}) {
        SCOPED_TRACE(std::string(red) + " eps=" + std::to_string(eps) +
                     " weighted=" + std::to_string(weighted));
        Tensor l = F::cross_entropy(x, t, weighted ? std::optional<Tensor>(w) : std::nullopt, -100, red, eps);
        auto g = l.node();
        if (std::string(red) != "none") {
          EXPECT_LE(kernels_for(l), 3);
        }
        expect_matches_reference(l, g, 1e-4, 1e-5);
        V per;
        double want = ce_host(xv, tv, n, c, weighted ? &wv : nullptr, -100, red, eps, &per);
        if (std::string(red) == "none")
          expect_values(l, per, 1e-5, 1e-6);
        else
          expect_values(l, {want}, 1e-5, 1e-6);
      }
  // ignore_index inside the class range; all targets ignored gives NaN for mean, 0 for sum
  std::vector<int64_t> tv2 = {0, 3, 1, 2, 1, 3};
  Tensor l1 = F::cross_entropy(x, tensor(tv2), w, 3, "mean", 0.1);
  expect_values(l1, {ce_host(xv, tv2, n, c, &wv, 3, "mean", 0.1, nullptr)}, 1e-5);
  Tensor all = full({n}, Scalar(7));
  expect_values(F::cross_entropy(x, all, std::nullopt, 7), {kNaN});
  expect_values(F::cross_entropy(x, all, std::nullopt, 7, "sum"), {0});
  // nll_loss on log-probabilities equals cross_entropy; (N, C, d) layout; 1-D input; large logits
  Tensor lp = x - (x.exp().sum(1, true)).log();
  expect_values(F::nll_loss(lp, t, w), {ce_host(xv, tv, n, c, &wv, -100, "mean", 0, nullptr)}, 1e-5);
  Tensor x3 = random_tensor({2, 3, 4}, DType::F32, -2, 2, 17);  // (N, C, d)
  Tensor t3 = tensor(std::vector<int64_t>{0, 2, 1, 1, 2, 0, 0, 1}, {2, 4});
  Tensor l3 = F::cross_entropy(x3, t3, std::nullopt, -100, "none");
  EXPECT_EQ(l3.shape(), (Shape{2, 4}));
  Tensor x3t = x3.permute({0, 2, 1}).reshape({8, 3});
  auto want3 = V();
  ce_host(x3t.contiguous().to_vector<double>(), {0, 2, 1, 1, 2, 0, 0, 1}, 8, 3, nullptr, -100, "none", 0,
          &want3);
  expect_values(l3, want3, 1e-5, 1e-6);
  expect_values(F::cross_entropy(tensor({1.0f, 2.0f, 3.0f}), tensor(std::vector<int64_t>{2}).reshape({})),
                {std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3}, 1e-6);
  expect_values(F::cross_entropy(tensor({1000.0f, 0.0f, -1000.0f}, {1, 3}), tensor(std::vector<int64_t>{1})),
                {1000}, 1e-6);
  // half input
  Tensor lh = F::cross_entropy(x.to(DType::BF16), t);
  EXPECT_EQ(lh.dtype(), DType::BF16);
  expect_matches_reference(lh, lh.node(), 3e-2, 1e-2);
}

TEST(NormLoss, CrossEntropyProbabilities) {
  Tensor x = random_tensor({3, 4}, DType::F32, -2, 2, 18);
  Tensor p = random_tensor({3, 4}, DType::F32, 0, 1, 19).softmax(1);
  Tensor w = tensor({1.0f, 2.0f, 0.5f, 1.0f});
  auto xv = x.to_vector<double>(), pv = p.to_vector<double>(), wv = w.to_vector<double>();
  for (double eps : {0.0, 0.1}) {
    V per(3);
    for (size_t i = 0; i < 3; i++) {
      double m = -INFINITY, s = 0;
      for (size_t k = 0; k < 4; k++) m = std::max(m, xv[i * 4 + k]);
      for (size_t k = 0; k < 4; k++) s += std::exp(xv[i * 4 + k] - m);
      for (size_t k = 0; k < 4; k++)
        per[i] -= (xv[i * 4 + k] - m - std::log(s)) * (pv[i * 4 + k] * (1 - eps) + eps / 4) * wv[k];
    }
    Tensor l = F::cross_entropy(x, p, w, -100, "none", eps);
    expect_matches_reference(l, l.node(), 1e-4, 1e-5);
    expect_values(l, per, 1e-5, 1e-6);
    expect_values(F::cross_entropy(x, p, w, -100, "mean", eps), {(per[0] + per[1] + per[2]) / 3}, 1e-5);
    expect_values(F::cross_entropy(x, p, w, -100, "sum", eps), {per[0] + per[1] + per[2]}, 1e-5);
  }
}

TEST(NormLoss, PointwiseLosses) {
  Tensor x = random_tensor({3, 5}, DType::F32, -2, 2, 20), y = random_tensor({3, 5}, DType::F32, -2, 2, 21);
  Tensor pr = random_tensor({3, 5}, DType::F32, 0.01, 0.99, 22),
         tg = random_tensor({3, 5}, DType::F32, 0, 1, 23);
  Tensor wt = random_tensor({5}, DType::F32, 0.5, 2, 24), pw = random_tensor({5}, DType::F32, 0.5, 3, 25);
  auto xv = x.to_vector<double>(), yv = y.to_vector<double>(), pv = pr.to_vector<double>(),
       tv = tg.to_vector<double>(), wv = wt.to_vector<double>(), pwv = pw.to_vector<double>();
  auto check = [&](const char* name, const std::function<Tensor(const std::string&)>& f,
                   const std::function<double(size_t)>& h) {
    SCOPED_TRACE(name);
    V per;
    double sum = 0;
    for (size_t i = 0; i < 15; i++) per.push_back(h(i)), sum += per.back();
    Tensor none = f("none");
    expect_matches_reference(none, none.node(), 1e-4, 1e-5);
    expect_values(none, per, 1e-5, 1e-6);
    expect_values(f("sum"), {sum}, 1e-5, 1e-5);
    expect_values(f("mean"), {sum / 15}, 1e-5, 1e-6);
  };
  check(
      "mse", [&](auto& r) { return F::mse_loss(x, y, r); },
      [&](size_t i) { return std::pow(xv[i] - yv[i], 2); });
  check(
      "l1", [&](auto& r) { return F::l1_loss(x, y, r); }, [&](size_t i) { return std::fabs(xv[i] - yv[i]); });
  check(
      "smooth_l1", [&](auto& r) { return F::smooth_l1_loss(x, y, r, 0.7); },
      [&](size_t i) {
        double d = std::fabs(xv[i] - yv[i]);
        return d < 0.7 ? 0.5 * d * d / 0.7 : d - 0.35;
      });
  check(
      "huber", [&](auto& r) { return F::huber_loss(x, y, r, 1.3); },
      [&](size_t i) {
        double d = std::fabs(xv[i] - yv[i]);
        return d < 1.3 ? 0.5 * d * d : 1.3 * (d - 0.65);
      });
  check(
      "bce", [&](auto& r) { return F::binary_cross_entropy(pr, tg, wt, r); },
      [&](size_t i) { return -wv[i % 5] * (tv[i] * std::log(pv[i]) + (1 - tv[i]) * std::log(1 - pv[i])); });
  check(
      "bce_logits", [&](auto& r) { return F::binary_cross_entropy_with_logits(x, tg, wt, r, pw); },
      [&](size_t i) {
        double s = 1 / (1 + std::exp(-xv[i]));
        return -wv[i % 5] * (pwv[i % 5] * tv[i] * std::log(s) + (1 - tv[i]) * std::log(1 - s));
      });
  check(
      "kl_div", [&](auto& r) { return F::kl_div(x, tg, r); },
      [&](size_t i) { return tv[i] * (std::log(tv[i]) - xv[i]); });
  check(
      "kl_div_log", [&](auto& r) { return F::kl_div(x, y, r, true); },
      [&](size_t i) { return std::exp(yv[i]) * (yv[i] - xv[i]); });
  // edge cases: log clamped at -100, 0 log 0 = 0, huge logits, batchmean, empty mean is NaN
  expect_values(F::binary_cross_entropy(tensor({0.0f, 1.0f}), tensor({1.0f, 0.0f}), std::nullopt, "none"),
                {100, 100});
  expect_values(F::kl_div(tensor({-1.0f}), tensor({0.0f}), "sum"), {0});
  expect_values(F::binary_cross_entropy_with_logits(tensor({100.0f, -100.0f}), tensor({0.0f, 1.0f}),
                                                    std::nullopt, "none"),
                {100, 100}, 1e-6);
  expect_values(F::kl_div(x, tg, "batchmean"), {F::kl_div(x, tg, "sum").item<float>() / 3.0}, 1e-6);
  expect_values(F::mse_loss(zeros({0}), zeros({0})), {kNaN});
}

TEST(NormLoss, Errors) {
  Tensor x = zeros({4, 3});
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
  };
  has(error_of([&] {
        F::cross_entropy(x, zeros({4, 2}, {.dtype = DType::I64}));
      }),
      "kiln.cross_entropy: class-index target must have shape (4,) for input (4, 3), got (4, 2)");
  has(error_of([&] {
        F::cross_entropy(x, zeros({4, 2}));
      }),
      "kiln.cross_entropy: probability target must have the input's shape (4, 3)");
  has(error_of([&] { F::cross_entropy(x, zeros({4}, {.dtype = DType::I64}), std::nullopt, -100, "avg"); }),
      "kiln.cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"");
  has(error_of([&] { F::cross_entropy(x, zeros({4}, {.dtype = DType::I64}), zeros({2})); }),
      "kiln.cross_entropy: weight must have shape (3,), got (2,)");
  has(error_of(
          [&] { F::cross_entropy(x, zeros({4}, {.dtype = DType::I64}), std::nullopt, -100, "mean", 1.5); }),
      "kiln.cross_entropy: label_smoothing must be in [0, 1]");
  has(error_of([&] { F::nll_loss(x, zeros({4})); }),
      "kiln.nll_loss: target must be integer class indices, got f32");
  has(error_of([&] { F::mse_loss(x, zeros({5})); }),
      "kiln.mse_loss: shapes (4, 3) and (5,) cannot be broadcast");
  has(error_of([&] { F::binary_cross_entropy(x, zeros({3})); }),
      "kiln.binary_cross_entropy: target shape (3,) must equal input shape (4, 3)");
  has(error_of([&] {
        F::group_norm(zeros({2, 6, 3}), 4);
      }),
      "kiln.group_norm: num_groups (4) must divide the number of channels (6) of input (2, 6, 3)");
  has(error_of([&] { F::layer_norm(x, {4}); }),
      "kiln.layer_norm: normalized_shape (4,) does not match the trailing dims of input (4, 3)");
  has(error_of([&] { F::layer_norm(x, {3}, zeros({2})); }),
      "kiln.layer_norm: weight must have shape (3,), got (2,)");
  has(error_of([&] {
        F::batch_norm(zeros({1, 3}), nullptr, nullptr, std::nullopt, std::nullopt, true);
      }),
      "kiln.batch_norm: expected more than 1 value per channel when training");
  has(error_of([&] { F::batch_norm(x, nullptr, nullptr); }),
      "kiln.batch_norm: running_mean and running_var must be given in evaluation mode");
  has(error_of([&] {
        F::embedding(zeros({2}), zeros({3, 2}));
      }),
      "kiln.embedding: indices must be an integer tensor");
  has(error_of([&] { F::kl_div(x, x, "batch"); }), "or \"batchmean\", got \"batch\"");
}

}  // namespace
}  // namespace kiln
