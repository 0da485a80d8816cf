// The prepared tensors a package manifest describes (its TensorView list), over payload bytes the
// caller finds by payload name: a verified package's payloads at load time, or the payloads an
// export has just built in memory. Every view is checked (known payload, dtype, range) before
// its bytes are handed out.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "model/prepared_weights.h"
#include "proto/manifest.pb.h"

namespace flare::model {

// The bytes of the payload named `payload_name`, or nullopt when there is none.
using PayloadBytes = std::function<std::optional<std::span<const std::byte>>(const std::string& payload_name)>;

// A lookup over `manifest`'s views (which must outlive it). A view naming a missing payload, an
// unknown dtype or a range outside its payload is flare::Error (input) naming the tensor.
// `on_tensor` (optional) receives each found tensor's byte length, for progress.
PreparedLookup lookup_from_views(const proto::Manifest& manifest, PayloadBytes payload_bytes,
                                 std::function<void(std::uint64_t)> on_tensor = {});

// Tensors of one model among several in a manifest: `name` looks up prefix + name in `whole`
// (a package's learned draft model keeps its layout under "draft/").
PreparedLookup prefixed_lookup(PreparedLookup whole, std::string prefix);

}  // namespace flare::model
