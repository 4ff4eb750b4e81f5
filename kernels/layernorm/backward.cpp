// LayerNorm backward (llm.c's layernorm_backward) split over rows on a 2D grid, given the forward's
// mean and rstd (N x 1, f32): per row, norm = (x - mean) * rstd, dnorm = dout * w,
// dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd; and, with WGRAD = 1, the weight
// gradients dweight = dweight_in + sum over rows of dout * norm, dbias = dbias_in + sum of dout.
// Each core covers tile rows [start, start + count) (runtime args) in blocks of one tile row by all
// CT tiles of C, keeping f32 partial sums of dweight and dbias (1 x CT). The partials are reduced
// across cores in three steps:
//   1. along each grid row: cores x > 0 send (multicast to one core) their partials to core x = 0,
//      which adds them to its own;
//   2. over the grid (reduce-scatter): the row roots write their sums to part_dw / part_db (grid rows
//      x C, f32) and meet at a barrier (semaphore `arrived` on core (0, 0), released by a multicast
//      set of `go`); then every core owns tile columns [piece_start, piece_start + piece_count) and
//      sums that slice over the grid rows;
//   3. it adds the slice to dweight_in / dbias_in and writes it: gradient accumulation (+=).
// Padded rows and columns (shapes not multiples of 32) read as 0: dout = 0 there, so they add
// nothing to any sum; the means over C divide by the true C (n_cols).
// Compile-time: CT, n_cols, WGRAD (0: dx only, the weight gradients come from another kernel).
void reader() {
  {
    auto wb = w_cb.scoped_reserve();
    dma(w.slice(0, 0, 1, CT), wb).wait();
  }
  for (long long r = args().start; r < args().start + args().count; r++) {
    auto xb = x_cb.scoped_reserve();
    auto gb = dout_cb.scoped_reserve();
    auto m = mean_cb.scoped_reserve();
    auto rs = rstd_cb.scoped_reserve();
    Transfer tx = dma(x.slice(r, 0, 1, CT), xb);
    Transfer tg = dma(dout.slice(r, 0, 1, CT), gb);
    Transfer tm = dma(mean.slice(r, 0), m);
    Transfer tr = dma(rstd.slice(r, 0), rs);
    tx.wait();
    tg.wait();
    tm.wait();
    tr.wait();
  }
  if (!WGRAD) return;
  // step 1: the row root receives one dweight and one dbias partial from each other core of its row
  if (core_x() == 0)
    for (int k = 1; k < grid_cols(); k++) {
      {
        auto rb = recv_dw_cb.scoped_reserve();
        mcast_receive(rb).wait();
      }
      auto rb = recv_db_cb.scoped_reserve();
      mcast_receive(rb).wait();
    }
  // step 2: once every row root has written its sums, read this core's slice of each
  if (core_x() == 0 && core_y() == 0) {
    arrived.wait(grid_rows());
    go.mcast_set(whole_grid(), 1);
  }
  go.wait(1);
  for (long long t = args().piece_start; t < args().piece_start + args().piece_count; t++) {
    long long width = n_cols - t * 32 < 32 ? n_cols - t * 32 : 32;
    {
      auto gw = dw_in_cb.scoped_reserve();
      dma(dweight_in.slice(0, t), gw).wait();
    }
    for (int y = 0; y < grid_rows(); y++) {
      auto pb = part_cb.scoped_reserve();
      dma(part_dw.slice(y, t * 32, 1, width), pb).wait();
    }
    {
      auto gb = db_in_cb.scoped_reserve();
      dma(dbias_in.slice(0, t), gb).wait();
    }
    for (int y = 0; y < grid_rows(); y++) {
      auto pb = part_cb.scoped_reserve();
      dma(part_db.slice(y, t * 32, 1, width), pb).wait();
    }
  }
}

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  auto wb = w_cb.scoped_wait();  // kept for every row
  auto dw = dw_acc_cb.scoped_scratch();
  auto db = db_acc_cb.scoped_scratch();
  dw.store(0.0f);
  db.store(0.0f);
  for (long long i = 0; i < args().count; i++) {
    auto xb = x_cb.scoped_wait();
    auto gb = dout_cb.scoped_wait();
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    auto norm = norm_cb.scoped_scratch();
    auto dnorm = dnorm_cb.scoped_scratch();
    auto dnorm_mean = dnorm_mean_cb.scoped_scratch();
    auto dnorm_norm_mean = dnorm_norm_mean_cb.scoped_scratch();
    norm.store((xb - bcast_cols(m)) * bcast_cols(rs));
    dnorm.store(gb * bcast_rows(wb));
    dnorm_mean.store(reduce_sum<1>(dnorm) * inv_c);
    dnorm_norm_mean.store(reduce_sum<1>(dnorm * norm) * inv_c);
    {
      auto dxb = dx_cb.scoped_reserve();
      dxb.store((dnorm - bcast_cols(dnorm_mean) - norm * bcast_cols(dnorm_norm_mean)) * bcast_cols(rs));
    }
    if (WGRAD) {
      dw.store(dw + reduce_sum<0>(gb * norm));
      db.store(db + reduce_sum<0>(gb));
    }
  }
  if (!WGRAD) return;
  if (core_x() == 0)
    for (int k = 1; k < grid_cols(); k++) {
      {
        auto rb = recv_dw_cb.scoped_wait();
        dw.store(dw + rb);
      }
      auto rb = recv_db_cb.scoped_wait();
      db.store(db + rb);
    }
  {
    auto sw = dw_sum_cb.scoped_reserve();
    sw.store(dw);
  }
  {
    auto sb = db_sum_cb.scoped_reserve();
    sb.store(db);
  }
  for (long long t = 0; t < args().piece_count; t++) {
    auto acc = tile_acc_cb.scoped_scratch();
    {
      auto gw = dw_in_cb.scoped_wait();
      acc.store(gw);
    }
    for (int y = 0; y < grid_rows(); y++) {
      auto pb = part_cb.scoped_wait();
      acc.store(acc + pb);
    }
    {
      auto ow = dw_out_cb.scoped_reserve();
      ow.store(acc);
    }
    {
      auto gb = db_in_cb.scoped_wait();
      acc.store(gb);
    }
    for (int y = 0; y < grid_rows(); y++) {
      auto pb = part_cb.scoped_wait();
      acc.store(acc + pb);
    }
    auto ob = db_out_cb.scoped_reserve();
    ob.store(acc);
  }
}

