// Input files must be regular files: opening a FIFO blocks until a writer appears, and a device
// such as /dev/zero never ends (a batch file read from it ran 51 s before failing).
#pragma once

#include <string>

namespace conv {

/// Throws conv::Error("<what> "<path>": not a regular file (...)") when `path` exists (after
/// symbolic links) and is not a regular file, and ("...: path: contains a NUL byte ...") when it
/// has a NUL byte; a missing path is left to the caller's open().
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace conv
