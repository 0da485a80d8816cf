// A model's kernel needs (see kernel_needs.h).
#include "model/kernel_needs.h"

#include <algorithm>

#include "model/architecture.h"

namespace flare::model {
namespace {

template <typename T>
void sort_unique(std::vector<T>& values) {
  std::ranges::sort(values);
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

helios::KernelNeeds kernel_needs(const ModelSpec& spec, const ServingSettings& serving, const ModelSpec* draft) {
  helios::KernelNeeds needs;
  architecture_of(spec).kernel_needs(spec, needs);
  if (draft) architecture_of(*draft).kernel_needs(*draft, needs);  // adds to the same lists and flags
  sort_unique(needs.attention);
  needs.vocab_size = spec.vocab_size;
  needs.kv_dtypes = serving.kv_dtypes;
  sort_unique(needs.kv_dtypes);
  needs.page_size_tokens = serving.page_size_tokens;
  needs.decode_buckets = serving.decode_buckets;
  sort_unique(needs.decode_buckets);
  needs.prefill_chunk_tokens = serving.prefill_chunk_tokens;
  needs.max_verify_tokens = serving.max_verify_tokens;
  needs.verify_token_capacity = serving.verify_token_capacity;
  needs.verify_graph_budget = serving.verify_graph_budget;
  return needs;
}

}  // namespace flare::model
