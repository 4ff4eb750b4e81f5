// y = a * b + tanh(c), c a row vector (1 x C, in tiles whose first row is valid) broadcast down the
// rows. Split by columns: each core covers block columns [start, start + count) (runtime args) of
// blocks of BR x BC tiles, and every block row. It reads the c slice of a block column once, keeps
// tanh(c) in a scratch block and reuses it down the column, so c costs one read and one tanh per
// element over the whole grid.
void reader() {
  long long row_blocks = a.rows() / BR;
  for (long long c = args().start; c < args().start + args().count; c++) {
    {
      auto cb = c_cb.scoped_reserve();
      dma(cvec.slice(0, c * BC, 1, BC), cb).wait();
    }
    for (long long r = 0; r < row_blocks; r++) {
      auto ab = a_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      Transfer ta = dma(a.slice(r * BR, c * BC, BR, BC), ab);
      Transfer tb = dma(b.slice(r * BR, c * BC, BR, BC), bb);
      ta.wait();
      tb.wait();
    }
  }
}

void compute() {
  long long row_blocks = a.rows() / BR;
  for (long long c = 0; c < args().count; c++) {
    auto tc = tc_cb.scoped_scratch();
    {
      auto cb = c_cb.scoped_wait();
      tc.store(tanh(cb));
    }
    for (long long r = 0; r < row_blocks; r++) {
      auto ab = a_cb.scoped_wait();
      auto bb = b_cb.scoped_wait();
      auto yb = y_cb.scoped_reserve();
      yb.store(ab * bb + bcast_rows(tc));
    }
  }
}

void writer() {
  long long row_blocks = a.rows() / BR;
  for (long long c = args().start; c < args().start + args().count; c++)
    for (long long r = 0; r < row_blocks; r++) {
      auto yb = y_cb.scoped_wait();
      dma(yb, y.slice(r * BR, c * BC, BR, BC)).wait();
    }
}
