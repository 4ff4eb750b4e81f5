// LayerNorm forward (llm.c's layernorm_forward) over rows of C: mean = sum(x) / C,
// rstd = 1 / sqrt(sum((x - mean)^2) / C + eps), out = (x - mean) * rstd * w + b; writes out, mean
// and rstd (N x 1, f32). Each core covers tile rows [start, start + count) (runtime args). A tile
// row is streamed in chunks of 1 x K tiles (K divides CT; the host picks it so that the CBs fit a
// core's shared memory whatever C is), in two passes:
//   pass 1, statistics: each chunk's mean and sum of squared deviations from it are merged into
//     the row's (Chan et al.'s pairwise update, f32), which avoids the cancellation of
//     sum(x^2) / C - mean^2 when |mean| is large against the spread;
//   pass 2, output: the reader reads the chunks again (with the matching chunks of w and b; one
//     tile row is still in cache) and compute writes out.
// C need not be a multiple of 32: padded columns read as 0 and only the last chunk has them; `valid`
// (the last chunk of a 1 x C row of ones, read padded with 0) keeps them out of that chunk's
// squared deviations, and every mean divides by the number of true columns (n_cols in all).
// Statistics are f32 whatever the data type.
// Compile-time: CT, K, n_cols, eps_bits (the f32 eps as its bits).
constexpr long long chunks = CT / K;

void reader() {
  {
    auto vb = valid_cb.scoped_reserve();
    dma(valid.slice(0, CT - K, 1, K), vb).wait();
  }
  for (long long r = args().start; r < args().start + args().count; r++) {
    for (long long k = 0; k < chunks; k++) {  // pass 1
      auto xb = x_cb.scoped_reserve();
      dma(x.slice(r, k * K, 1, K), xb).wait();
    }
    for (long long k = 0; k < chunks; k++) {  // pass 2
      auto xb = x_cb.scoped_reserve();
      auto wb = w_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      Transfer tx = dma(x.slice(r, k * K, 1, K), xb);
      Transfer tw = dma(w.slice(0, k * K, 1, K), wb);
      Transfer tb = dma(b.slice(0, k * K, 1, K), bb);
      tx.wait();
      tw.wait();
      tb.wait();
    }
  }
}

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  const float eps = __builtin_bit_cast(float, static_cast<unsigned>(eps_bits));
  auto vb = valid_cb.scoped_wait();  // kept for every row
  for (long long i = 0; i < args().count; i++) {
    auto m = mean_cb.scoped_reserve();  // the running mean, then the row's mean
    auto rs = rstd_cb.scoped_reserve();
    auto q = sq_dev_cb.scoped_scratch();  // the running sum of squared deviations from m
    m.store(0.0f);
    q.store(0.0f);
    for (long long k = 0; k < chunks; k++) {  // pass 1
      auto xb = x_cb.scoped_wait();
      auto cm = chunk_mean_cb.scoped_scratch();
      const float seen = static_cast<float>(k * K * 32);  // columns merged so far
      const float here = k + 1 < chunks ? K * 32.0f : static_cast<float>(n_cols) - seen;  // true ones
      cm.store(reduce_sum<1>(xb) * (1.0f / here));
      // q += the chunk's squared deviations from its own mean, plus a term for the shift between
      // the means (0 for the first chunk, seen = 0, whose mean m then just takes)
      auto dev = xb - bcast_cols(cm);
      auto shift = (cm - m) * (cm - m) * (seen * here / (seen + here));
      if (k + 1 < chunks)
        q.store(q + reduce_sum<1>(dev * dev) + shift);
      else  // the last chunk holds the padded columns
        q.store(q + reduce_sum<1>(dev * dev * bcast_rows(vb)) + shift);
      m.store(m + (cm - m) * (here / (seen + here)));
    }
    rs.store(rsqrt(q * inv_c + eps));
    for (long long k = 0; k < chunks; k++) {  // pass 2
      auto xb = x_cb.scoped_wait();
      auto wb = w_cb.scoped_wait();
      auto bb = b_cb.scoped_wait();
      auto ob = out_cb.scoped_reserve();
      ob.store((xb - bcast_cols(m)) * bcast_cols(rs) * bcast_rows(wb) + bcast_rows(bb));
    }
  }
}

void writer() {
  for (long long r = args().start; r < args().start + args().count; r++) {
    for (long long k = 0; k < chunks; k++) {  // out first: mean and rstd are pushed at the row's end
      auto ob = out_cb.scoped_wait();
      dma(ob, out.slice(r, k * K, 1, K)).wait();
    }
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    Transfer tm = dma(m, mean.slice(r, 0));
    Transfer tr = dma(rs, rstd.slice(r, 0));
    tm.wait();
    tr.wait();
  }
}
