// `ignition export --reuse-weights`: the prepared weights come from the model's cached default
// version instead of the checkpoint's tensors. That version's signed payload hashes and tensor views
// are trusted as they are (the cache verified them when they were published); its payload bytes
// are read from the cache, not rehashed. The checkpoint revision, the architecture, the model
// configuration (hence the prepared layout), the prepared-layout contract and the tensor-parallel
// size must match, or the export fails with a preparation error naming the difference.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ignition/resolve.h"
#include "package/cache.h"
#include "proto/manifest.pb.h"

namespace flare::ignition {

struct ReusedPayload {
  std::string name;  // "weights/layer-000"
  std::string id;    // its signed SHA-256
  std::vector<std::byte> bytes;
};

struct ReusedWeights {
  std::string source;  // "model@version" of the cached default
  std::vector<ReusedPayload> payloads;
  std::vector<proto::TensorView> views;
};

ReusedWeights reuse_cached_weights(const package::ModelCache& cache, const std::string& model_key,
                                   const ResolvedModel& resolved, const std::string& config_json);

}  // namespace flare::ignition
