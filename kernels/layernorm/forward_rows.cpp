// LayerNorm forward with whole rows in a block: the rows variant of forward.cpp, for rows that fit
// a core's shared memory. Per block of BR rows (blocks of 1 x CT short tiles of BR x 32 elements,
// rows moved through element-indexed accessors), in one pass over x:
//   mean = sum(x) / C, rstd = 1 / sqrt(sum((x - mean)^2) / C + eps) (two-pass in shared memory, f32),
//   out = (x - mean) * rstd * w + b; writes out, mean and rstd (N x 1, f32).
// w and b are read once per core into row vectors (tiles of 1 x 32) that compute keeps to the end.
// Each core covers rows [start, start + count) (runtime args), BR at a time: split by rows, the cores'
// shares differ by a row at most (a core's last block may be short). C need not be a multiple of 32:
// padded columns read as 0, so they add nothing to the sum; `valid` (a row vector of ones over the
// true columns, 0 in the padding) keeps them out of the squared deviations. Padded rows of a short
// block read as 0 and are not written.
// Compile-time: CT (tiles per row), BR (rows per block), n_cols, eps_bits (the f32 eps as its bits).
void reader() {
  {
    auto wb = w_cb.scoped_reserve();
    auto bb = b_cb.scoped_reserve();
    auto vb = valid_cb.scoped_reserve();  // one tile of nothing where C needs no mask
    Transfer tw = dma(w.slice(0, 0, 1, n_cols), wb);
    Transfer tb = dma(b.slice(0, 0, 1, n_cols), bb);
    if constexpr (n_cols % 32 != 0) dma(valid.slice(0, 0, 1, n_cols), vb).wait();
    tw.wait();
    tb.wait();
  }
  const long long end = args().start + args().count;
  for (long long r = args().start; r < end; r += BR) {
    const long long rows = end - r < BR ? end - r : BR;
    auto xb = x_cb.scoped_reserve();
    dma(x.slice(r, 0, rows, n_cols), xb).wait();
  }
}

// The squared deviations' row sums; with padded columns (Masked) only the true columns count.
template <bool Masked, class Dev, class Valid>
auto sq_dev_sum(const Dev& dev, const Valid& vb) {
  if constexpr (Masked)
    return reduce_sum<1>(dev * dev * bcast_rows(vb));  // dev = -mean in the padding
  else
    return reduce_sum<1>(dev * dev);
}

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  const float eps = __builtin_bit_cast(float, static_cast<unsigned>(eps_bits));
  auto wb = w_cb.scoped_wait();  // kept for every block
  auto bb = b_cb.scoped_wait();
  auto vb = valid_cb.scoped_wait();
  for (long long i = 0; i < (args().count + BR - 1) / BR; i++) {
    auto xb = x_cb.scoped_wait();
    auto m = mean_cb.scoped_reserve();
    auto rs = rstd_cb.scoped_reserve();
    m.store(reduce_sum<1>(xb) * inv_c);
    auto dev = xb - bcast_cols(m);  // an expression: evaluated where stored
    rs.store(rsqrt(sq_dev_sum<n_cols % 32 != 0>(dev, vb) * inv_c + eps));
    auto ob = out_cb.scoped_reserve();
    ob.store(dev * bcast_cols(rs) * bcast_rows(wb) + bcast_rows(bb));
  }
}

// Two writers: out, and the stats (one data-movement warp for all three kept compute waiting for
// free blocks).
void writer() {
  const long long end = args().start + args().count;
  for (long long r = args().start; r < end; r += BR) {
    const long long rows = end - r < BR ? end - r : BR;
    auto ob = out_cb.scoped_wait();
    dma(ob, out.slice(r, 0, rows, n_cols)).wait();
  }
}

void stats_writer() {
  const long long end = args().start + args().count;
  for (long long r = args().start; r < end; r += BR) {
    const long long rows = end - r < BR ? end - r : BR;
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    Transfer tm = dma(m, mean.slice(r, 0, rows, 1));
    Transfer tr = dma(rs, rstd.slice(r, 0, rows, 1));
    tm.wait();
    tr.wait();
  }
}
