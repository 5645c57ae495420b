// Scratch (not committed as code): which SM a persistent block lands on, and which L2 partition
// each SM is near. One block per SM (large dynamic shared memory). For each of `lines` 128-byte
// lines, thread 0 of each block times a chain of 16 dependent atom.global.add (an atomic is
// served at the line's home L2 slice): near lines are fast, far ones cross the L2 fabric.
// Output (stdout): "sm <block> <smid> <nsmid>" lines, then "lat <smid> <l0> <l1> ..." (cycles a
// hop, min over 3 tries).
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

__global__ void probe(unsigned* buf, const int* offs, int lines, int zero, unsigned* lat,
                      unsigned* who) {
  extern __shared__ char smem[];
  if (threadIdx.x != 0) return;
  unsigned s, n;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  asm volatile("mov.u32 %0, %%nsmid;" : "=r"(n));
  who[2 * blockIdx.x] = s;
  who[2 * blockIdx.x + 1] = n;
  smem[0] = 0;
  for (int i = 0; i < lines; ++i) {
    const int l = (i + blockIdx.x * 7) % lines;
    unsigned best = ~0u;
    for (int rep = 0; rep < 3; ++rep) {
      unsigned* a = buf + offs[l];
      unsigned v = 0;
      long long t0, t1;
      asm volatile("mov.u64 %0, %%clock64;" : "=l"(t0)::"memory");
#pragma unroll 1
      for (int k = 0; k < 16; ++k) {
        asm volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(v) : "l"(a + v * zero) : "memory");
      }
      asm volatile("mov.u64 %0, %%clock64;" : "=l"(t1)::"memory");
      if (v == 0xffffffffu) who[0] = 7;  // keep v
      const unsigned c = static_cast<unsigned>((t1 - t0) / 15);
      best = c < best ? c : best;
    }
    lat[blockIdx.x * lines + l] = best;
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int lines = 128;
  unsigned* buf;
  cudaMalloc(&buf, 64 << 20);
  cudaMemset(buf, 0, 64 << 20);
  std::vector<int> offs(lines);
  srand(7);
  for (int i = 0; i < lines; ++i) offs[i] = (rand() % ((64 << 20) / 128)) * 32;  // words
  int* d_offs;
  cudaMalloc(&d_offs, lines * sizeof(int));
  cudaMemcpy(d_offs, offs.data(), lines * sizeof(int), cudaMemcpyHostToDevice);
  unsigned *lat, *who;
  cudaMalloc(&lat, sms * lines * sizeof(unsigned));
  cudaMalloc(&who, 2 * sms * sizeof(unsigned));
  const int smem = 200 * 1024;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int it = 0; it < 2; ++it) probe<<<sms, 32, smem>>>(buf, d_offs, lines, 0, lat, who);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("error %s\n", cudaGetErrorString(e)); return 1; }
  std::vector<unsigned> h_lat(sms * lines), h_who(2 * sms);
  cudaMemcpy(h_lat.data(), lat, h_lat.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(h_who.data(), who, h_who.size() * 4, cudaMemcpyDeviceToHost);
  for (int b = 0; b < sms; ++b) printf("sm %d %u %u\n", b, h_who[2 * b], h_who[2 * b + 1]);
  for (int b = 0; b < sms; ++b) {
    printf("lat %u", h_who[2 * b]);
    for (int l = 0; l < lines; ++l) printf(" %u", h_lat[b * lines + l]);
    printf("\n");
  }
  return 0;
}
