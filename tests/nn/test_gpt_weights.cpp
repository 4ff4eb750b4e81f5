// GPT-2 weights from other programs' files: a tiny model written in the Hugging Face safetensors
// layout and as an llm.c checkpoint, loaded into nn::GPT, gives the logits of an independent
// float64 forward pass over the same numbers.
#include <gtest/gtest.h>
#include <kiln/io.h>
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "helpers.h"

using namespace kiln;
using kiln::testing::error_of;
using kiln::testing::TempCache;

namespace {

constexpr int64_t V = 11, T = 6, L = 2, H = 2, C = 8, Vp = 16;
using Mat = std::vector<double>;  // row-major

// The weights in Hugging Face's layout: Conv1D weights (in, out).
struct Weights {
  std::map<std::string, std::pair<std::vector<int64_t>, Mat>> w;
  uint64_t state = 88172645463325252ull;
  double draw(double scale) {  // xorshift, uniform in [-scale, scale)
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return scale * (static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1);
  }
  void add(const std::string& name, std::vector<int64_t> shape, double scale, double offset = 0) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    Mat m(static_cast<size_t>(n));
    for (auto& x : m) x = static_cast<double>(static_cast<float>(offset + draw(scale)));
    w[name] = {shape, m};
  }
  const Mat& operator[](const std::string& n) const { return w.at(n).second; }
  Weights() {
    add("wte.weight", {Vp, C}, 0.5);  // the rows past V are llm.c's padding
    add("wpe.weight", {T, C}, 0.5);
    for (int l = 0; l < L; l++) {
      std::string p = "h." + std::to_string(l) + ".";
      add(p + "ln_1.weight", {C}, 0.2, 1), add(p + "ln_1.bias", {C}, 0.2);
      add(p + "attn.c_attn.weight", {C, 3 * C}, 0.4), add(p + "attn.c_attn.bias", {3 * C}, 0.1);
      add(p + "attn.c_proj.weight", {C, C}, 0.4), add(p + "attn.c_proj.bias", {C}, 0.1);
      add(p + "ln_2.weight", {C}, 0.2, 1), add(p + "ln_2.bias", {C}, 0.2);
      add(p + "mlp.c_fc.weight", {C, 4 * C}, 0.4), add(p + "mlp.c_fc.bias", {4 * C}, 0.1);
      add(p + "mlp.c_proj.weight", {4 * C, C}, 0.3), add(p + "mlp.c_proj.bias", {C}, 0.1);
    }
    add("ln_f.weight", {C}, 0.2, 1), add("ln_f.bias", {C}, 0.2);
  }
};

// x (n, in) @ w (in, out) + b
Mat affine(const Mat& x, int64_t n, int64_t in, const Mat& w, const Mat& b, int64_t out) {
  Mat y(static_cast<size_t>(n * out));
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < out; j++) {
      double s = b[static_cast<size_t>(j)];
      for (int64_t k = 0; k < in; k++)
        s += x[static_cast<size_t>(i * in + k)] * w[static_cast<size_t>(k * out + j)];
      y[static_cast<size_t>(i * out + j)] = s;
    }
  return y;
}
Mat layer_norm(const Mat& x, const Mat& g, const Mat& b) {
  Mat y(x.size());
  for (int64_t t = 0; t < T; t++) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; c++) mean += x[static_cast<size_t>(t * C + c)] / C;
    for (int64_t c = 0; c < C; c++) var += std::pow(x[static_cast<size_t>(t * C + c)] - mean, 2) / C;
    for (int64_t c = 0; c < C; c++)
      y[static_cast<size_t>(t * C + c)] =
          (x[static_cast<size_t>(t * C + c)] - mean) / std::sqrt(var + 1e-5) * g[static_cast<size_t>(c)] +
          b[static_cast<size_t>(c)];
  }
  return y;
}

