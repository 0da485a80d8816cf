#include "model/prepared_views.h"

#include <map>
#include <memory>

#include "common/error.h"

namespace flare::model {
namespace {

helios::DType view_dtype(const proto::TensorView& view) {
  if (view.dtype() == "BF16") return helios::DType::bf16;
  if (view.dtype() == "F32") return helios::DType::f32;
  if (view.dtype() == "F8_E4M3") return helios::DType::f8_e4m3;
  if (view.dtype() == "I32") return helios::DType::i32;
  if (view.dtype() == "U8") return helios::DType::u8;
  fail_input("package weights: tensor '{}' has unsupported dtype '{}'", view.name(), view.dtype());
}

}  // namespace

PreparedLookup lookup_from_views(const proto::Manifest& manifest, PayloadBytes payload_bytes,
                                 std::function<void(std::uint64_t)> on_tensor) {
  auto views = std::make_shared<std::map<std::string, const proto::TensorView*>>();
  for (const auto& view : manifest.tensors()) views->emplace(view.name(), &view);
  return [views, payload_bytes = std::move(payload_bytes), on_tensor = std::move(on_tensor)](
             const std::string& name, PreparedTensorRef& out) {
    const auto it = views->find(name);
    if (it == views->end()) return false;
    const proto::TensorView& view = *it->second;
    const std::optional<std::span<const std::byte>> bytes = payload_bytes(view.payload());
    if (!bytes) fail_input("package weights: tensor '{}' names a missing payload '{}'", name, view.payload());
    if (view.offset_bytes() > bytes->size() || view.length_bytes() > bytes->size() - view.offset_bytes())
      fail_input("package weights: tensor '{}' lies outside its payload", name);
    out.dtype = view_dtype(view);
    out.shape.assign(view.shape().begin(), view.shape().end());
    out.bytes = bytes->subspan(view.offset_bytes(), view.length_bytes());
    if (on_tensor) on_tensor(view.length_bytes());
    return true;
  };
}

PreparedLookup prefixed_lookup(PreparedLookup whole, std::string prefix) {
  return [whole = std::move(whole), prefix = std::move(prefix)](const std::string& name, PreparedTensorRef& out) {
    return whole(prefix + name, out);
  };
}

}  // namespace flare::model
