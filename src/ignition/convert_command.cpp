// `ignition convert PACKAGE [--form packed|directory] --output PATH`: re-lays out a package
// between its canonical forms, preserving the signed manifest, signature and payload bytes
// exactly; needs no key and no GPU. Companions are hard-linked on the same filesystem.
#include "ignition/convert_command.h"

#include <cstdio>

#include "common/cli.h"
#include "common/error.h"
#include "common/sizes.h"
#include "package/package.h"

namespace flare::ignition {

int run_convert(const ConvertOptions& options) {
  package::PackageForm form;
  if (options.form == "packed") {
    form = package::PackageForm::packed;
  } else if (options.form == "directory") {
    form = package::PackageForm::directory;
  } else {
    fail_usage("--form must be packed or directory, not '{}'", options.form);
  }
  auto source = package::Package::open(options.package);
  source->check_layout();
  source->verify_payloads(nullptr);  // never propagate damaged bytes into a new copy
  package::convert_package(*source, options.output, form);
  std::printf("%s\n", options.output.string().c_str());
  return 0;
}

int run_keygen(const std::filesystem::path& key_path, const std::string& namespace_name,
               const std::string& official_source, const std::filesystem::path& profile_path,
               const std::string& passphrase) {
  auto key = package::SigningKey::generate();
  key.save(key_path, passphrase);
  package::PublisherProfile profile{namespace_name, official_source, {key.public_key()}};
  package::write_file_atomic(profile_path, package::render_publisher_profile(profile));
  std::printf("key %s\nfingerprint %s\nprofile %s\n", key_path.string().c_str(), key.fingerprint().c_str(),
              profile_path.string().c_str());
  return 0;
}

void add_convert_command(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  auto* cmd = add_command(app, "convert", "Convert a package between the packed and directory forms.",
                          [options] { return run_convert(*options); });
  cmd->add_option("PACKAGE", options->package, "Package file or directory")->required();
  cmd->add_option("--form", options->form, "packed or directory (default directory)");
  cmd->add_option("--output", options->output, "Destination (must not exist)")->required();
}

}  // namespace flare::ignition
