// The editor's entry point for app/: `mlstudio` with no command, or with a .mls path.
//
//   return mls::editor::run_gui(argc, argv, "resources/examples/fashion-mnist-mlp.mls");
#pragma once

#include <string>

namespace mls::editor {

// Opens the main window (with `path` when not empty) and runs the event loop; returns
// the exit code. Needs a display (or QT_QPA_PLATFORM=offscreen).
int run_gui(int argc, char** argv, const std::string& path);

}  // namespace mls::editor
