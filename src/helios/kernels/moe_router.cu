// Mixture-of-experts routing (Backend::router_topk): per token, a softmax over its router logits
// [n_experts] f32, the top_k most probable experts (most probable first; a tie goes to the lower
// index, as torch.topk), and their weights: the probabilities, divided by their sum (added in slot
// order) when `renormalize`. F32 math throughout.
//
// flare_moe_router: one warp per token, 4 tokens per 128-thread block, grid ceil(n_tokens / 4).
// Lane l reads experts l, l + 32, ... once (up to 256 experts; more are read again each pick) and
// keeps their probabilities in registers. The j-th pick is the best expert strictly after the (j-1)-th
// in the order (probability descending, index ascending), so no "taken" set is kept: each pick is
// a warp arg-max over the experts below the previous one. Needs top_k <= 32 (lane j holds pick j
// until the end) and top_k <= n_experts (the host checks both).
// Defines: none.

// Programmatic dependent launch (sm_90+, when the host launches with it): the next kernel may start
// launching once every CTA of this one has started, and this one waits for the previous kernel to
// finish before touching global memory. Both are no-ops for a plain launch.
__device__ __forceinline__ void flare_pdl_enter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

constexpr int k_router_warps = 4;

// Whether (p, e) comes before (q, f) in the pick order: more probable first, then the lower index.
__device__ __forceinline__ bool flare_router_before(float p, int e, float q, int f) {
  return p > q || (p == q && e < f);
}

// Up to this many experts a lane (256 experts a warp) the probabilities stay in registers, each
// computed once; above, every pick recomputes them from the logits.
constexpr int k_router_cached = 8;

extern "C" __global__ void __launch_bounds__(k_router_warps * 32)
flare_moe_router(const float* __restrict__ logits, long long logits_stride,  // [n_tokens, n_experts]
                 int n_tokens, int n_experts, int top_k, int renormalize,
                 int* __restrict__ ids, long long ids_stride,                  // [n_tokens, top_k]
                 float* __restrict__ weights, long long weights_stride) {      // [n_tokens, top_k]
  flare_pdl_enter();
  const int lane = threadIdx.x % 32;
  const long long t = (long long)blockIdx.x * k_router_warps + threadIdx.x / 32;
  if (t >= n_tokens) return;
  const float* l = logits + t * logits_stride;
  const bool cached = n_experts <= 32 * k_router_cached;

  float mine[k_router_cached];  // lane's logits, then probabilities, of experts lane + 32 i
#pragma unroll
  for (int i = 0; i < k_router_cached; ++i) {
    const int e = lane + 32 * i;
    mine[i] = cached && e < n_experts ? l[e] : -__int_as_float(0x7f800000);
  }
  float max = -__int_as_float(0x7f800000);
  if (cached) {
#pragma unroll
    for (int i = 0; i < k_router_cached; ++i) max = fmaxf(max, mine[i]);
  } else {
    for (int e = lane; e < n_experts; e += 32) max = fmaxf(max, l[e]);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, o));
  float sum = 0.0f;
  if (cached) {
#pragma unroll
    for (int i = 0; i < k_router_cached; ++i) {
      if (lane + 32 * i < n_experts) sum += expf(mine[i] - max);
    }
  } else {
    for (int e = lane; e < n_experts; e += 32) sum += expf(l[e] - max);
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (cached) {
#pragma unroll
    for (int i = 0; i < k_router_cached; ++i) mine[i] = lane + 32 * i < n_experts ? expf(mine[i] - max) / sum : -1.0f;
  }

  float prev_p = __int_as_float(0x7f800000);  // +inf: every expert comes after it
  int prev_e = -1;
  float mine_p = 0.0f, chosen = 0.0f;
  int mine_e = 0;
  for (int j = 0; j < top_k; ++j) {
    float best_p = -1.0f;  // below every probability
    int best_e = 0x7fffffff;
    if (cached) {
#pragma unroll
      for (int i = 0; i < k_router_cached; ++i) {
        const int e = lane + 32 * i;
        const float p = mine[i];
        if (e < n_experts && flare_router_before(prev_p, prev_e, p, e) && flare_router_before(p, e, best_p, best_e)) {
          best_p = p;
          best_e = e;
        }
      }
    } else {
      for (int e = lane; e < n_experts; e += 32) {
        const float p = expf(l[e] - max) / sum;
        if (flare_router_before(prev_p, prev_e, p, e) && flare_router_before(p, e, best_p, best_e)) {
          best_p = p;
          best_e = e;
        }
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      const float q = __shfl_xor_sync(0xffffffffu, best_p, o);
      const int f = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (flare_router_before(q, f, best_p, best_e)) {
        best_p = q;
        best_e = f;
      }
    }
    if (lane == j) {
      mine_p = best_p;
      mine_e = best_e;
    }
    chosen += best_p;  // every lane holds the same picks, added in slot order
    prev_p = best_p;
    prev_e = best_e;
  }
  if (lane < top_k) {
    ids[t * ids_stride + lane] = mine_e;
    weights[t * weights_stride + lane] = renormalize ? mine_p / chosen : mine_p;
  }
}
