#include "editor/debug_menu.h"

#include <QAction>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QMenu>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

#include "editor/inspector.h"

namespace mls::editor {

Breakpoints DebugSettings::breakpoints() const {
  Breakpoints b;
  b.nan = nan;
  if (spike) b.spike = spike_factor;
  if (dead_relu) b.dead_relu = dead_share;
  if (grad_norm) b.grad_norm_max = grad_norm_max;
  return b;
}

HealthConfig DebugSettings::healthConfig() const {
  HealthConfig h;
  h.every = health ? health_every : 0;
  return h;
}

QString DebugSettings::breakText() const {
  return QString::fromStdString(breakpoints_text(breakpoints()));
}

DebugSettings DebugSettings::load() {
  QSettings q;
  DebugSettings s;
  s.nan = q.value("debug/nan", s.nan).toBool();
  s.spike = q.value("debug/spike", s.spike).toBool();
  s.spike_factor = q.value("debug/spike_factor", s.spike_factor).toDouble();
  s.dead_relu = q.value("debug/dead_relu", s.dead_relu).toBool();
  s.dead_share = q.value("debug/dead_share", s.dead_share).toDouble();
  s.grad_norm = q.value("debug/grad_norm", s.grad_norm).toBool();
  s.grad_norm_max = q.value("debug/grad_norm_max", s.grad_norm_max).toDouble();
  s.health = q.value("debug/health", s.health).toBool();
  s.health_every = q.value("debug/health_every", qlonglong(s.health_every)).toLongLong();
  // A settings file edited by hand: out-of-range values fall back to the defaults.
  const DebugSettings d;
  if (!(s.spike_factor > 1)) s.spike_factor = d.spike_factor;
  if (!(s.dead_share > 0 && s.dead_share <= 1)) s.dead_share = d.dead_share;
  if (!(s.grad_norm_max > 0)) s.grad_norm_max = d.grad_norm_max;
  if (s.health_every < 1) s.health_every = d.health_every;
  return s;
}

void DebugSettings::save() const {
  QSettings q;
  q.setValue("debug/nan", nan);
  q.setValue("debug/spike", spike);
  q.setValue("debug/spike_factor", spike_factor);
  q.setValue("debug/dead_relu", dead_relu);
  q.setValue("debug/dead_share", dead_share);
  q.setValue("debug/grad_norm", grad_norm);
  q.setValue("debug/grad_norm_max", grad_norm_max);
  q.setValue("debug/health", health);
  q.setValue("debug/health_every", qlonglong(health_every));
}

DebugThresholdsDialog::DebugThresholdsDialog(const DebugSettings& s, QWidget* parent)
    : QDialog(parent),
      spike_(new RealSpinBox),
      dead_(new QDoubleSpinBox),
      grad_(new RealSpinBox),
      every_(new QSpinBox) {
  setWindowTitle("Debugger thresholds");
  setObjectName("debug.thresholds");
  spike_->setObjectName("debug.spike_factor");
  spike_->setMinimum(1.01);
  spike_->setValue(s.spike_factor);
  dead_->setObjectName("debug.dead_share");
  dead_->setRange(0.01, 1.0);
  dead_->setDecimals(2);
  dead_->setSingleStep(0.05);
  dead_->setValue(s.dead_share);
  grad_->setObjectName("debug.grad_norm_max");
  grad_->setMinimum(1e-12);
  grad_->setValue(s.grad_norm_max);
  every_->setObjectName("debug.health_every");
  every_->setRange(1, 1000000);
  every_->setValue(static_cast<int>(s.health_every));
  auto* form = new QFormLayout;
  form->addRow("Loss spike: more than this × the running median", spike_);
  form->addRow("Dead ReLUs: share of a layer's units never active", dead_);
  form->addRow("Gradient norm: a parameter's norm above", grad_);
  form->addRow("Health instruments: every N steps", every_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* col = new QVBoxLayout(this);
  auto* note = new QLabel(
      "Kept with this editor's settings, not in the project. Headless: "
      "<code>mlstudio --run P.mls --break nan,spike:10</code>");
  note->setWordWrap(true);
  col->addLayout(form);
  col->addWidget(note);
  col->addWidget(buttons);
}

DebugSettings DebugThresholdsDialog::applied(DebugSettings s) const {
  s.spike_factor = spike_->value();
  s.dead_share = dead_->value();
  s.grad_norm_max = grad_->value();
  s.health_every = every_->value();
  return s;
}

DebugMenu::DebugMenu(QWidget* window) : QObject(window), window_(window) {
  settings_ = DebugSettings::load();
}

void DebugMenu::populate(QMenu* menu) {
  auto checkable = [&](const char* name) {
    QAction* a = menu->addAction(QString());
    a->setObjectName(name);
    a->setCheckable(true);
    connect(a, &QAction::toggled, this, [this] {
      if (syncing_) return;
      fromActions();
    });
    return a;
  };
  nan_ = checkable("debug.break_nan");
  nan_->setToolTip(
      "Pause the run at the first step whose loss, gradients or update hold a NaN "
      "or an infinity, and show the first node at fault");
  spike_ = checkable("debug.break_spike");
  dead_ = checkable("debug.break_dead_relu");
  grad_ = checkable("debug.break_grad_norm");
  menu->addSeparator();
  health_ = checkable("debug.health");
  menu->addSeparator();
  thresholds_ = menu->addAction("&Thresholds…", this, &DebugMenu::openThresholds);
  thresholds_->setObjectName("debug.thresholds_action");
  menu->setToolTipsVisible(true);
  sync();
}

void DebugMenu::sync() {
  syncing_ = true;
  const DebugSettings& s = settings_;
  nan_->setText("Break on &NaN/Inf");
  nan_->setIconText("Break on NaN");
  nan_->setChecked(s.nan);
  spike_->setText(QString("Break on loss &spike (%1× the median)").arg(s.spike_factor, 0, 'g', 4));
  spike_->setChecked(s.spike);
  dead_->setText(
      QString("Break on &dead ReLUs (%1% of a layer)").arg(100 * s.dead_share, 0, 'g', 3));
  dead_->setChecked(s.dead_relu);
  grad_->setText(QString("Break on &gradient norm (above %1)").arg(s.grad_norm_max, 0, 'g', 4));
  grad_->setChecked(s.grad_norm);
  health_->setText(QString("&Health instruments (every %1 steps)").arg(s.health_every));
  health_->setChecked(s.health);
  syncing_ = false;
}

void DebugMenu::fromActions() {
  settings_.nan = nan_->isChecked();
  settings_.spike = spike_->isChecked();
  settings_.dead_relu = dead_->isChecked();
  settings_.grad_norm = grad_->isChecked();
  settings_.health = health_->isChecked();
  settings_.save();
  Q_EMIT changed(settings_);
}

void DebugMenu::openThresholds() {
  if (dialog_) {
    dialog_->raise();
    dialog_->activateWindow();
    return;
  }
  // Not modal (open(), not exec()): the canvas stays usable, and tests drive it with keys.
  dialog_ = new DebugThresholdsDialog(settings_, window_);
  dialog_->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog_, &QDialog::accepted, this, [this] {
    settings_ = dialog_->applied(settings_);
    settings_.save();
    sync();
    Q_EMIT changed(settings_);
  });
  connect(dialog_, &QObject::destroyed, this, [this] { dialog_ = nullptr; });
  dialog_->open();
}

}  // namespace mls::editor
