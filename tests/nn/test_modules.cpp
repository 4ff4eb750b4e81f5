// nn::Module machinery (names, modes, state dicts, dtype casts, gradients) and the layers: shapes,
// PyTorch parameter counts, values against the reference interpreter and the functional ops.
#include <gtest/gtest.h>
#include <kiln/kiln.h>

#include <cmath>

#include "helpers.h"
#include "nn/nn_check.h"

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::expect_matches_reference;
using kiln::testing::expect_module_gradients;
using kiln::testing::expect_values;
using kiln::testing::parameter_names;
using kiln::testing::random_tensor;
using kiln::testing::set_parameters;
using Ts = std::vector<Tensor>;
using Names = std::vector<std::string>;

using kiln::testing::expect_same;
using kiln::testing::r;
using kiln::testing::r64;

namespace {
}  // namespace

// ---------------------------------------------------------------- module machinery

TEST(NNModule, LinearCountsNamesAndValues) {
  EXPECT_EQ(nn::Linear(784, 512)->num_parameters(), 401920);
  EXPECT_EQ(nn::Linear(784, 512, false)->num_parameters(), 401408);
  nn::Linear fc(5, 3);
  EXPECT_EQ(parameter_names(*fc), (Names{"weight", "bias"}));
  EXPECT_EQ(fc->weight.shape(), (Shape{3, 5}));
  EXPECT_TRUE(fc->weight.requires_grad() && fc->weight.is_leaf());
  Tensor x = r({2, 4, 5}, 1);
  Tensor y = fc(x);
  EXPECT_EQ(y.shape(), (Shape{2, 4, 3}));
  expect_matches_reference(y, 1e-5, 1e-6);
  expect_same(fc(x), x.matmul(fc->weight.t()) + fc->bias, 1e-6);
  EXPECT_EQ(parameter_names(*nn::Linear(5, 3, false)), (Names{"weight"}));
}

TEST(NNModule, DefaultInitIsReproducibleAndBounded) {
  manual_seed(5);
  nn::Linear a(16, 4);
  manual_seed(5);
  nn::Linear b(16, 4);
  expect_same(a->weight, b->weight);
  expect_same(a->bias, b->bias);
  for (double v : a->weight.to_vector<double>()) EXPECT_LE(std::fabs(v), 0.25);  // 1 / sqrt(16)
  nn::Linear c(16, 4);
  EXPECT_NE(a->weight.to_vector<float>(), c->weight.to_vector<float>());
  // Embedding N(0, 1); norms ones and zeros
  manual_seed(6);
  auto e = nn::Embedding(200, 50)->weight.to_vector<double>();
  double m = 0, s = 0;
  for (double v : e) m += v, s += v * v;
  m /= static_cast<double>(e.size()), s = std::sqrt(s / static_cast<double>(e.size()) - m * m);
  EXPECT_NEAR(m, 0, 0.05);
  EXPECT_NEAR(s, 1, 0.05);
  nn::LayerNorm ln(Shape{3});
  expect_values(ln->weight, {1, 1, 1});
  expect_values(ln->bias, {0, 0, 0});
}

