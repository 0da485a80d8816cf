// The Hub response parsers against well-formed, malformed and hostile input.
#include "hub/protocol.h"

#include <functional>

#include <gtest/gtest.h>

#include "common/error.h"

namespace flare::hub {
namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kSha = "aa" + std::string(62, 'b');

void expect_fetch_error(const std::function<void()>& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one mentioning " << fragment;
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::fetch);
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(HubProtocol, RevisionCommit) {
  EXPECT_EQ(parse_revision_commit(R"({"id":"org/name","sha":")" + kCommit + R"(","siblings":[]})"), kCommit);
  for (const std::string& bad : std::vector<std::string>{"", "{", "[]", "null", R"({"sha":12})", R"({"sha":"abc"})",
                                R"({"id":"x"})", R"({"sha":")" + std::string(40, 'G') + "\"}",
                                R"({"sha":")" + std::string(40, 'A') + "\"}", "{\"sha\":\"" + kCommit + "0\"}"}) {
    EXPECT_THROW(parse_revision_commit(bad), Error) << bad;
  }
}

TEST(HubProtocol, TreePage) {
  const std::string body = R"([
    {"type":"file","oid":")" + kCommit + R"(","size":12,"path":"config.json"},
    {"type":"directory","oid":")" + kCommit + R"(","path":"original"},
    {"type":"file","oid":")" + kCommit + R"(","size":4294967296,"path":"model.safetensors",
     "lfs":{"oid":")" + kSha + R"(","size":4294967296,"pointerSize":134},"xetHash":"ff"}])";
  const auto entries = parse_tree_page(body);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_TRUE(entries[0].is_file);
  EXPECT_EQ(entries[0].etag(), kCommit);
  EXPECT_EQ(entries[0].size, 12u);
  EXPECT_FALSE(entries[1].is_file);
  EXPECT_EQ(entries[2].size, 4294967296u);
  EXPECT_EQ(entries[2].etag(), kSha);
  EXPECT_TRUE(parse_tree_page("[]").empty());
}

TEST(HubProtocol, TreePageRejectsMalformedEntries) {
  const std::string oid = "\"oid\":\"" + kCommit + "\"";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{}", "not a JSON array"},
      {"[1]", "not an object"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1}]", "without a type or path"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"../../etc/passwd\"}]", "unsafe path"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"/abs\"}]", "unsafe path"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a/./b\"}]", "unsafe path"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a\\\\b\"}]", "unsafe path"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a\\nb\"}]", "unsafe path"},
      {"[{\"type\":\"link\"," + oid + ",\"size\":1,\"path\":\"a\"}]", "unknown type"},
      {"[{\"type\":\"file\",\"oid\":\"xyz\",\"size\":1,\"path\":\"a\"}]", "no valid oid"},
      {"[{\"type\":\"file\"," + oid + ",\"path\":\"a\"}]", "no size"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":-1,\"path\":\"a\"}]", "invalid size"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1.5,\"path\":\"a\"}]", "invalid size"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":\"1\",\"path\":\"a\"}]", "invalid size"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":18446744073709551615,\"path\":\"a\"}]", "implausible size"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a\",\"lfs\":5}]", "invalid lfs"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a\",\"lfs\":{\"oid\":\"abc\"}}]", "LFS SHA-256"},
      {"[{\"type\":\"file\"," + oid + ",\"size\":1,\"path\":\"a\",\"lfs\":{\"oid\":\"" + kSha + "\",\"size\":2}}]",
       "two different sizes"},
      {"[{\"type\":\"file\"", "not valid JSON"},
  };
  for (const auto& [body, fragment] : cases) expect_fetch_error([&] { parse_tree_page(body); }, fragment);
}

TEST(HubProtocol, LinkNext) {
  EXPECT_EQ(parse_link_next(R"(<https://hub/api/models/a/b/tree/x?cursor=abc>; rel="next")"),
            "https://hub/api/models/a/b/tree/x?cursor=abc");
  EXPECT_EQ(parse_link_next(R"(<https://h/first>; rel="prev", <https://h/n>; rel=next)"), "https://h/n");
  EXPECT_EQ(parse_link_next(R"(<https://h/n>;REL="Next")"), "https://h/n");
  EXPECT_FALSE(parse_link_next(""));
  EXPECT_FALSE(parse_link_next(R"(<https://h/last>; rel="last")"));
  EXPECT_FALSE(parse_link_next(R"(<https://h/n; rel="next")"));
  EXPECT_FALSE(parse_link_next(R"(<>; rel="next")"));
  EXPECT_FALSE(parse_link_next("<https://h/a b>; rel=\"next\""));
  EXPECT_FALSE(parse_link_next("garbage; rel=next"));
}

TEST(HubProtocol, RetryAfter) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("3", now), std::chrono::seconds(3));
  EXPECT_EQ(parse_retry_after(" 0 ", now), std::chrono::seconds(0));
  EXPECT_EQ(parse_retry_after("999999999", now), std::chrono::seconds(3600));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), std::chrono::seconds(10));
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:27 GMT", now), std::chrono::seconds(0));
  for (const char* bad : {"", "-1", "1.5", "soon", "99999999999999999999", "Sun, 06 Nov 1994 08:49:47 UTC",
                          "Xyz, 99 Nov 1994 08:49:47 GMT"})
    EXPECT_FALSE(parse_retry_after(bad, now)) << bad;
}

