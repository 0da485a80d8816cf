// A loopback stand-in for the Hugging Face Hub for throughput measurements (bench/hub_download/
// run.sh), in C++ so it runs where Node.js does not (GPU machines) and costs the client as little
// CPU as it can: every top-level file of one folder is served as repository REPOSITORY at one
// commit, through the same subset of the protocol the client uses (revision and tree APIs, `HEAD
// /resolve` answered with a 302 to a second "CDN" port carrying X-Linked-Etag / X-Linked-Size /
// X-Repo-Commit, then GET with Range and 206 on the CDN port). Bodies go out with sendfile(2) from
// the page cache, one thread per connection, keep-alive. The functional tests' server with its
// fault switches is tests/e2e/lib/hub_server.mjs; this one has no faults and no authentication.
//
//   bench_hub_server DIR REPOSITORY PORT_FILE      (PORT_FILE receives "API_PORT CDN_PORT")
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "hub/content_hash.h"

namespace {

namespace fs = std::filesystem;

constexpr const char* kCommit = "be7c4000000000000000000000000000000000be";

struct ServedFile {
  std::string name;
  fs::path path;
  std::uint64_t size = 0;
  std::string sha256;
};

struct Repository {
  std::string id;
  std::map<std::string, ServedFile> by_name;
  std::map<std::string, const ServedFile*> by_sha256;
  int cdn_port = 0;
};

bool send_all(int fd, const std::string& text) {
  std::size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::string head(int status, const char* reason, const std::string& headers, std::uint64_t length) {
  char line[96];
  std::snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", status, reason);
  return std::string(line) + headers + "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

bool send_json(int fd, const std::string& body, bool head_only) {
  return send_all(fd, head(200, "OK", "Content-Type: application/json\r\n", body.size()) + (head_only ? "" : body));
}

bool send_not_found(int fd, const char* code) {
  const std::string body = "{\"error\":\"not found\"}";
  return send_all(fd, head(404, "Not Found", std::string("X-Error-Code: ") + code + "\r\nContent-Type: application/json\r\n",
                           body.size()) + body);
}

// "bytes=A-B" or "bytes=A-" within size; nullopt when absent or unusable (the whole file is sent).
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_range(const std::string& value, std::uint64_t size) {
  std::uint64_t first = 0, last = 0;
  if (std::sscanf(value.c_str(), "bytes=%" SCNu64 "-%" SCNu64, &first, &last) == 2) {
  } else if (std::sscanf(value.c_str(), "bytes=%" SCNu64 "-", &first) == 1) {
    last = size - 1;
  } else {
    return std::nullopt;
  }
  if (size == 0 || first > last || first >= size) return std::nullopt;
  return std::make_pair(first, std::min(last, size - 1));
}

bool send_file(int fd, const ServedFile& file, const std::string& range_header, bool head_only) {
  std::optional<std::pair<std::uint64_t, std::uint64_t>> range;
  if (!range_header.empty()) range = parse_range(range_header, file.size);
  const std::uint64_t first = range ? range->first : 0;
  const std::uint64_t length = range ? range->second - first + 1 : file.size;
  std::string headers = "Accept-Ranges: bytes\r\nETag: \"" + file.sha256 + "\"\r\n";
  if (range)
    headers += "Content-Range: bytes " + std::to_string(first) + "-" + std::to_string(range->second) + "/" +
               std::to_string(file.size) + "\r\n";
  if (!send_all(fd, head(range ? 206 : 200, range ? "Partial Content" : "OK", headers, length))) return false;
  if (head_only || length == 0) return true;
  const int in = ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return false;
  off_t offset = static_cast<off_t>(first);
  std::uint64_t left = length;
  while (left > 0) {
    const ssize_t n = ::sendfile(fd, in, &offset, static_cast<std::size_t>(std::min<std::uint64_t>(left, 1u << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    left -= static_cast<std::uint64_t>(n);
  }
  ::close(in);
  return left == 0;
}

std::string tree_json(const Repository& repo) {
  std::string out = "[";
  for (const auto& [name, file] : repo.by_name) {
    if (out.size() > 1) out += ",";
    // The oid is the git id of the LFS pointer on the real Hub; any 40-hex id serves here.
    out += "{\"type\":\"file\",\"oid\":\"" + file.sha256.substr(0, 40) + "\",\"size\":" + std::to_string(file.size) +
           ",\"path\":\"" + name + "\",\"lfs\":{\"oid\":\"" + file.sha256 + "\",\"size\":" + std::to_string(file.size) +
           ",\"pointerSize\":134}}";
  }
  return out + "]";
}

// One request on the API port; false closes the connection.
bool answer_api(int fd, const Repository& repo, const std::string& method, const std::string& target) {
  const bool head_only = method == "HEAD";
  const std::string path = target.substr(0, target.find('?'));
  const std::string api = "/api/models/" + repo.id + "/";
  if (path.rfind(api + "revision/", 0) == 0)
    return send_json(fd, "{\"id\":\"" + repo.id + "\",\"sha\":\"" + kCommit + "\"}", head_only);
  if (path.rfind(api + "tree/", 0) == 0) return send_json(fd, tree_json(repo), head_only);
  const std::string resolve = "/" + repo.id + "/resolve/";
  if (path.rfind(resolve, 0) == 0) {
    const std::string rest = path.substr(resolve.size());
    const std::size_t slash = rest.find('/');
    const auto it = slash == std::string::npos ? repo.by_name.end() : repo.by_name.find(rest.substr(slash + 1));
    if (it == repo.by_name.end()) return send_not_found(fd, "EntryNotFound");
    const ServedFile& file = it->second;
    return send_all(fd, head(302, "Found",
                             "Location: http://127.0.0.1:" + std::to_string(repo.cdn_port) + "/cdn/" + file.sha256 +
                                 "\r\nX-Linked-Etag: \"" + file.sha256 + "\"\r\nX-Linked-Size: " +
                                 std::to_string(file.size) + "\r\nX-Repo-Commit: " + kCommit + "\r\n",
                             0));
  }
  return send_not_found(fd, "RepoNotFound");
}

bool answer_cdn(int fd, const Repository& repo, const std::string& method, const std::string& target,
                const std::string& range) {
  const std::string prefix = "/cdn/";
  const std::string sha = target.rfind(prefix, 0) == 0 ? target.substr(prefix.size(), 64) : "";
  const auto it = repo.by_sha256.find(sha);
  if (it == repo.by_sha256.end()) return send_not_found(fd, "");
  return send_file(fd, *it->second, range, method == "HEAD");
}

// Serves requests on one connection until the client closes it.
void serve_connection(int fd, const Repository& repo, bool cdn) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string buffer;
  char block[8192];
  while (true) {
    std::size_t end;
    while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, block, sizeof block, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || buffer.size() > (64u << 10)) {
        ::close(fd);
        return;
      }
      buffer.append(block, static_cast<std::size_t>(n));
    }
    const std::string request = buffer.substr(0, end);
    buffer.erase(0, end + 4);  // no request here has a body
    const std::size_t sp1 = request.find(' '), sp2 = request.find(' ', sp1 + 1);
    if (sp1 == std::string::npos || sp2 == std::string::npos) break;
    const std::string method = request.substr(0, sp1), target = request.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string range;
    for (std::size_t line = request.find("\r\n"); line != std::string::npos; line = request.find("\r\n", line + 2)) {
      if (strncasecmp(request.c_str() + line + 2, "range:", 6) == 0) {
        const std::size_t stop = request.find("\r\n", line + 2);
        range = request.substr(line + 8, stop == std::string::npos ? std::string::npos : stop - line - 8);
        range.erase(0, range.find_first_not_of(' '));
      }
    }
    const bool ok = cdn ? answer_cdn(fd, repo, method, target, range) : answer_api(fd, repo, method, target);
    if (!ok) break;
  }
  ::close(fd);
}

int listen_loopback() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, 256) != 0) {
    std::perror("bench_hub_server: listen");
    std::exit(1);
  }
  return fd;
}

