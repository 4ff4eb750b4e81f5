// A small CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Linear) trained on generated 12x12 images of a
// horizontal, vertical or diagonal bar in noise (3 classes); reports train and held-out accuracy.
//   build/examples/cnn [--epochs N]
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "example_args.h"

using namespace kiln;

namespace {

constexpr int64_t kSize = 12, kClasses = 3;

// n images (n, 1, 12, 12) and labels (n,): a bar of length 4-8 at a random place, plus noise.
std::pair<Tensor, Tensor> bars(int64_t n, std::mt19937& rng) {
  std::vector<float> x;
  std::vector<int64_t> y;
  std::normal_distribution<float> noise(0, 0.35f);
  std::uniform_int_distribution<int64_t> len_d(4, 8), pos_d(0, kSize - 1);
  for (int64_t i = 0; i < n; i++) {
    int64_t c = i % kClasses, len = len_d(rng);
    std::vector<float> img(kSize * kSize);
    for (float& p : img) p = noise(rng);
    // start so the whole bar fits: horizontal moves along columns, vertical along rows, diagonal both
    int64_t r = pos_d(rng) % (c == 0 ? kSize : kSize - len + 1);
    int64_t col = pos_d(rng) % (c == 1 ? kSize : kSize - len + 1);
    for (int64_t k = 0; k < len; k++) {
      int64_t rr = r + (c != 0 ? k : 0), cc = col + (c != 1 ? k : 0);
      img[rr * kSize + cc] += 1.0f;
    }
    x.insert(x.end(), img.begin(), img.end());
    y.push_back(c);
  }
  return {tensor(x, {n, 1, kSize, kSize}), tensor(y, {n})};
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
    int64_t epochs = 8;
    for (int i = 1; i < argc; i++) {
      std::string s = argv[i];
      if (s == "--epochs" && i + 1 < argc)
        epochs = whole_number_arg("cnn", "--epochs", argv[++i], 1, 1000000);
      else
        throw Error("cnn: unknown argument " + s + " (usage: cnn [--epochs N])");
    }
    manual_seed(0);
    std::mt19937 rng(0);
    auto [x_train, y_train] = bars(1200, rng);
    auto [x_test, y_test] = bars(300, rng);
    data::TensorDataset train_set({x_train, y_train});
    data::DataLoader loader(train_set, {.batch_size = 50, .shuffle = true, .seed = 1});

    nn::Sequential model(
        nn::Conv2d(1, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(), nn::MaxPool2d(2),    // 6x6
        nn::Conv2d(8, 16, 3, 1, 1), nn::BatchNorm2d(16), nn::ReLU(), nn::MaxPool2d(2),  // 3x3
        nn::Functional([](const Tensor& x) { return x.flatten(1); }), nn::Linear(16 * 3 * 3, kClasses));
    optim::AdamW opt(model->parameters(), {.lr = 3e-3, .weight_decay = 1e-4});
    std::printf("cnn: %lld parameters, 1200 training and 300 held-out 12x12 images (3 bar orientations)\n",
                static_cast<long long>(model->num_parameters()));

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
      std::printf("epoch %2lld  loss %.4f\n", static_cast<long long>(e + 1),
                  total / static_cast<double>(batches));
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    model->eval();  // BatchNorm uses its running statistics
    double train_acc = accuracy(model, x_train, y_train), test_acc = accuracy(model, x_test, y_test);
    std::printf("trained %lld epochs in %.1f s: train accuracy %.1f%%, held-out accuracy %.1f%%\n",
                static_cast<long long>(epochs), secs, 100 * train_acc, 100 * test_acc);
    return test_acc > 0.9 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
