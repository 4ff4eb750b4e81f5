// y = a * b + c broadcast along columns: c is a column vector (M x 1 tensor, in tiles whose first
// column is valid) read as (BR, 1) blocks. Each core covers block rows [start, start + count) of
// BR x BC tiles (runtime args) and every block column.
void reader() {
  long long col_blocks = a.cols() / BC;
  for (long long r = args().start; r < args().start + args().count; r++)
    for (long long c = 0; c < col_blocks; c++) {
      auto ab = a_cb.scoped_reserve();
      auto bb = b_cb.scoped_reserve();
      auto cb = c_cb.scoped_reserve();
      Transfer ta = dma(a.slice(r * BR, c * BC, BR, BC), ab);
      Transfer tb = dma(b.slice(r * BR, c * BC, BR, BC), bb);
      Transfer tc = dma(cvec.slice(r * BR, 0, BR, 1), cb);
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
    yb.store(ab * bb + bcast_cols(cb));
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
