// Deterministic random fills on the device, for benchmarks that need model-sized tensors (16 GB
// of weights) without building them on the host. Element i of a fill is a function of (seed, i)
// only (a SplitMix64-style hash), so any launch shape yields the same values.
//   flare_fill_random_bf16: out[i] = bf16(offset + scale * u), u uniform in [-1, 1)
//   flare_fill_random_f32:  out[i] = offset + scale * u
//   flare_fill_random_f8e4m3: random finite e4m3 bytes of magnitude 2^-6 .. 3.75 (never NaN)
// Grid-stride loops: any grid covers any n.
#include <cuda_bf16.h>

// Programmatic dependent launch (sm_90+, when the host launches with it: DependentLaunch::all): the next
// kernel may start launching once every CTA of this one has started, and this one waits for the
// previous kernel to finish (its results, and its reads of what this one overwrites) before
// touching global memory. Both are no-ops for a plain launch.
__device__ __forceinline__ void flare_pdl_enter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ unsigned long long flare_fill_hash(unsigned long long seed, unsigned long long i) {
  unsigned long long z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1) from the top 24 bits of the hash.
__device__ __forceinline__ float flare_fill_uniform(unsigned long long seed, unsigned long long i) {
  return float(flare_fill_hash(seed, i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

extern "C" __global__ void flare_fill_random_bf16(__nv_bfloat16* __restrict__ out, unsigned long long n,
                                                  unsigned long long seed, float scale, float offset) {
  flare_pdl_enter();
  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = __float2bfloat16(offset + scale * flare_fill_uniform(seed, i));
  }
}

extern "C" __global__ void flare_fill_random_f32(float* __restrict__ out, unsigned long long n,
                                                 unsigned long long seed, float scale, float offset) {
  flare_pdl_enter();
  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = offset + scale * flare_fill_uniform(seed, i);
  }
}

// e4m3: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent fields 1..8 keep every value
// finite and normal (S.1111.111 is NaN).
extern "C" __global__ void flare_fill_random_f8e4m3(unsigned char* __restrict__ out, unsigned long long n,
                                                    unsigned long long seed) {
  flare_pdl_enter();
  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    const unsigned long long h = flare_fill_hash(seed, i);
    const unsigned sign = unsigned(h >> 63) & 1u, exponent = 1u + unsigned(h >> 32) % 8u, mantissa = unsigned(h) & 7u;
    out[i] = (unsigned char)((sign << 7) | (exponent << 3) | mantissa);
  }
}
