// The gated MLP activations, out = bf16(act(gate) * up) with gate_up [rows, 2 * inter] (gate
// first), F32 math, as the reference computes them:
//   SwiGLU (flare_swiglu*): act = silu(g) = g / (1 + exp(-g));
//   GeGLU (flare_geglu*, Gemma): act = gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))),
//     PyTorch's gelu(approximate="tanh").
// Two entry points each:
//   flare_{swiglu,geglu}_vec: one thread per 16-byte chunk (8 values) of out, over a flat grid of
//     rows * inter / 8 chunks, so a decode step's one row spreads over many CTAs and a prefill's
//     many rows need no second grid dimension. Needs inter % 8 == 0 and 16-byte aligned rows.
//   flare_{swiglu,geglu}: any shape; blockIdx.y is the row, x strides over the columns.
// Defines: FLARE_BLOCK (threads per block, at least the host's launch, default 256).
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

#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

__device__ __forceinline__ float flare_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
__device__ __forceinline__ float flare_gelu_tanh_mul(float g, float u) {
  const float k_sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * g * (1.0f + tanhf(k_sqrt_2_over_pi * (g + 0.044715f * g * g * g))) * u;
}
struct FlareSilu {
  __device__ __forceinline__ float operator()(float g, float u) const { return flare_silu_mul(g, u); }
};
struct FlareGeluTanh {
  __device__ __forceinline__ float operator()(float g, float u) const { return flare_gelu_tanh_mul(g, u); }
};

template <typename Act>
__device__ __forceinline__ void flare_gated_vec(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,
                                                __nv_bfloat16* __restrict__ out, long long out_stride, int inter,
                                                long long n_chunks) {
  flare_pdl_enter();
  const Act act;
  const long long chunk = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (chunk >= n_chunks) return;
  const int per_row = inter / 8;
  const long long row = chunk / per_row;
  const int c = int(chunk % per_row) * 8;
  const __nv_bfloat16* g = gate_up + row * gate_up_stride + c;
  const uint4 gv = *reinterpret_cast<const uint4*>(g);
  const uint4 uv = *reinterpret_cast<const uint4*>(g + inter);
  const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
  const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
  uint4 o;
  __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    o2[e] = __floats2bfloat162_rn(act(__low2float(g2[e]), __low2float(u2[e])),
                                  act(__high2float(g2[e]), __high2float(u2[e])));
  }
  *reinterpret_cast<uint4*>(out + row * out_stride + c) = o;
}

template <typename Act>
__device__ __forceinline__ void flare_gated(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,
                                            __nv_bfloat16* __restrict__ out, long long out_stride, int inter) {
  flare_pdl_enter();
  const Act act;
  const long long row = blockIdx.y;
  const __nv_bfloat16* g = gate_up + row * gate_up_stride;
  const __nv_bfloat16* u = g + inter;
  __nv_bfloat16* dst = out + row * out_stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < inter; c += gridDim.x * FLARE_BLOCK) {
    dst[c] = __float2bfloat16(act(__bfloat162float(g[c]), __bfloat162float(u[c])));
  }
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_swiglu_vec(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,  // [rows, 2 * inter]
                 __nv_bfloat16* __restrict__ out, long long out_stride,                // [rows, inter]
                 int inter, long long n_chunks) {                                      // rows * inter / 8
  flare_gated_vec<FlareSilu>(gate_up, gate_up_stride, out, out_stride, inter, n_chunks);
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_swiglu(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,  // [rows, 2 * inter]
             __nv_bfloat16* __restrict__ out, long long out_stride,                // [rows, inter]
             int inter) {
  flare_gated<FlareSilu>(gate_up, gate_up_stride, out, out_stride, inter);
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_geglu_vec(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,  // [rows, 2 * inter]
                __nv_bfloat16* __restrict__ out, long long out_stride,                // [rows, inter]
                int inter, long long n_chunks) {                                      // rows * inter / 8
  flare_gated_vec<FlareGeluTanh>(gate_up, gate_up_stride, out, out_stride, inter, n_chunks);
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_geglu(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,  // [rows, 2 * inter]
            __nv_bfloat16* __restrict__ out, long long out_stride,                // [rows, inter]
            int inter) {
  flare_gated<FlareGeluTanh>(gate_up, gate_up_stride, out, out_stride, inter);
}
