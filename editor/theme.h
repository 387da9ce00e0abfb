// The editor's look: the dark and light palettes and the icons. Icons are SVG files under
// resources/icons (compiled into the binary), drawn in the palette's text colour at any
// size and device pixel ratio, so they stay crisp on a high-DPI screen and follow the theme.
//
//   apply_theme(/*dark=*/true);                  // Fusion style + palette, app-wide
//   action->setIcon(icon("train"));              // ":/icons/train.svg" in the text colour
//   QIcon head = icon("layers", Qt::white);      // a given colour (a node's header)
//   QIcon c = category_icon("Activations");      // a node category's icon
#pragma once

#include <QColor>
#include <QIcon>
#include <QPalette>
#include <QString>
#include <string>

namespace mls::editor {

QPalette dark_palette();
void apply_theme(bool dark);

// `name` is a file under resources/icons without ".svg"; an unknown name gives an empty
// icon (and, in debug terms, nothing breaks: the action shows its text).
QIcon icon(const QString& name, const QColor& color = QColor());
// The icon of a node category ("Data", "Layers", ...), or of the layers when unknown.
QIcon category_icon(const std::string& category, const QColor& color = QColor());
// The application's own (the window and the taskbar).
QIcon app_icon();

}  // namespace mls::editor