int port_of(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

void accept_loop(int listener, const Repository& repo, bool cdn) {
  while (true) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::perror("bench_hub_server: accept");
      std::exit(1);
    }
    std::thread([fd, &repo, cdn] { serve_connection(fd, repo, cdn); }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DIR REPOSITORY PORT_FILE\n", argv[0]);
    return 2;
  }
  Repository repo;
  repo.id = argv[2];
  const auto start = std::chrono::steady_clock::now();
  try {
    for (const auto& entry : fs::directory_iterator(argv[1])) {
      if (!entry.is_regular_file()) continue;
      ServedFile file;
      file.name = entry.path().filename().string();
      file.path = entry.path();
      file.size = entry.file_size();
      file.sha256 = flare::hub::content_id_of_file(file.path.string(), false);
      repo.by_name[file.name] = file;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_hub_server: %s\n", error.what());
    return 1;
  }
  for (const auto& [name, file] : repo.by_name) repo.by_sha256[file.sha256] = &file;
  const int api = listen_loopback(), cdn = listen_loopback();
  repo.cdn_port = port_of(cdn);
  std::fprintf(stderr, "bench_hub_server: %zu files of %s hashed in %.1f s; API port %d, CDN port %d\n",
               repo.by_name.size(), repo.id.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), port_of(api),
               repo.cdn_port);
  const std::string ports = std::to_string(port_of(api)) + " " + std::to_string(repo.cdn_port) + "\n";
  const std::string temp = std::string(argv[3]) + ".tmp";
  std::ofstream(temp) << ports;
  fs::rename(temp, argv[3]);
  std::thread([&] { accept_loop(cdn, repo, true); }).detach();
  accept_loop(api, repo, false);
}
