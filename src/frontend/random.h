// Random draws keyed by a tensor: the counter-based generator's key and offset read from a small
// device buffer, so a graph that draws is the same at every draw and a kiln::Jit step can take
// the key as an input (generation draws its tokens inside the captured decoding step).
#pragma once
#include <optional>

#include "kiln/tensor.h"

namespace kiln::frontend {

// The key of a draw of n numbers from g, streams [0, streams): a (streams, 3) i64 tensor on d.
// Taking it advances g by n, as rand(n) does.
Tensor draw_key(Generator& g, int64_t n, int streams, std::optional<Device> d);

// -log(u) as f32 for the uniform (0, 1] u with 48 random bits from streams k and k + 1 of a
// draw_key key (element i: the u multinomial draws for element i at the key's seed and offset),
// computed from 1 - u (log1p), so a u near 1 keeps its precision and only u = 1 (a chance of 2^-48)
// gives 0.
Tensor exponential(const Shape& s, const Tensor& key, int k);

}  // namespace kiln::frontend
