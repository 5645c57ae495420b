// Programmatic dependent launch: a grid that lets the next grid of its stream start early, and a
// grid that waits for the one before it.
//   PTX ISA: "Parallel synchronization and communication instructions: griddepcontrol"
//   (PTX 7.8, sm_90).
//
// Two kernels launched one after the other on a stream normally run one after the other: the
// second grid's blocks start only when the first grid has finished and its writes are visible.
// Launched with the attribute cudaLaunchAttributeProgrammaticStreamSerialization, the second
// (the dependent) may start as soon as every block of the first has executed
// griddepcontrol.launch_dependents (or exited): its blocks then run beside the first grid's.
// griddepcontrol.wait in the dependent blocks until every grid it depends on has completed and
// its memory operations are performed and visible to it; where the grid was launched without the
// attribute there is nothing to wait for and it returns at once. So the dependent may do, before
// the wait, only what reads nothing the first grid writes.
//
// Both are sm_90 instructions. Compiled for an earlier architecture the functions are empty: the
// host must then not launch with the attribute (a dependent whose wait is empty would read too
// early); it asks the kernel's PTX version (cudaFuncGetAttributes: ptxVersion >= 90) first.
#pragma once

namespace fl::ptx {

// Lets the dependent grid start once every block of this grid has issued it (or exited).
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Blocks until the grids this one depends on have completed and their writes are visible.
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace fl::ptx
