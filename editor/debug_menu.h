// The Debug menu: the training debugger's breakpoints and health instruments, armed for the
// editor's next Train (engine/train/breakpoints.h, health.h). The choices are the person's,
// not the project's: they are kept in the window's settings (QSettings "debug/..."), never in
// the document, so a saved project trains the same with `mlstudio --run`.
//
//   auto* dm = new DebugMenu(window);
//   dm->populate(menuBar()->addMenu("&Debug"));   // the checkable actions, Thresholds...
//   TrainConfig c;  dm->settings().apply(c);      // what Train arms
//   dm->nanAction();                              // also on the Run toolbar
#pragma once

#include <QDialog>
#include <QObject>
#include <QString>
#include <cstdint>

#include "engine/train/breakpoints.h"
#include "engine/train/health.h"

class QAction;
class QDoubleSpinBox;
class QMenu;
class QSpinBox;

namespace mls::editor {

struct DebugSettings {
  bool nan = false;
  bool spike = false;
  double spike_factor = 10;  // × the running median of the loss
  bool dead_relu = false;
  double dead_share = 0.9;  // of a ReLU layer's units never active over the window
  bool grad_norm = false;
  double grad_norm_max = 1e3;  // a parameter's gradient norm
  bool health = false;
  int64_t health_every = 10;  // steps

  Breakpoints breakpoints() const;
  HealthConfig healthConfig() const;
  // The armed breakpoints as `--break` takes them ("" none): "nan,spike:10".
  QString breakText() const;
  // From and to QSettings ("debug/nan", "debug/spike_factor", ...).
  static DebugSettings load();
  void save() const;
};

// The thresholds behind the checkable actions, in one small dialog (Debug > Thresholds...).
class DebugThresholdsDialog : public QDialog {
  Q_OBJECT
 public:
  DebugThresholdsDialog(const DebugSettings& s, QWidget* parent = nullptr);
  // The settings with the dialog's values (the armed flags untouched).
  DebugSettings applied(DebugSettings s) const;

 private:
  QDoubleSpinBox *spike_, *dead_, *grad_;
  QSpinBox* every_;
};

class DebugMenu : public QObject {
  Q_OBJECT
 public:
  explicit DebugMenu(QWidget* window);
  // Adds the actions to `menu` (the window's Debug menu).
  void populate(QMenu* menu);
  const DebugSettings& settings() const { return settings_; }
  QAction* nanAction() const { return nan_; }
  QAction* healthAction() const { return health_; }
  // The open thresholds dialog (null: none), for tests and the screenshots.
  DebugThresholdsDialog* thresholdsDialog() const { return dialog_; }

 Q_SIGNALS:
  void changed(const mls::editor::DebugSettings& s);

 private:
  void sync();  // the actions' checks and texts from settings_
  void fromActions();
  void openThresholds();

  QWidget* window_;
  DebugSettings settings_;
  QAction *nan_ = nullptr, *spike_ = nullptr, *dead_ = nullptr, *grad_ = nullptr,
          *health_ = nullptr, *thresholds_ = nullptr;
  DebugThresholdsDialog* dialog_ = nullptr;
  bool syncing_ = false;
};

}  // namespace mls::editor
