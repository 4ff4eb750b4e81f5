// LayerNorm backward (llm.c's layernorm_backward) split over rows on a 2D grid, given the forward's
// mean and rstd (1 x N rows, f32; a tile row's 32 of each read down a column with col_of): per row,
// norm = (x - mean) * rstd, dnorm = dout * w, dx = (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
// * rstd; and, with WGRAD = 1, the weight gradients dweight = dweight_in + sum over rows of
// dout * norm, dbias = dbias_in + sum of dout.
// Each core covers tile rows [start, start + count) (runtime args). A tile row is streamed in chunks
// of 1 x K tiles (K divides CT; the host picks it so that the CBs fit a core's shared memory
// whatever C is), in two passes: pass 1 sums dnorm and dnorm * norm over the row (f32); pass 2 reads
// the chunks again (one tile row is still in cache) and writes dx. With WGRAD, pass 2 also sums each
// chunk's dout * norm and dout down its 32 rows, and the weight gradients are reduced across the
// grid in three steps:
//   1. every core writes those sums, one row of C per tile row, to part_dw / part_db (tile rows x C,
//      f32): no core keeps a whole row of partial sums;
//   2. all cores meet at a barrier (each core adds 1 to semaphore `arrived` on every core,
//      mcast_inc, and a core with pieces waits for its own to count all cores); then every core owns pieces
//      [piece_start, piece_start + piece_count) of the 2 x CT tile columns of dweight then dbias, and sums
//      each over all tile rows (a reduce-scatter), 32 partial rows per block;
//   3. it adds the slice to dweight_in / dbias_in and writes it: gradient accumulation (+=).
// Padded rows and columns (shapes not multiples of 32) read as 0: dout = 0 there, so they add
// nothing to any sum; the means over C divide by the true C (n_cols).
// Compile-time: CT, K, n_cols, WGRAD (0: dx only, the weight gradients come from another kernel).
constexpr long long chunks = CT / K;

void reader() {
  for (long long r = args().start; r < args().start + args().count; r++) {
    {
      auto m = mean_cb.scoped_reserve();
      auto rs = rstd_cb.scoped_reserve();
      Transfer tm = dma(mean.slice(0, r), m);
      Transfer tr = dma(rstd.slice(0, r), rs);
      tm.wait();
      tr.wait();
    }
    for (int pass = 0; pass < 2; pass++)  // the same chunks twice
      for (long long k = 0; k < chunks; k++) {
        auto xb = x_cb.scoped_reserve();
        auto gb = dout_cb.scoped_reserve();
        auto wb = w_cb.scoped_reserve();
        Transfer tx = dma(x.slice(r, k * K, 1, K), xb);
        Transfer tg = dma(dout.slice(r, k * K, 1, K), gb);
        Transfer tw = dma(w.slice(0, k * K, 1, K), wb);
        tx.wait();
        tg.wait();
        tw.wait();
      }
  }
  if (!WGRAD) return;
  // step 2: once every core has written its partial sums, read this core's slice of them
  if (args().piece_count > 0) arrived.wait(num_cores());
  const long long part_rows = part_dw.rows();  // one per tile row of x
  for (long long q = args().piece_start; q < args().piece_start + args().piece_count; q++) {
    const bool dw = q < CT;  // dweight's tile columns, then dbias's
    const long long t = dw ? q : q - CT, width = n_cols - t * 32 < 32 ? n_cols - t * 32 : 32;
    {
      auto gb = grad_in_cb.scoped_reserve();
      dma(dw ? dweight_in.slice(0, t) : dbias_in.slice(0, t), gb).wait();
    }
    for (long long p = 0; p < part_rows; p += 32) {
      long long rows = part_rows - p < 32 ? part_rows - p : 32;
      auto pb = part_cb.scoped_reserve();
      dma(dw ? part_dw.slice(p, t * 32, rows, width) : part_db.slice(p, t * 32, rows, width), pb).wait();
    }
  }
}