// GPT-2's forward in float64 from the Hugging Face layout: logits (T, V) of one sequence.
Mat reference_logits(const Weights& w, const std::vector<int64_t>& tok) {
  Mat x(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; t++)
    for (int64_t c = 0; c < C; c++)
      x[static_cast<size_t>(t * C + c)] =
          w["wte.weight"][static_cast<size_t>(tok[static_cast<size_t>(t)] * C + c)] +
          w["wpe.weight"][static_cast<size_t>(t * C + c)];
  const int64_t hd = C / H;
  for (int l = 0; l < L; l++) {
    std::string p = "h." + std::to_string(l) + ".";
    Mat qkv = affine(layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"]), T, C,
                     w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"], 3 * C);
    Mat y(static_cast<size_t>(T * C), 0.0);
    for (int64_t hh = 0; hh < H; hh++)
      for (int64_t t = 0; t < T; t++) {
        std::vector<double> a(static_cast<size_t>(t + 1));
        double mx = -1e300, sum = 0;
        for (int64_t s = 0; s <= t; s++) {
          double d = 0;
          for (int64_t k = 0; k < hd; k++)
            d += qkv[static_cast<size_t>(t * 3 * C + hh * hd + k)] *
                 qkv[static_cast<size_t>(s * 3 * C + C + hh * hd + k)];
          a[static_cast<size_t>(s)] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, a[static_cast<size_t>(s)]);
        }
        for (auto& e : a) sum += (e = std::exp(e - mx));
        for (int64_t s = 0; s <= t; s++)
          for (int64_t k = 0; k < hd; k++)
            y[static_cast<size_t>(t * C + hh * hd + k)] +=
                a[static_cast<size_t>(s)] / sum * qkv[static_cast<size_t>(s * 3 * C + 2 * C + hh * hd + k)];
      }
    Mat o = affine(y, T, C, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"], C);
    for (size_t i = 0; i < x.size(); i++) x[i] += o[i];
    Mat f = affine(layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"]), T, C, w[p + "mlp.c_fc.weight"],
                   w[p + "mlp.c_fc.bias"], 4 * C);
    for (auto& v : f) v = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    Mat m = affine(f, T, 4 * C, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"], C);
    for (size_t i = 0; i < x.size(); i++) x[i] += m[i];
  }
  x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"]);
  Mat logits(static_cast<size_t>(T * V));
  for (int64_t t = 0; t < T; t++)
    for (int64_t v = 0; v < V; v++) {
      double s = 0;
      for (int64_t c = 0; c < C; c++)
        s += x[static_cast<size_t>(t * C + c)] * w["wte.weight"][static_cast<size_t>(v * C + c)];
      logits[static_cast<size_t>(t * V + v)] = s;
    }
  return logits;
}

Tensor as_tensor(const Mat& m, std::vector<int64_t> shape) {
  return tensor(std::vector<float>(m.begin(), m.end()), Shape(shape.begin(), shape.end()));
}

void expect_logits(nn::GPT& model, const Weights& w) {
  std::vector<int64_t> tok = {3, 0, 10, 7, 7, 1};
  Mat want = reference_logits(w, tok);
  std::vector<float> got = model->forward(tensor(tok, {1, T})).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

// The llm.c layout: a 256-int header, then each parameter (out, in) in llm.c's order.
std::string llmc_file(const TempCache& dir, const Weights& w, int version) {
  std::vector<float> all;
  auto put = [&](const Mat& m) { all.insert(all.end(), m.begin(), m.end()); };
  auto transposed = [&](const std::string& n) {
    auto& [shape, m] = w.w.at(n);
    Mat t(m.size());
    for (int64_t i = 0; i < shape[0]; i++)
      for (int64_t j = 0; j < shape[1]; j++)
        t[static_cast<size_t>(j * shape[0] + i)] = m[static_cast<size_t>(i * shape[1] + j)];
    return t;
  };
  auto layers = [&](const std::string& leaf, bool conv) {
    for (int l = 0; l < L; l++) {
      std::string n = "h." + std::to_string(l) + "." + leaf;
      put(conv ? transposed(n) : w[n]);
    }
  };
  put(w["wte.weight"]), put(w["wpe.weight"]);
  layers("ln_1.weight", false), layers("ln_1.bias", false), layers("attn.c_attn.weight", true);
  layers("attn.c_attn.bias", false), layers("attn.c_proj.weight", true), layers("attn.c_proj.bias", false);
  layers("ln_2.weight", false), layers("ln_2.bias", false), layers("mlp.c_fc.weight", true);
  layers("mlp.c_fc.bias", false), layers("mlp.c_proj.weight", true), layers("mlp.c_proj.bias", false);
  put(w["ln_f.weight"]), put(w["ln_f.bias"]);
  int32_t h[256] = {20240326, version, T, V, L, H, C, Vp};
  std::filesystem::create_directories(dir.dir);
  std::string path = (dir.dir / ("model_v" + std::to_string(version) + ".bin")).string();
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h), sizeof h);
  for (float x : all) {
    if (version == 3) {
      f.write(reinterpret_cast<const char*>(&x), 4);
    } else {  // bf16, truncated (the test's values are bf16-exact)
      uint32_t u;
      std::memcpy(&u, &x, 4);
      uint16_t b = static_cast<uint16_t>(u >> 16);
      f.write(reinterpret_cast<const char*>(&b), 2);
    }
  }
  return path;
}

}  // namespace

