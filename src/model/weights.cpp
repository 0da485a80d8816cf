// Loads a model's weights from a checkpoint onto a backend (see model.h) through the
// prepared layout (prepared_weights.h): the same fusion and conversion `ignition export` stores in a
// package (q/k/v and gate/up fused row-wise so each is one GEMM, matrices BF16, norm weights and
// biases F32), then uploaded as flare run uploads a package. Every expected tensor must be present
// with the expected shape; tied embeddings reuse the embedding.
#include <map>

#include "model/model.h"
#include "model/prepared_weights.h"

namespace flare::model {

LoadedWeights weights_load(const ModelSpec& spec, const std::filesystem::path& dir, helios::Backend& backend) {
  std::map<std::string, PreparedTensor> tensors;
  prepare_weights(spec, dir, [&](PreparedGroup&& group) {
    for (auto& tensor : group.tensors) {
      std::string name = tensor.name;
      tensors.emplace(std::move(name), std::move(tensor));
    }
  });
  const PreparedLookup lookup = [&](const std::string& name, PreparedTensorRef& out) {
    const auto it = tensors.find(name);
    if (it == tensors.end()) return false;
    out.dtype = it->second.dtype;
    out.shape = it->second.shape;
    out.bytes = it->second.bytes;
    return true;
  };
  return weights_from_prepared(spec, lookup, backend);
}

}  // namespace flare::model