void writer() {
  for (long long r = args().start; r < args().start + args().count; r++) {
    auto dxb = dx_cb.scoped_wait();
    dma(dxb, dx.slice(r, 0, 1, CT)).wait();
  }
  if (!WGRAD) return;
  {
    auto sw = dw_sum_cb.scoped_wait();
    auto sb = db_sum_cb.scoped_wait();
    int y = core_y();
    if (core_x() == 0) {  // step 2: publish the row's sums, then check in at core (0, 0)
      Transfer tw = dma(sw, part_dw.slice(y, 0, 1, n_cols));
      Transfer tb = dma(sb, part_db.slice(y, 0, 1, n_cols));
      tw.wait();
      tb.wait();
      arrived.remote_inc(0, 0);
    } else {  // step 1: send the partials to the row root
      mcast(sw, recv_dw_cb, CoreRange{0, y, 1, y + 1}).wait();
      mcast(sb, recv_db_cb, CoreRange{0, y, 1, y + 1}).wait();
    }
  }
  for (long long t = args().piece_start; t < args().piece_start + args().piece_count; t++) {
    {
      auto ow = dw_out_cb.scoped_wait();
      dma(ow, dweight.slice(0, t)).wait();
    }
    auto ob = db_out_cb.scoped_wait();
    dma(ob, dbias.slice(0, t)).wait();
  }
}
