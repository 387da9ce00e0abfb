// The PNG form of a notebook's figures (`mlstudio notebook run --figures DIR --png`): each
// DIR/ID-N.svg rasterised with QSvgRenderer into DIR/ID-N.png at the SVG's own size, on white.
//
//   auto n = rasterise_figures("figs");   // figs/grad-1.svg -> figs/grad-1.png, ...
//   if (!n) return fail(n.error().message);
#pragma once

#include <cstddef>
#include <string>

#include "engine/core/result.h"

namespace mls::app {

// Every *.svg in `dir` whose .png is missing or older. Text needs a QGuiApplication: one is
// made when none exists (QT_QPA_PLATFORM=offscreen unless set). Fails naming the file when
// an SVG does not parse or a PNG cannot be written, or in a build without Qt.
Result<size_t> rasterise_figures(const std::string& dir);

}  // namespace mls::app
