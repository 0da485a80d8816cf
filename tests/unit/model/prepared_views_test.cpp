// Prepared tensors looked up through a manifest's views: found, absent, and views that name a
// missing payload, an unknown dtype or bytes outside their payload.
#include <gtest/gtest.h>

#include "common/error.h"
#include "model/prepared_views.h"

namespace flare::model {
namespace {

proto::TensorView* add_view(proto::Manifest& m, const std::string& name, const std::string& payload,
                            const std::string& dtype, std::uint64_t offset, std::uint64_t length) {
  auto* view = m.add_tensors();
  view->set_name(name);
  view->set_payload(payload);
  view->set_dtype(dtype);
  view->add_shape(std::int64_t(length / 2));
  view->set_offset_bytes(offset);
  view->set_length_bytes(length);
  return view;
}

TEST(PreparedViews, FindsCheckedTensorsAndRejectsBadViews) {
  proto::Manifest m;
  add_view(m, "embed", "weights/embedding", "BF16", 64, 8);
  add_view(m, "orphan", "weights/absent", "BF16", 0, 8);
  add_view(m, "odd", "weights/embedding", "F16", 0, 8);
  add_view(m, "past_end", "weights/embedding", "BF16", 100, 40);
  const std::vector<std::byte> payload(128, std::byte{7});
  std::uint64_t counted = 0;
  const PreparedLookup lookup = lookup_from_views(
      m,
      [&](const std::string& name) -> std::optional<std::span<const std::byte>> {
        if (name != "weights/embedding") return std::nullopt;
        return std::span<const std::byte>(payload);
      },
      [&](std::uint64_t n) { counted += n; });
  PreparedTensorRef ref;
  ASSERT_TRUE(lookup("embed", ref));
  EXPECT_EQ(ref.dtype, helios::DType::bf16);
  EXPECT_EQ(ref.bytes.data(), payload.data() + 64);
  EXPECT_EQ(ref.bytes.size(), 8u);
  EXPECT_EQ(counted, 8u);
  EXPECT_FALSE(lookup("absent", ref));
  EXPECT_THROW(lookup("orphan", ref), Error);
  EXPECT_THROW(lookup("odd", ref), Error);
  EXPECT_THROW(lookup("past_end", ref), Error);
}

}  // namespace
}  // namespace flare::model