void compute() {
  const float inv_c = 1.0f / static_cast<float>(n_cols);
  for (long long i = 0; i < args().count; i++) {
    auto m = mean_cb.scoped_wait();
    auto rs = rstd_cb.scoped_wait();
    auto dnorm_mean = dnorm_mean_cb.scoped_scratch();  // sums over the row in pass 1, then means
    auto dnorm_norm_mean = dnorm_norm_mean_cb.scoped_scratch();
    dnorm_mean.store(0.0f);
    dnorm_norm_mean.store(0.0f);
    for (long long k = 0; k < chunks; k++) {  // pass 1
      auto xb = x_cb.scoped_wait();
      auto gb = dout_cb.scoped_wait();
      auto wb = w_cb.scoped_wait();
      auto norm = (xb - bcast_cols(col_of<32>(m))) * bcast_cols(col_of<32>(rs));  // evaluated where stored
      auto dnorm = gb * bcast_rows(wb);
      dnorm_mean.store(dnorm_mean + reduce_sum<1>(dnorm));
      dnorm_norm_mean.store(dnorm_norm_mean + reduce_sum<1>(dnorm * norm));
    }
    dnorm_mean.store(dnorm_mean * inv_c);
    dnorm_norm_mean.store(dnorm_norm_mean * inv_c);
    for (long long k = 0; k < chunks; k++) {  // pass 2
      auto xb = x_cb.scoped_wait();
      auto gb = dout_cb.scoped_wait();
      auto wb = w_cb.scoped_wait();
      auto norm = (xb - bcast_cols(col_of<32>(m))) * bcast_cols(col_of<32>(rs));
      auto dnorm = gb * bcast_rows(wb);
      {
        auto dxb = dx_cb.scoped_reserve();
        dxb.store((dnorm - bcast_cols(dnorm_mean) - norm * bcast_cols(dnorm_norm_mean)) *
                  bcast_cols(col_of<32>(rs)));
      }
      if (WGRAD) {  // step 1: this tile row's sums, dweight's then dbias's, to the writer
        {
          auto pw = part_sum_cb.scoped_reserve();
          pw.store(reduce_sum<0>(gb * norm));
        }
        auto pb = part_sum_cb.scoped_reserve();
        pb.store(reduce_sum<0>(gb));
      }
    }
  }
  if (!WGRAD) return;
  const long long part_rows = part_dw.rows();
  for (long long q = 0; q < args().piece_count; q++) {  // steps 2 and 3
    auto acc = tile_acc_cb.scoped_scratch();
    {
      auto gb = grad_in_cb.scoped_wait();
      acc.store(gb);
    }
    for (long long p = 0; p < part_rows; p += 32) {
      auto pb = part_cb.scoped_wait();
      acc.store(acc + reduce_sum<0>(pb));
    }
    auto ob = grad_out_cb.scoped_reserve();
    ob.store(acc);
  }
}

void writer() {
  for (long long r = args().start; r < args().start + args().count; r++)
    for (long long k = 0; k < chunks; k++) {
      {
        auto dxb = dx_cb.scoped_wait();
        dma(dxb, dx.slice(r, k * K, 1, K)).wait();
      }
      if (WGRAD) {  // step 1: row r of the partial sums, chunk k
        long long col = k * K * 32, width = n_cols - col < K * 32 ? n_cols - col : K * 32;
        {
          auto pw = part_sum_cb.scoped_wait();
          dma(pw, part_dw.slice(r, col, 1, width)).wait();
        }
        auto pb = part_sum_cb.scoped_wait();
        dma(pb, part_db.slice(r, col, 1, width)).wait();
      }
    }
  if (!WGRAD) return;
  arrived.mcast_inc(whole_grid());  // step 2: this core's partial sums are written
  for (long long q = args().piece_start; q < args().piece_start + args().piece_count; q++) {
    auto ob = grad_out_cb.scoped_wait();
    dma(ob, q < CT ? dweight.slice(0, q) : dbias.slice(0, q - CT)).wait();
  }
}