TEST(HubProtocol, ContentRange) {
  auto range = parse_content_range("bytes 0-99/1000");
  ASSERT_TRUE(range);
  EXPECT_EQ(range->first, 0u);
  EXPECT_EQ(range->last, 99u);
  EXPECT_EQ(range->total, 1000u);
  range = parse_content_range("bytes */1000");
  ASSERT_TRUE(range);
  EXPECT_TRUE(range->unsatisfied);
  for (const char* bad : {"", "bytes", "bytes 0-99", "bytes 99-0/1000", "bytes 0-1000/1000", "items 0-1/2",
                          "bytes a-b/c", "bytes -5/10", "bytes 0-5/", "bytes 0-5/99999999999999999999"})
    EXPECT_FALSE(parse_content_range(bad)) << bad;
}

TEST(HubProtocol, Etags) {
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("\"" + kSha + "\""), kSha);
  EXPECT_EQ(normalize_etag("abc"), "abc");
  EXPECT_EQ(normalize_etag("\""), "\"");
  EXPECT_EQ(normalize_etag(""), "");
}

TEST(HubProtocol, IndexShards) {
  const auto shards = parse_index_shards(
      R"({"metadata":{},"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00001-of-00002.safetensors",
        "c":"model-00001-of-00002.safetensors"}})");
  EXPECT_EQ(shards, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  for (const std::string& bad : std::vector<std::string>{"[]", "{}", R"({"weight_map":{}})", R"({"weight_map":[]})",
                                R"({"weight_map":{"a":1}})", R"({"weight_map":{"a":"../x.safetensors"}})",
                                R"({"weight_map":{"a":"sub/x.safetensors"}})", R"({"weight_map":{"a":"x.bin"}})",
                                R"({"weight_map":{"a":".safetensors"}})", "{"})
    EXPECT_THROW(parse_index_shards(bad), Error) << bad;
}

TEST(HubProtocol, Names) {
  EXPECT_TRUE(is_repository_id("Qwen/Qwen3-8B"));
  EXPECT_TRUE(is_repository_id("a.b/c_d"));
  for (const char* bad : {"", "x", "/x", "x/", "a/b/c", "a/../b", "a /b", "a/b\n", ".a/b", "a/.b", "a%2Fb/c"})
    EXPECT_FALSE(is_repository_id(bad)) << bad;
  EXPECT_TRUE(is_revision_name("main"));
  EXPECT_TRUE(is_revision_name("refs/pr/1"));
  EXPECT_TRUE(is_revision_name(kCommit));
  for (const char* bad : {"", "/main", "main/", "a//b", "..", "a/../b", ".hidden", "a b", "a\tb", "a\\b"})
    EXPECT_FALSE(is_revision_name(bad)) << bad;
  EXPECT_TRUE(is_safe_repo_path("a/b.json"));
  EXPECT_FALSE(is_safe_repo_path(std::string(2000, 'a')));
  EXPECT_FALSE(is_safe_repo_path(std::string("a\0b", 3)));
}

TEST(HubProtocol, Encoding) {
  EXPECT_EQ(encode_segment("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(encode_segment("main"), "main");
  EXPECT_EQ(encode_path("sub dir/a+b.json"), "sub%20dir/a%2Bb.json");
}

TEST(HubProtocol, FailureClassification) {
  EXPECT_EQ(classify_failure(401, "GatedRepo", ""), Failure::gated);
  EXPECT_EQ(classify_failure(403, "GatedRepo", ""), Failure::gated);
  EXPECT_EQ(classify_failure(404, "RepoNotFound", ""), Failure::repo_not_found);
  EXPECT_EQ(classify_failure(401, "", ""), Failure::repo_not_found);
  EXPECT_EQ(classify_failure(401, "", "Invalid credentials in Authorization header"), Failure::bad_token);
  EXPECT_EQ(classify_failure(404, "RevisionNotFound", ""), Failure::revision_not_found);
  EXPECT_EQ(classify_failure(404, "EntryNotFound", ""), Failure::entry_not_found);
  EXPECT_EQ(classify_failure(403, "", "Access to this resource is disabled."), Failure::forbidden);
  EXPECT_EQ(classify_failure(429, "", ""), Failure::transient);
  EXPECT_EQ(classify_failure(503, "", ""), Failure::transient);
  EXPECT_EQ(classify_failure(408, "", ""), Failure::transient);
  EXPECT_EQ(classify_failure(416, "", ""), Failure::range_not_satisfiable);
  EXPECT_EQ(classify_failure(418, "", ""), Failure::other);
}

TEST(HubProtocol, ErrorBody) {
  EXPECT_EQ(error_body_message(R"({"error":"Repository not found"})"), "Repository not found");
  EXPECT_EQ(error_body_message(R"({"error":["a","b"]})"), "a; b");
  EXPECT_EQ(error_body_message(R"({"error":"line\nbreak"})"), "line break");
  EXPECT_EQ(error_body_message("<html>"), "");
  EXPECT_EQ(error_body_message(R"({"error":5})"), "");
  EXPECT_EQ(error_body_message(R"({"error":")" + std::string(1000, 'x') + "\"}").size(), 303u);
}

}  // namespace
}  // namespace flare::hub
