// Where ignition gets a Hugging Face checkpoint (spec cli-design section 8): a complete snapshot
// already in the hub cache at an exact commit costs nothing; otherwise, online, the revision is
// resolved on the Hub and what the snapshot lacks is downloaded (src/hub/) under a `Download
// checkpoint` stage; --offline resolves from the hub cache alone and names what is missing. When
// the Hub cannot be reached, a complete cached snapshot of the revision is used with a warning.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/config.h"
#include "common/terminal.h"

namespace flare::ignition {

// How model resolution may reach the Hub. The default never does (`ignition bench`, tests).
struct HubOptions {
  bool allow_download = false;
  bool offline = false;                                // --offline
  std::optional<std::filesystem::path> token_file;     // --token-file, else [hub] token_file
  TerminalInfo terminal;                               // progress on stderr
};

// The snapshot directory of repository@revision, complete for preparation; `commit` receives
// its commit. Throws flare::Error: fetch (exit 3) when it cannot be had, capacity (exit 4) when
// the disk lacks room for it.
std::filesystem::path obtain_hub_checkpoint(const std::string& repository, const std::string& revision,
                                            const Config& config, const HubOptions& options, std::string* commit);

}  // namespace flare::ignition