TEST(NNModule, RecursiveNamesModesAndSequential) {
  nn::Sequential seq(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  EXPECT_EQ(parameter_names(*seq), (Names{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq->num_parameters(), 4 * 8 + 8 + 8 * 2 + 2);
  EXPECT_EQ(seq->size(), 3u);
  EXPECT_EQ(seq->children().size(), 3u);
  Tensor x = r({3, 4}, 2);
  auto l0 = seq->at<nn::LinearImpl>(0), l2 = seq->at<nn::LinearImpl>(2);
  expect_same(seq(x), l2->forward(l0->forward(x).relu()), 1e-6);
  // nesting, ModuleList and lambdas
  nn::Sequential outer(seq, nn::Sequential(nn::Tanh()));
  outer->push_back([](const Tensor& t) { return t * 2.0; });
  EXPECT_EQ(parameter_names(*outer)[0], "0.0.weight");
  expect_same(outer(x), seq(x).tanh() * 2.0, 1e-6);
  nn::ModuleList list(nn::Linear(2, 2), nn::BatchNorm1d(2));
  EXPECT_EQ(parameter_names(*list), (Names{"0.weight", "0.bias", "1.weight", "1.bias"}));
  auto bufs = list->named_buffers();
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_EQ(bufs[0].first, "1.running_mean");
  EXPECT_TRUE(outer->is_training());
  outer->eval();
  EXPECT_FALSE(outer->is_training());
  EXPECT_FALSE(seq->at<nn::LinearImpl>(0)->is_training());
  outer->train();
  EXPECT_TRUE(l2->is_training());
  expect_error([&] { seq->at<nn::LinearImpl>(7); }, {"Sequential", "index 7 out of range"});
  expect_error([] { nn::Linear(2, 2)->register_parameter("weight", zeros({1})); }, {"already registered"});
}

TEST(NNModule, StateDictRoundTripGivesIdenticalOutputs) {
  manual_seed(11);
  nn::Sequential a(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 2));
  Tensor x = r({6, 3}, 3);
  a(x);  // training mode: running statistics move
  realize(a->buffers());
  auto sd = a->state_dict();
  Names keys;
  for (auto& [k, v] : sd) keys.push_back(k);
  EXPECT_EQ(keys, (Names{"0.bias", "0.weight", "1.bias", "1.running_mean", "1.running_var", "1.weight",
                         "3.bias", "3.weight"}));
  EXPECT_GT(std::fabs(sd["1.running_mean"].to_vector<double>()[0]), 0);
  manual_seed(12);
  nn::Sequential b(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::ReLU(), nn::Linear(4, 2));
  Tensor w_before = b->at<nn::LinearImpl>(0)->weight;  // a handle taken before loading
  b->load_state_dict(sd);
  a->eval(), b->eval();
  expect_same(b(x), a(x));
  expect_same(w_before, a->at<nn::LinearImpl>(0)->weight);
  EXPECT_TRUE(w_before.is_leaf() && w_before.requires_grad());
  // the copies are independent: training b does not move a's leaves
  b->train();
  Tensor loss = b(x).sum();
  loss.backward();
  EXPECT_TRUE(b->at<nn::LinearImpl>(0)->weight.grad().defined());
  EXPECT_FALSE(a->at<nn::LinearImpl>(0)->weight.grad().defined());
  a(x).sum().backward();  // and a's leaves still get their own gradients
  for (auto& p : a->parameters()) EXPECT_TRUE(p.grad().defined());
}

TEST(NNModule, LoadStateDictErrorsNameTheKeys) {
  nn::Sequential m(nn::Linear(3, 4), nn::LayerNorm(Shape{4}));
  auto sd = m->state_dict();
  auto missing = sd;
  missing.erase("1.bias");
  expect_error([&] { m->load_state_dict(missing); }, {"load_state_dict", "missing keys: 1.bias"});
  auto extra = sd;
  extra["2.weight"] = zeros({2});
  expect_error([&] { m->load_state_dict(extra); }, {"unexpected keys: 2.weight"});
  auto shape = sd;
  shape["0.weight"] = zeros({4, 4});
  expect_error([&] { m->load_state_dict(shape); },
               {"shape mismatch for 0.weight: expected (4, 3), got (4, 4)"});
  auto dtype = sd;
  dtype["1.weight"] = zeros({4}, {.dtype = DType::F64});
  expect_error([&] { m->load_state_dict(dtype); }, {"dtype mismatch for 1.weight: expected f32, got f64"});
  // non-strict: missing and unexpected keys are fine, shapes are still checked
  extra.erase("0.bias");
  m->load_state_dict(extra, false);
  shape.erase("1.bias");
  expect_error([&] { m->load_state_dict(shape, false); }, {"shape mismatch for 0.weight"});
}

TEST(NNModule, ZeroGradAndToF64) {
  nn::Sequential m(nn::Linear(3, 4), nn::BatchNorm1d(4), nn::Tanh(), nn::Linear(4, 1));
  Tensor x = r({5, 3}, 4);
  m(x).sum().backward();
  for (auto& p : m->parameters()) EXPECT_TRUE(p.grad().defined());
  m->zero_grad();
  for (auto& p : m->parameters()) EXPECT_FALSE(p.grad().defined());
  Tensor y32 = m(x);
  m->to(DType::F64);
  for (auto& [n, p] : m->named_parameters()) {
    EXPECT_EQ(p.dtype(), DType::F64) << n;
    EXPECT_TRUE(p.is_leaf() && p.requires_grad()) << n;
  }
  for (auto& b : m->buffers()) EXPECT_EQ(b.dtype(), DType::F64);
  Tensor y64 = m(x.to(DType::F64));
  EXPECT_EQ(y64.dtype(), DType::F64);
  expect_same(y64, y32, 1e-5);
  y64.sum().backward();
  EXPECT_EQ(m->at<nn::LinearImpl>(0)->weight.grad().dtype(), DType::F64);
}

// ---------------------------------------------------------------- layers

TEST(NNLayers, ConvolutionsAndPooling) {
  nn::Conv2d conv(3, 8, 3, 1, 1);
  EXPECT_EQ(conv->num_parameters(), 224);
  EXPECT_EQ(nn::Conv2d(64, 128, 3)->num_parameters(), 73856);
  Tensor x = r({2, 3, 6, 6}, 5);
  Tensor y = conv(x);
  EXPECT_EQ(y.shape(), (Shape{2, 8, 6, 6}));
  expect_matches_reference(y, 1e-5, 1e-5);
  expect_same(y, F::conv2d(x, conv->weight, conv->bias, {1}, {1}), 1e-6);
  for (double v : conv->weight.to_vector<double>()) EXPECT_LE(std::fabs(v), 1 / std::sqrt(27.0));

  nn::Conv2d rect(3, 2, nn::Ints{3, 1}, nn::Ints{2, 1}, nn::Ints{0}, nn::Ints{1}, 1, false);
  EXPECT_EQ(rect->num_parameters(), 18);
  EXPECT_EQ(rect(x).shape(), (Shape{2, 2, 2, 6}));

  nn::Conv1d c1(4, 6, 3, 2);
  EXPECT_EQ(c1->num_parameters(), 78);
  Tensor x1 = r({2, 4, 9}, 6);
  EXPECT_EQ(c1(x1).shape(), (Shape{2, 6, 4}));
  expect_matches_reference(c1(x1), 1e-5, 1e-5);
  nn::Conv2d grouped(4, 4, 3, 1, 1, 1, 2);
  EXPECT_EQ(grouped->weight.shape(), (Shape{4, 2, 3, 3}));

  nn::ConvTranspose2d ct(4, 2, 3, 2, 1, 1);
  EXPECT_EQ(ct->num_parameters(), 74);
  Tensor xt = r({1, 4, 5, 5}, 7);
  Tensor yt = ct(xt);
  EXPECT_EQ(yt.shape(), (Shape{1, 2, 10, 10}));
  expect_matches_reference(yt, 1e-5, 1e-5);
  expect_same(yt, F::conv_transpose2d(xt, ct->weight, ct->bias, {2}, {1}, {1}), 1e-6);

  EXPECT_EQ(nn::MaxPool2d(2)(y).shape(), (Shape{2, 8, 3, 3}));
  expect_same(nn::MaxPool2d(2)(y), F::max_pool2d(y, {2}));
  expect_same(nn::AvgPool2d(3, 1, 1)(y), F::avg_pool2d(y, {3}, {1}, {1}));
  Tensor ad = nn::AdaptiveAvgPool2d(2)(y);
  EXPECT_EQ(ad.shape(), (Shape{2, 8, 2, 2}));
  expect_matches_reference(ad, 1e-5, 1e-6);
}

TEST(NNLayers, CnnReproducesTheFunctionalModel) {
  // the model of tests/frontend/test_models.cpp as modules, with its parameters
  nn::Sequential cnn(nn::Conv2d(3, 2, 3, 1, 1), nn::BatchNorm2d(2), nn::ReLU(), nn::MaxPool2d(2),
                     nn::Flatten(), nn::Linear(18, 3));
  cnn->to(DType::F64);
  Ts p{r64({2, 3, 3, 3}, 2, 0.5), r64({2}, 3), r64({2}, 4), r64({2}, 5), r64({3, 18}, 6, 0.5), r64({3}, 7)};
  set_parameters(*cnn, p);
  Tensor x = r64({2, 3, 6, 6}, 1);
  Tensor h = F::batch_norm(F::conv2d(x, p[0], p[1], {1}, {1}), nullptr, nullptr, p[2], p[3], true).relu();
  Tensor want = F::max_pool2d(h, {2}).flatten(1).matmul(p[4].t()) + p[5];
  Tensor got = cnn(x);
  expect_matches_reference(got, 1e-9, 1e-12);
  expect_same(got, want, 1e-12);
}

TEST(NNLayers, Norms) {
  Tensor x = r({2, 4, 3, 3}, 8);
  nn::LayerNorm ln(Shape{3, 3});
  EXPECT_EQ(ln->num_parameters(), 18);
  EXPECT_EQ(nn::LayerNorm(Shape{768})->num_parameters(), 1536);
  EXPECT_EQ(nn::LayerNorm(Shape{8}, 1e-5, true, false)->num_parameters(), 8);
  expect_same(ln(x), F::layer_norm(x, {3, 3}, ln->weight, ln->bias), 1e-6);
  expect_matches_reference(ln(x), 1e-5, 1e-5);
  nn::RMSNorm rms(Shape{3});
  EXPECT_EQ(rms->num_parameters(), 3);
  expect_same(rms(x), F::rms_norm(x, {3}, rms->weight), 1e-6);
  nn::GroupNorm gn(2, 4);
  EXPECT_EQ(gn->num_parameters(), 8);
  expect_same(gn(x), F::group_norm(x, 2, gn->weight, gn->bias), 1e-6);
  expect_matches_reference(gn(x), 1e-5, 1e-5);
}

TEST(NNLayers, BatchNormTrainAndEval) {
  nn::BatchNorm2d bn(4);
  EXPECT_EQ(bn->num_parameters(), 8);
  EXPECT_EQ(bn->named_buffers().size(), 2u);
  Tensor x = r({3, 4, 2, 2}, 9, 2) + 1.0;
  Tensor y = bn(x);  // batch statistics: per channel mean 0, variance 1
  auto mean = y.mean({0, 2, 3}).to_vector<double>();
  for (double m : mean) EXPECT_NEAR(m, 0, 1e-5);
  Tensor batch_mean = x.mean({0, 2, 3}), batch_var = x.var({0, 2, 3});  // unbiased
  expect_same(bn->running_mean, batch_mean * 0.1, 1e-6);
  expect_same(bn->running_var, batch_var * 0.1 + 0.9, 1e-6);
  bn->eval();
  Tensor rm = bn->running_mean, rv = bn->running_var;
  Tensor ye = bn(x);
  expect_same(ye, (x - rm.reshape({1, 4, 1, 1})) / (rv.reshape({1, 4, 1, 1}) + 1e-5).sqrt(), 1e-5);
  bn(x);
  expect_same(bn->running_mean, rm);  // eval leaves the statistics
  nn::BatchNorm1d bn1(3);
  EXPECT_EQ(bn1(r({4, 3}, 10)).shape(), (Shape{4, 3}));
  EXPECT_EQ(bn1(r({4, 3, 5}, 10)).shape(), (Shape{4, 3, 5}));
  nn::BatchNorm1d plain(3, 1e-5, 0.1, false, false);
  EXPECT_EQ(plain->num_parameters(), 0);
  EXPECT_TRUE(plain->named_buffers().empty());
  plain->eval();
  expect_same(plain(r({4, 3}, 10)),
              F::batch_norm(r({4, 3}, 10), nullptr, nullptr, std::nullopt, std::nullopt, true), 1e-6);
}

TEST(NNLayers, EmbeddingActivationsDropout) {
  nn::Embedding emb(10, 3);
  EXPECT_EQ(emb->num_parameters(), 30);
  Tensor idx = tensor(std::vector<int64_t>{1, 9, 0, 3, 3, 2}, {2, 3});
  Tensor e = emb(idx);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  expect_same(e, emb->weight.index_select(0, idx.reshape({6})).reshape({2, 3, 3}));

  Tensor x = r({3, 5}, 11, 3);
  expect_same(nn::ReLU()(x), x.relu());
  expect_same(nn::GELU()(x), x.gelu(), 1e-6);
  expect_same(nn::GELU("tanh")(x), x.gelu(true), 1e-6);
  expect_same(nn::SiLU()(x), x.silu(), 1e-6);
  expect_same(nn::Tanh()(x), x.tanh(), 1e-6);
  expect_same(nn::Sigmoid()(x), x.sigmoid(), 1e-6);
  expect_same(nn::LeakyReLU(0.2)(x), x.leaky_relu(0.2), 1e-6);
  expect_same(nn::ELU(0.5)(x), x.elu(0.5), 1e-6);
  expect_same(nn::Softmax(1)(x), x.softmax(1), 1e-6);
  expect_same(nn::LogSoftmax(0)(x), x.log_softmax(0), 1e-6);
  expect_same(nn::Identity()(x), x);
  expect_same(nn::Softmax(-1)(x).sum(1), ones({3}), 1e-6);
  expect_matches_reference(nn::GELU()(x));

  nn::Dropout drop(0.5);
  Tensor ones_in = ones({400});
  auto v = drop(ones_in).to_vector<float>();
  int zeros_n = 0;
  for (float f : v) {
    EXPECT_TRUE(f == 0.0f || f == 2.0f) << f;
    zeros_n += f == 0.0f;
  }
  EXPECT_GT(zeros_n, 140);
  EXPECT_LT(zeros_n, 260);
  drop->eval();
  expect_same(drop(ones_in), ones_in);
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "p must be in [0, 1]"});
  expect_error([] { nn::GELU("fast"); }, {"GELU", "approximate"});
}

