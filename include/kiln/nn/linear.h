// Linear and Embedding layers.
#pragma once
#include "kiln/nn/module.h"

namespace kiln::nn {

// y = x W^T + b; x (..., in_features) -> (..., out_features). weight (out, in) and bias (out)
// are U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform with a = sqrt(5)).
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  int64_t in_features, out_features;
  Tensor& weight;
  Tensor& bias;  // undefined without bias
};
KILN_MODULE(Linear);

// Rows of weight (num_embeddings, embedding_dim), N(0, 1), picked by integer indices:
// (...) -> (..., embedding_dim).
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  Tensor forward(const Tensor& indices) const;
  int64_t num_embeddings, embedding_dim;
  Tensor& weight;
};
KILN_MODULE(Embedding);

}  // namespace kiln::nn
