// The Download checkpoint stage's status text: bytes so far, rate and time left.
#include "ignition/download_progress.h"

#include <gtest/gtest.h>

namespace flare::ignition {
namespace {

TEST(DownloadProgress, StatusNamesBytesRateAndTimeLeft) {
  const std::string status = DownloadProgress::render_status(512ull << 20, 1ull << 30, 256.0 * (1 << 20));
  EXPECT_NE(status.find("512 MiB of 1.0 GiB"), std::string::npos) << status;
  EXPECT_NE(status.find("256 MiB/s"), std::string::npos) << status;
  EXPECT_NE(status.find("2.0s left"), std::string::npos) << status;
  // No rate yet: no time left either.
  EXPECT_EQ(DownloadProgress::render_status(0, 1ull << 30, 0.0), "0 B of 1.0 GiB");
}

}  // namespace
}  // namespace flare::ignition
