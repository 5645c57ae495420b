// How many thread block clusters the current GPU runs at once.
//
// A cluster's blocks run at the same time on SMs of one GPC (a group of SMs, 16 to 18 of them on
// an H100), and the GPU places whole clusters: a GPC of 18 SMs holds four clusters of four blocks
// that each need an SM, and its last two SMs take none. So a grid of clusters may not fit at once
// where the same blocks without clusters would, and where an SM can hold two of the blocks the
// GPU may put two of a cluster's blocks on one SM while other SMs have none.
#pragma once

namespace fl {

// The clusters of `size` blocks (1-8) that the current GPU runs at once when each block needs an
// SM of its own (a block of 128 threads asking more than half an SM's shared memory), from
// cudaOccupancyMaxActiveClusters; 0 where the GPU has no clusters (compute capability below 9.0)
// or the query fails. Asked once a device and size, then remembered.
int clusters_one_block_an_sm(int size);

}  // namespace fl
