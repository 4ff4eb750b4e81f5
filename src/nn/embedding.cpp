// nn::Embedding: a lookup table of learned vectors.
#include "kiln/functional.h"
#include "kiln/nn/init.h"
#include "kiln/nn/linear.h"
#include "nn/util.h"

namespace kiln::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num, int64_t dim)
    : num_embeddings(detail::positive("Embedding", "num_embeddings", num)),
      embedding_dim(detail::positive("Embedding", "embedding_dim", dim)),
      weight(register_parameter("weight", init::normal({num, dim}))) {}

Tensor EmbeddingImpl::forward(const Tensor& indices) const {
  if (!is_int(indices.dtype()))
    module_error("Embedding", "expected integer indices, got " + to_string(indices.dtype()) + " of shape " +
                                  shape_str(indices.shape()));
  return F::embedding(indices, weight);
}

}  // namespace kiln::nn
