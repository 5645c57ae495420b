// How many thread block clusters the current GPU runs at once.
//
// A cluster's blocks run at the same time on SMs of one GPC (a group of SMs), and the GPU places
// whole clusters: a GPC whose SM count is not a multiple of the cluster's size leaves SMs that
// take none (a GPC of 18 SMs, say, holds four clusters of four blocks that each need an SM). So
// a grid of clusters may not fit at once where the same blocks without clusters would: an H100's
// 132 SMs run 30 clusters of four so, not 33. Where an SM can hold two of the blocks, the GPU then
// runs two of the grid's blocks on some SMs while others have none (measured on an H100 with
// Nsight Compute: docs/results/h100_decode_61_ncu.md).
#pragma once

namespace fl {

// The dynamic shared memory a block asks so that it runs alone on its SM: more than half an SM's
// (228 KiB on an H100: 115 KiB). 0 where no block may ask that much, or the query fails.
int smem_one_block_an_sm();

// The clusters of `size` blocks (1-8) that the current GPU runs at once when each block needs an
// SM of its own (a block of 128 threads asking more than half an SM's shared memory), from
// cudaOccupancyMaxActiveClusters; 0 where the GPU has no clusters (compute capability below 9.0)
// or the query fails. Asked once a device and size, then remembered.
int clusters_one_block_an_sm(int size);

}  // namespace fl