TEST(GPTWeights, HuggingFaceSafetensorsGiveTheReferenceLogits) {
  Weights w;
  TempCache dir("kiln_gpt2_hf_");
  std::filesystem::create_directories(dir.dir);
  std::map<std::string, Tensor> file;
  for (auto& [name, sm] : w.w) {
    Mat m = sm.second;
    std::vector<int64_t> shape = sm.first;
    if (name == "wte.weight") m.resize(static_cast<size_t>(V * C)), shape = {V, C};
    file["transformer." + name] = as_tensor(m, shape);
  }
  for (int l = 0; l < L; l++)  // the causal-mask buffer older files hold
    file["transformer.h." + std::to_string(l) + ".attn.bias"] = ones({1, 1, T, T});
  file["lm_head.weight"] = file["transformer.wte.weight"];
  std::string path = (dir.dir / "model.safetensors").string();
  io::save_safetensors(path, file);
  nn::GPTConfig cfg;
  cfg.vocab_size = V, cfg.block_size = T, cfg.n_layer = L, cfg.n_head = H, cfg.n_embd = C;
  nn::GPT model(cfg);
  nn::load_gpt2_safetensors(model, path);
  expect_logits(model, w);
  // a model of another size names what does not fit
  cfg.n_embd = 2 * C;
  nn::GPT other(cfg);
  EXPECT_NE(error_of([&] { nn::load_gpt2_safetensors(other, path); }).find("wte.weight"), std::string::npos);
}

TEST(GPTWeights, LlmcCheckpointsGiveTheReferenceLogits) {
  Weights w;
  TempCache dir("kiln_gpt2_llmc_");
  nn::GPT f32 = nn::load_llmc_checkpoint(llmc_file(dir, w, 3));
  EXPECT_EQ(f32->config().vocab_size, V);
  expect_logits(f32, w);
  // bf16: the same numbers rounded to bf16 on both sides
  Weights b = w;
  for (auto& [name, sm] : b.w)
    for (auto& x : sm.second) {
      float f = static_cast<float>(x);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      u &= 0xffff0000u;
      std::memcpy(&f, &u, 4);
      x = f;
    }
  nn::GPT bf16 = nn::load_llmc_checkpoint(llmc_file(dir, b, 5));
  expect_logits(bf16, b);
}

TEST(GPTWeights, BadLlmcFilesAreErrors) {
  Weights w;
  TempCache dir("kiln_gpt2_bad_");
  std::string good = llmc_file(dir, w, 3);
  auto damaged = [&](const std::string& name, auto edit) {
    std::ifstream in(good, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    edit(bytes);
    std::string p = (dir.dir / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return error_of([&] { nn::load_llmc_checkpoint(p); });
  };
  EXPECT_NE(damaged("short.bin", [](std::string& s) { s.resize(s.size() - 4); }).find("bytes of parameters"),
            std::string::npos);
  EXPECT_NE(damaged("magic.bin", [](std::string& s) { s[0] = 1; }).find("not an llm.c"), std::string::npos);
  EXPECT_NE(damaged("layers.bin",
                    [](std::string& s) {
                      int32_t v = 1 << 30;
                      std::memcpy(&s[16], &v, 4);
                    })
                .find("num_layers"),
            std::string::npos);
  EXPECT_NE(error_of([&] { nn::load_llmc_checkpoint(dir.dir.string()); }).find("is a directory"),
            std::string::npos);
}
