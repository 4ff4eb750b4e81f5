// y = a * b + tanh(c), c a row vector (1 x C, in tiles whose first row is valid) broadcast down the
// rows. Split by rows: each core covers block rows [start, start + count) (runtime args) of blocks of
// BR x BC tiles, and every block column; the c slice of a block is read and tanh'd again for every
// block row, the price of this split (mul_add_tanh_cols.cpp reads each c tile once). A block row is
// streamed in blocks of BC tiles (BC divides C's tiles; the host picks it so that the CBs fit a
// core's shared memory whatever C is).
void reader() {
  long long col_blocks = a.cols() / BC;
  for (long long r = args().start; r < args().start + args().count; r++)
    for (long long c = 0; c < col_blocks; c++) {
      auto ab = a_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      auto cb = c_cb.scoped_reserve();
      Transfer ta = dma(a.slice(r * BR, c * BC, BR, BC), ab);
      Transfer tb = dma(b.slice(r * BR, c * BC, BR, BC), bb);
      Transfer tc = dma(cvec.slice(0, c * BC, 1, BC), cb);
      ta.wait();
      tb.wait();
      tc.wait();
    }
}

void compute() {
  long long col_blocks = a.cols() / BC;
  for (long long i = 0; i < args().count * col_blocks; i++) {
    auto ab = a_cb.scoped_wait();
    auto bb = b_cb.scoped_wait();
    auto cb = c_cb.scoped_wait();
    auto yb = y_cb.scoped_reserve();
    yb.store(ab * bb + bcast_rows(tanh(cb)));
  }
}

void writer() {
  long long col_blocks = a.cols() / BC;
  for (long long r = args().start; r < args().start + args().count; r++)
    for (long long c = 0; c < col_blocks; c++) {
      auto yb = y_cb.scoped_wait();
      dma(yb, y.slice(r * BR, c * BC, BR, BC)).wait();
    }
}
