// y = a + b, block by block. Each core covers tiles [row0, row0 + rows) x [col0, col0 + cols)
// (runtime args, multiples of the block shape block_rows x block_cols, compile-time args), so the
// host splits the work by rows or by columns. CBs a_cb, b_cb, y_cb hold block_rows x block_cols.
void reader() {
  for (long long r = args().row0; r < args().row0 + args().rows; r += block_rows)
    for (long long c = args().col0; c < args().col0 + args().cols; c += block_cols) {
      auto ab = a_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      Transfer ta = dma(a.slice(r, c, block_rows, block_cols), ab);
      Transfer tb = dma(b.slice(r, c, block_rows, block_cols), bb);
      ta.wait();
      tb.wait();
    }
}

void compute() {
  long long blocks = (args().rows / block_rows) * (args().cols / block_cols);
  for (long long i = 0; i < blocks; i++) {
    auto ab = a_cb.scoped_wait();
    auto bb = b_cb.scoped_wait();
    auto yb = y_cb.scoped_reserve();
    yb.store(ab + bb);
  }
}

void writer() {
  for (long long r = args().row0; r < args().row0 + args().rows; r += block_rows)
    for (long long c = args().col0; c < args().col0 + args().cols; c += block_cols) {
      auto yb = y_cb.scoped_wait();
      dma(yb, y.slice(r, c, block_rows, block_cols)).wait();
    }
}