TEST(NNLayers, BadInputsNameModuleAndShapes) {
  Tensor x = r({2, 3}, 12);
  expect_error([&] { nn::Linear(784, 512)(x); }, {"kiln.nn.Linear", "(..., 784)", "got (2, 3)"});
  expect_error([&] { nn::Conv2d(4, 2, 3)(r({1, 3, 5, 5}, 1)); }, {"Conv2d", "(N, 4, H, W)", "(1, 3, 5, 5)"});
  expect_error([&] { nn::Conv1d(4, 2, 3)(x); }, {"Conv1d", "(N, 4, L)", "(2, 3)"});
  expect_error([&] { nn::ConvTranspose2d(4, 2, 3)(x); }, {"ConvTranspose2d", "(N, 4, H, W)"});
  expect_error([&] { nn::LayerNorm(Shape{4})(x); }, {"LayerNorm", "(..., 4)", "(2, 3)"});
  expect_error([&] { nn::BatchNorm2d(3)(x); }, {"BatchNorm2d", "(N, 3, H, W)", "(2, 3)"});
  expect_error([&] { nn::BatchNorm1d(4)(x); }, {"BatchNorm1d", "(N, 4) or (N, 4, L)", "(2, 3)"});
  expect_error([&] { nn::GroupNorm(2, 4)(x); }, {"GroupNorm", "(N, 4, ...)", "(2, 3)"});
  expect_error([&] { nn::Embedding(4, 2)(x); }, {"Embedding", "integer indices", "f32", "(2, 3)"});
  expect_error([&] { nn::MaxPool2d(2)(x); }, {"MaxPool2d", "(N, C, H, W)", "(2, 3)"});
  expect_error([&] { nn::Softmax(2)(x); }, {"Softmax", "dim 2", "(2, 3)"});
  expect_error([&] { nn::Conv2d(3, 4, 3, 1, 0, 1, 2); },
               {"Conv2d", "groups (2) must divide in_channels (3)"});
  expect_error([&] { nn::GroupNorm(3, 4); }, {"GroupNorm", "num_groups (3) must divide num_channels (4)"});
  expect_error([&] { nn::Linear(0, 3); }, {"Linear", "in_features must be > 0, got 0"});
}

// ---------------------------------------------------------------- gradients

TEST(NNGrad, LinearAndConvGradients) {
  nn::Linear fc(3, 2);
  fc->to(DType::F64);
  expect_module_gradients(
      *fc, {r64({4, 3}, 13)}, [&](const Ts& in) { return fc(in[0]).tanh(); }, 41);
  nn::Conv2d conv(2, 2, 2);
  conv->to(DType::F64);
  expect_module_gradients(
      *conv, {r64({1, 2, 3, 3}, 14)}, [&](const Ts& in) { return conv(in[0]); }, 42);
}
