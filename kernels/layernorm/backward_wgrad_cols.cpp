// LayerNorm backward, weight gradients only, split over columns: each core owns tile columns
// [start, start + count) (runtime args) of dweight and dbias, so no two cores touch the same
// gradient and nothing is reduced across cores. Per tile column it walks every row of x and dout in
// blocks of BR x 1 tiles (with the rows' mean and rstd, BR x 1; BR divides the tile rows, and the
// host picks it so that the CBs fit a core's shared memory), recomputes norm = (x - mean) * rstd
// and accumulates in f32: dweight = dweight_in + sum of dout * norm, dbias = dbias_in + sum of dout.
// dx comes from backward.cpp with WGRAD = 0. Padded rows read dout = 0 and add nothing.
void reader() {
  long long row_blocks = x.rows() / BR;
  for (long long t = args().start; t < args().start + args().count; t++) {
    {
      auto gw = dw_in_cb.scoped_reserve();
      auto gb = db_in_cb.scoped_reserve();
      Transfer tw = dma(dweight_in.slice(0, t), gw);
      Transfer tb = dma(dbias_in.slice(0, t), gb);
      tw.wait();
      tb.wait();
    }
    for (long long r = 0; r < row_blocks; r++) {
      auto xb = x_cb.scoped_reserve();
      auto gb = dout_cb.scoped_reserve();
      auto m = mean_cb.scoped_reserve();
      auto rs = rstd_cb.scoped_reserve();
      Transfer tx = dma(x.slice(r * BR, t, BR, 1), xb);
      Transfer tg = dma(dout.slice(r * BR, t, BR, 1), gb);
      Transfer tm = dma(mean.slice(r * BR, 0, BR, 1), m);
      Transfer tr = dma(rstd.slice(r * BR, 0, BR, 1), rs);
      tx.wait();
      tg.wait();
      tm.wait();
      tr.wait();
    }
  }
}

void compute() {
  long long row_blocks = x.rows() / BR;
  for (long long t = 0; t < args().count; t++) {
    auto dw = dw_acc_cb.scoped_scratch();
    auto db = db_acc_cb.scoped_scratch();
    {
      auto gw = dw_in_cb.scoped_wait();
      auto gb = db_in_cb.scoped_wait();
      dw.store(gw);
      db.store(gb);
    }
    for (long long r = 0; r < row_blocks; r++) {
      auto xb = x_cb.scoped_wait();
      auto gb = dout_cb.scoped_wait();
      auto m = mean_cb.scoped_wait();
      auto rs = rstd_cb.scoped_wait();
      dw.store(dw + reduce_sum<0>(gb * (xb - bcast_cols(m)) * bcast_cols(rs)));
      db.store(db + reduce_sum<0>(gb));
    }
    auto ow = dw_out_cb.scoped_reserve();
    auto ob = db_out_cb.scoped_reserve();
    ow.store(dw);
    ob.store(db);
  }
}

void writer() {
  for (long long t = args().start; t < args().start + args().count; t++) {
    auto ow = dw_out_cb.scoped_wait();
    auto ob = db_out_cb.scoped_wait();
    Transfer tw = dma(ow, dweight.slice(0, t));
    Transfer tb = dma(ob, dbias.slice(0, t));
    tw.wait();
    tb.wait();
  }
}
