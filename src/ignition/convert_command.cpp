// `ignition convert PACKAGE [--form packed|directory] --output PATH`: re-lays out a package
// between its canonical forms, preserving the signed manifest, signature and payload bytes
// exactly; needs no private key and no GPU. The signature is verified with --publisher-keys or
// the development profile (beside the configuration file, else ~/.config/flare/), and every
// payload is hashed before anything is written. Companions are hard-linked on the same filesystem.
#include "ignition/convert_command.h"

#include <cstdio>

#include "common/cli.h"
#include "common/config.h"
#include "common/error.h"
#include "common/sizes.h"
#include "ignition/signing_identity.h"
#include "package/package.h"
#include "package/trust.h"

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
  package::TrustOptions trust;
  trust.publisher_keys = options.publisher_keys;
  if (trust.publisher_keys.empty()) {
    const std::filesystem::path beside_config = development_profile_path(load_config(options.config));
    std::error_code ec;
    trust.development_profile =
        std::filesystem::exists(beside_config, ec) ? beside_config : package::home_directory_profile();
  }
  package::resolve_signer(*source, trust);
  source->check_layout();
  source->verify_payloads(nullptr);  // never propagate damaged bytes into a new copy
  package::convert_package(*source, options.output, form);
  std::printf("%s\n", options.output.string().c_str());
  return 0;
}

void add_convert_command(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  auto* cmd = add_command(app, "convert", "Convert a package between the packed and directory forms.",
                          [options] { return run_convert(*options); });
  cmd->add_option("PACKAGE", options->package, "Package file or directory")->required();
  cmd->add_option("--form", options->form, "packed or directory (default directory)");
  cmd->add_option("--output", options->output, "Destination (must not exist)")->required();
  cmd->add_option("--publisher-keys", options->publisher_keys, "Publisher profile(s) verifying the signature");
  cmd->add_option("--config", options->config, "Configuration file (locates the development profile)");
}

}  // namespace flare::ignition
