// LayerNorm forward (llm.c's layernorm_forward) over rows of C: mean = sum(x) / C,
// rstd = 1 / sqrt(sum((x - mean)^2) / C + eps), out = (x - mean) * rstd * w + b; writes out, mean
// and rstd (N x 1, f32). Each core covers tile rows [start, start + count) (runtime args); a block is
// one tile row by all CT tiles of C. C need not be a multiple of 32: padded columns read as 0, and
// `valid` (a 1 x C row of ones, read padded with 0) keeps them out of the variance; both means divide
// by the true C (n_cols). Statistics and centered values are f32 whatever the data type.
// Compile-time: CT, n_cols, eps_bits (the f32 eps as its bits).
void reader() {
  {
    auto wb = w_cb.scoped_reserve();
    auto bb = b_cb.scoped_reserve();
    auto vb = valid_cb.scoped_reserve();
    Transfer tw = dma(w.slice(0, 0, 1, CT), wb);
    Transfer tb = dma(b.slice(0, 0, 1, CT), bb);
    Transfer tv = dma(valid.slice(0, 0, 1, CT), vb);
    tw.wait();
    tb.wait();
    tv.wait();
  }
  for (long long r = args().start; r < args().start + args().count; r++) {
    auto xb = x_cb.scoped_reserve();
    dma(x.slice(r, 0, 1, CT), xb).wait();
  }
}

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  const float eps = __builtin_bit_cast(float, static_cast<unsigned>(eps_bits));
  auto wb = w_cb.scoped_wait();  // kept for every row
  auto bb = b_cb.scoped_wait();
  auto vb = valid_cb.scoped_wait();
  for (long long i = 0; i < args().count; i++) {
    auto xb = x_cb.scoped_wait();
    auto m = mean_cb.scoped_reserve();
    auto rs = rstd_cb.scoped_reserve();
    auto xc = xc_cb.scoped_scratch();
    m.store(reduce_sum<1>(xb) * inv_c);
    xc.store((xb - bcast_cols(m)) * bcast_rows(vb));
    rs.store(rsqrt(reduce_sum<1>(xc * xc) * inv_c + eps));
    auto ob = out_cb.scoped_reserve();
    ob.store(xc * bcast_cols(rs) * bcast_rows(wb) + bcast_rows(bb));
  }
}

void writer() {
  for (long long r = args().start; r < args().start + args().count; r++) {
    auto ob = out_cb.scoped_wait();
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    Transfer to = dma(ob, out.slice(r, 0, 1, CT));
    Transfer tm = dma(m, mean.slice(r, 0));
    Transfer tr = dma(rs, rstd.slice(r, 0));
    to.wait();
    tm.wait();
    tr.wait();
  }
}
