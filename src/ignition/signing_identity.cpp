// Signing identity resolution and the terminal passphrase prompt (see signing_identity.h).
#include "ignition/signing_identity.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "package/package.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

// Restores the terminal's attributes and closes it on every path out of read_passphrase.
struct TerminalGuard {
  int fd = -1;
  bool restore = false;
  termios saved{};
  ~TerminalGuard() {
    if (restore) ::tcsetattr(fd, TCSAFLUSH, &saved);
    if (fd >= 0) ::close(fd);
  }
};

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string read_passphrase(const std::string& prompt) {
  TerminalGuard tty;
  tty.fd = ::open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty.fd < 0 || !::isatty(tty.fd)) {
    fail_usage("a passphrase is needed and no terminal is available to ask for it");
  }
  if (::tcgetattr(tty.fd, &tty.saved) == 0) {
    termios quiet = tty.saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;
    // Echo goes off before the prompt appears, and typed-ahead input is discarded.
    if (::tcsetattr(tty.fd, TCSAFLUSH, &quiet) == 0) tty.restore = true;
  }
  write_all(tty.fd, prompt);
  std::string line;
  char c = 0;
  for (;;) {
    ssize_t n = ::read(tty.fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (line.empty()) fail_usage("no passphrase entered");
      break;
    }
    if (c == '\n' || c == '\r') break;
    if (line.size() >= 4096) fail_usage("the passphrase is longer than 4096 bytes");
    line.push_back(c);
  }
  return line;
}

std::string prompt_key_passphrase(const fs::path& path) {
  return read_passphrase("Passphrase for " + path.string() + ": ");
}

fs::path development_key_path(const Config& config) { return config.directory() / "development-signing-key.pem"; }
fs::path development_profile_path(const Config& config) { return config.directory() / "development-publisher.json"; }

SigningIdentity load_publishing_identity(const Config& config) {
  if (!config.publishing.configured()) {
    fail_usage("no publishing identity is configured; set signing_key, namespace and official_source in the "
               "[publishing] section of {}",
               config.path.string());
  }
  return SigningIdentity{package::SigningKey::load(*config.publishing.signing_key, prompt_key_passphrase),
                         *config.publishing.namespace_name, *config.publishing.official_source, false,
                         *config.publishing.signing_key};
}

SigningIdentity load_signing_identity(const Config& config) {
  if (config.publishing.configured()) return load_publishing_identity(config);
  const fs::path key_path = development_key_path(config);
  const fs::path profile_path = development_profile_path(config);
  std::error_code ec;
  fs::create_directories(config.directory(), ec);
  if (!fs::exists(key_path, ec)) {
    package::SigningKey::generate().save(key_path, "");
  }
  package::SigningKey key = package::SigningKey::load(key_path, prompt_key_passphrase);
  // The public profile is rewritten when absent or when it no longer matches the key.
  bool profile_matches = false;
  if (fs::exists(profile_path, ec)) {
    try {
      profile_matches = package::load_publisher_profile(profile_path).find(key.fingerprint()) != nullptr;
    } catch (const Error&) {
      profile_matches = false;
    }
  }
  if (!profile_matches) {
    package::PublisherProfile profile;
    profile.namespace_name = package::kDevelopmentNamespace;
    profile.official_source = package::kDevelopmentSource;
    profile.keys.push_back(key.public_key());
    package::write_file_atomic(profile_path, package::render_publisher_profile(profile), 0644);
  }
  return SigningIdentity{std::move(key), package::kDevelopmentNamespace, package::kDevelopmentSource, true, key_path};
}

}  // namespace flare::ignition
