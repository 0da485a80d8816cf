// SwiGLU: out = bf16(silu(gate) * up) with gate_up [rows, 2 * inter] (gate first), F32 math,
// silu(g) = g / (1 + exp(-g)) as the reference. blockIdx.y is the row; x covers the columns.
// Defines: FLARE_BLOCK (threads per block, default 256).
#include <cuda_bf16.h>

#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_swiglu(const __nv_bfloat16* __restrict__ gate_up, long long gate_up_stride,  // [rows, 2 * inter]
             __nv_bfloat16* __restrict__ out, long long out_stride,                // [rows, inter]
             int inter) {
  const long long row = blockIdx.y;
  const __nv_bfloat16* g = gate_up + row * gate_up_stride;
  const __nv_bfloat16* u = g + inter;
  __nv_bfloat16* dst = out + row * out_stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < inter; c += gridDim.x * FLARE_BLOCK) {
    const float gv = __bfloat162float(g[c]);
    dst[c] = __float2bfloat16(gv / (1.0f + expf(-gv)) * __bfloat162float(u[c]));
  }
}
