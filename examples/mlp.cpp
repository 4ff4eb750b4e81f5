// An MLP classifier (nn::Sequential of Linear/ReLU, AdamW, a shuffling DataLoader): on MNIST idx files
// when given, else on 4 interleaved 2-D spirals generated here; reports train and held-out accuracy.
//   build/examples/mlp [--images F --labels F] [--epochs N]
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "example_args.h"

using namespace kiln;

namespace {

// Features (n, dim) and labels (n,) on the host.
struct HostData {
  std::vector<float> x;
  std::vector<int64_t> y;
  int64_t dim = 0, classes = 0;
  int64_t size() const { return static_cast<int64_t>(y.size()); }
};

// 4 spiral arms, each turning 1.25 times around the origin, with Gaussian noise.
HostData spirals(int64_t n, std::mt19937& rng) {
  HostData d;
  d.dim = 2, d.classes = 4;
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 0.04);
  for (int64_t i = 0; i < n; i++) {
    int64_t c = i % 4;
    double r = 0.1 + 0.9 * u(rng);
    double a = 2 * std::numbers::pi * (1.25 * r + 0.25 * static_cast<double>(c));
    d.x.push_back(static_cast<float>(r * std::cos(a) + noise(rng)));
    d.x.push_back(static_cast<float>(r * std::sin(a) + noise(rng)));
    d.y.push_back(c);
  }
  return d;
}

// MNIST images flattened to 784 floats in [0, 1].
HostData mnist(const std::string& images, const std::string& labels) {
  data::TensorDataset ds = data::mnist_dataset(images, labels);
  HostData d;
  d.classes = 10;
  for (int64_t i = 0; i < ds.size(); i++) {
    data::HostExample e = ds.get_host(i);
    d.dim = e[0].numel();
    for (uint8_t p : e[0].bytes) d.x.push_back(static_cast<float>(p) / 255.0f);
    int64_t label;
    std::memcpy(&label, e[1].bytes.data(), sizeof label);
    d.y.push_back(label);
  }
  return d;
}

// Rows [begin, end) of d as a TensorDataset-ready pair of tensors.
std::pair<Tensor, Tensor> rows(const HostData& d, int64_t begin, int64_t end) {
  std::vector<float> x(d.x.begin() + begin * d.dim, d.x.begin() + end * d.dim);
  std::vector<int64_t> y(d.y.begin() + begin, d.y.begin() + end);
  return {tensor(x, {end - begin, d.dim}), tensor(y, {end - begin})};
}

double accuracy(const nn::Sequential& model, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  auto pred = model(x).argmax(1).to_vector<int64_t>();
  auto want = y.to_vector<int64_t>();
  int64_t ok = 0;
  for (size_t i = 0; i < want.size(); i++) ok += pred[i] == want[i];
  return static_cast<double>(ok) / static_cast<double>(want.size());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string images, labels;
    int64_t epochs = -1;
    for (int i = 1; i < argc; i++) {
      std::string s = argv[i];
      if (i + 1 >= argc) throw Error("mlp: unknown argument or missing value: " + s);
      if (s == "--images")
        images = argv[++i];
      else if (s == "--labels")
        labels = argv[++i];
      else if (s == "--epochs")
        epochs = whole_number_arg("mlp", "--epochs", argv[++i], 1, 1000000);
      else
        throw Error("mlp: unknown argument " + s + " (usage: mlp [--images F --labels F] [--epochs N])");
    }
    if (images.empty() != labels.empty()) throw Error("mlp: --images and --labels go together");
    const bool use_mnist = !images.empty();

    manual_seed(0);
    std::mt19937 rng(0);
    HostData all = use_mnist ? mnist(images, labels) : spirals(2000, rng);
    const int64_t n_train = all.size() * 4 / 5;  // the last 20% are held out
    auto [x_train, y_train] = rows(all, 0, n_train);
    auto [x_test, y_test] = rows(all, n_train, all.size());
    data::TensorDataset train_set({x_train, y_train});
    data::DataLoader loader(train_set, {.batch_size = use_mnist ? 128 : 64, .shuffle = true, .seed = 1});

    const int64_t hidden = use_mnist ? 256 : 64;
    nn::Sequential model(nn::Linear(all.dim, hidden), nn::ReLU(), nn::Linear(hidden, hidden), nn::ReLU(),
                         nn::Linear(hidden, all.classes));
    optim::AdamW opt(model->parameters(), {.lr = use_mnist ? 1e-3 : 1e-2, .weight_decay = 1e-4});
    if (epochs < 0) epochs = use_mnist ? 3 : 40;
    std::printf("mlp: %lld parameters, %lld training and %lld held-out examples (%s)\n",
                static_cast<long long>(model->num_parameters()), static_cast<long long>(n_train),
                static_cast<long long>(all.size() - n_train), use_mnist ? images.c_str() : "4 spirals");

    auto t0 = std::chrono::steady_clock::now();
    for (int64_t e = 0; e < epochs; e++) {
      double total = 0;
      int64_t batches = 0;
      for (const data::Example& b : loader) {
        Tensor loss = F::cross_entropy(model(b[0]), b[1]);
        opt.zero_grad();
        loss.backward();
        opt.step();
        total += loss.item<float>();
        batches++;
      }
      if (e % 10 == 9 || e + 1 == epochs || use_mnist)
        std::printf("epoch %3lld  loss %.4f\n", static_cast<long long>(e + 1),
                    total / static_cast<double>(batches));
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double train_acc = accuracy(model, x_train, y_train), test_acc = accuracy(model, x_test, y_test);
    std::printf("trained %lld epochs in %.1f s: train accuracy %.1f%%, held-out accuracy %.1f%%\n",
                static_cast<long long>(epochs), secs, 100 * train_acc, 100 * test_acc);
    return test_acc > 0.9 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
