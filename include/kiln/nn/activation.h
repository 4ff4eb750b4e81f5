// Activation modules (ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softmax, ...), Dropout,
// Identity and Flatten: stateless layers over the Tensor ops.
#pragma once
#include <string>

#include "kiln/nn/module.h"

namespace kiln::nn {

#define KILN_SIMPLE_MODULE(Name, expr)                     \
  class Name##Impl : public Module {                       \
   public:                                                 \
    Tensor forward(const Tensor& x) const { return expr; } \
  };                                                       \
  KILN_MODULE(Name)

KILN_SIMPLE_MODULE(Identity, x);
KILN_SIMPLE_MODULE(ReLU, x.relu());
KILN_SIMPLE_MODULE(ReLU6, x.relu6());
KILN_SIMPLE_MODULE(SiLU, x.silu());
KILN_SIMPLE_MODULE(Tanh, x.tanh());
KILN_SIMPLE_MODULE(Sigmoid, x.sigmoid());
KILN_SIMPLE_MODULE(SELU, x.selu());
KILN_SIMPLE_MODULE(Mish, x.mish());
KILN_SIMPLE_MODULE(LogSigmoid, x.logsigmoid());
#undef KILN_SIMPLE_MODULE

// approximate: "none" (erf) or "tanh"
class GELUImpl : public Module {
 public:
  explicit GELUImpl(const std::string& approximate = "none");
  Tensor forward(const Tensor& x) const { return x.gelu(tanh_); }

 private:
  bool tanh_;
};
KILN_MODULE(GELU);

class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) const { return x.leaky_relu(negative_slope); }
  double negative_slope;
};
KILN_MODULE(LeakyReLU);

class ELUImpl : public Module {
 public:
  explicit ELUImpl(double alpha = 1) : alpha(alpha) {}
  Tensor forward(const Tensor& x) const { return x.elu(alpha); }
  double alpha;
};
KILN_MODULE(ELU);

class SoftplusImpl : public Module {
 public:
  explicit SoftplusImpl(double beta = 1, double threshold = 20) : beta(beta), threshold(threshold) {}
  Tensor forward(const Tensor& x) const { return x.softplus(beta, threshold); }
  double beta, threshold;
};
KILN_MODULE(Softplus);

class HardtanhImpl : public Module {
 public:
  explicit HardtanhImpl(double min_val = -1, double max_val = 1) : min_val(min_val), max_val(max_val) {}
  Tensor forward(const Tensor& x) const { return x.hardtanh(min_val, max_val); }
  double min_val, max_val;
};
KILN_MODULE(Hardtanh);

class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) const;
  int64_t dim;
};
KILN_MODULE(Softmax);

class LogSoftmaxImpl : public Module {
 public:
  explicit LogSoftmaxImpl(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& x) const;
  int64_t dim;
};
KILN_MODULE(LogSoftmax);

// Zeroes elements with probability p and scales the rest by 1 / (1 - p) in training mode (draws
// from the global generator); the identity in eval mode.
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& x) const;
  double p;
};
KILN_MODULE(Dropout);

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) const { return x.flatten(start_dim, end_dim); }
  int64_t start_dim, end_dim;
};
KILN_MODULE(Flatten);

}  // namespace kiln::nn
