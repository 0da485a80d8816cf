// Speculative rounds in the report: each case's median over every seed's samples, the aggregate as
// the equal-weight mean of case medians only when every case completed, and the JSON's raw
// samples by seed.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/round_report.h"

namespace flare::bench {
namespace {

RoundCase round_case(std::int32_t batch, std::int32_t context, std::vector<std::vector<double>> by_seed) {
  RoundCase c;
  c.batch = batch;
  c.context = context;
  c.width = 8;
  for (std::size_t i = 0; i < by_seed.size(); ++i) {
    c.seeds.push_back(std::uint64_t(i * 4 + 3));
    c.by_seed.push_back(timing_of(by_seed[i]));
  }
  c.decode = timing_of({2.0, 2.0});
  return c;
}

TEST(RoundReport, CaseMediansOverSeedsAndTheirMean) {
  BenchReport r;
  r.options.rounds = true;
  r.options.seeds = {3, 7};
  r.rounds = {round_case(1, 512, {{1.0, 5.0, 3.0}, {2.0, 4.0}}), round_case(4, 512, {{6.0, 6.0}, {8.0, 10.0}})};
  rounds_derive(r);
  EXPECT_TRUE(r.rounds[0].complete);
  EXPECT_DOUBLE_EQ(r.rounds[0].timing.median_ms, 3.0);  // 1 2 3 4 5
  EXPECT_DOUBLE_EQ(r.rounds[0].round_over_decode, 1.5);
  EXPECT_DOUBLE_EQ(r.rounds[1].timing.median_ms, 7.0);  // 6 6 8 10
  EXPECT_DOUBLE_EQ(r.rounds_aggregate_ms, 5.0);
  const nlohmann::json j = rounds_json(r);
  EXPECT_EQ(j["cases"][0]["samples_ms_by_seed"]["7"], (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(j["cases"][1]["target_rows"], 32);
  EXPECT_DOUBLE_EQ(j["aggregate_ms"].get<double>(), 5.0);
  EXPECT_NE(rounds_table(r).find("aggregate (mean of the 2 case medians"), std::string::npos) << rounds_table(r);
}

TEST(RoundReport, AnIncompleteCaseLeavesNoAggregate) {
  BenchReport r;
  r.options.rounds = true;
  RoundCase failed = round_case(2, 2048, {{1.0}});
  failed.seeds.push_back(9);  // a second seed that never ran
  RoundCase broken = round_case(4, 2048, {});
  broken.failure = "out of memory";
  r.rounds = {round_case(1, 2048, {{1.0, 1.0}}), failed, broken};
  rounds_derive(r);
  EXPECT_TRUE(r.rounds[0].complete);
  EXPECT_FALSE(r.rounds[1].complete);
  EXPECT_FALSE(r.rounds[2].complete);
  EXPECT_EQ(r.rounds_aggregate_ms, 0.0);
  const nlohmann::json j = rounds_json(r);
  EXPECT_TRUE(j["aggregate_ms"].is_null());
  EXPECT_EQ(j["cases"][2]["failure"], "out of memory");
  EXPECT_NE(rounds_table(r).find("incomplete: out of memory"), std::string::npos);
  EXPECT_NE(rounds_table(r).find("aggregate: none"), std::string::npos);
}

}  // namespace
}  // namespace flare::bench
