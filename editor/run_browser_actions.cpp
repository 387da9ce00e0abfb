// The run browser's actions: Tag, Note, Delete, Fork and Reproduce ask what they need in a
// dialog that does not block the window (open(), not exec()), then run `mlstudio runs ...`
// as a child process, one at a time, its output in the log; the table is read again after.
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTabWidget>

#include "editor/run_browser.h"
#include "editor/run_table_model.h"

namespace mls::editor {

void RunBrowser::runCli(QStringList args) {
  args.prepend("runs");
  args << "--db" << QString::fromStdString(db_);
  queue_.push_back(args);
  if (!process_) startNext();
}

void RunBrowser::startNext() {
  if (queue_.empty()) {
    model_->refresh();
    return;
  }
  const QStringList args = queue_.front();
  queue_.pop_front();
  log_->appendPlainText("$ mlstudio " + args.join(' '));
  log_->moveCursor(QTextCursor::End);
  log_->insertPlainText("\n");  // its output starts on a line of its own
  lower_->setCurrentWidget(log_);
  auto* p = new QProcess(this);
  process_ = p;
  p->setProcessChannelMode(QProcess::MergedChannels);
  connect(p, &QProcess::readyReadStandardOutput, this, [this, p] {
    log_->moveCursor(QTextCursor::End);
    log_->insertPlainText(QString::fromUtf8(p->readAllStandardOutput()));
    log_->moveCursor(QTextCursor::End);
  });
  connect(p, &QProcess::finished, this, [this, p](int code, QProcess::ExitStatus how) {
    log_->moveCursor(QTextCursor::End);
    log_->insertPlainText(QString::fromUtf8(p->readAllStandardOutput()));
    log_->appendPlainText(how == QProcess::CrashExit ? "(crashed)\n"
                                                     : QString("(exit code %1)\n").arg(code));
    p->deleteLater();
    process_ = nullptr;
    Q_EMIT actionFinished(how == QProcess::CrashExit ? -1 : code);
    startNext();
  });
  connect(p, &QProcess::errorOccurred, this, [this, p](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    log_->appendPlainText("could not start " + exe_ + ": " + p->errorString() + "\n");
    p->deleteLater();
    process_ = nullptr;
    Q_EMIT actionFinished(-1);
    startNext();
  });
  p->start(exe_, args);
}

void RunBrowser::tagRuns() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.empty()) return;
  auto* d = new QInputDialog(this);
  d->setObjectName("runs.tag.dialog");
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->setWindowTitle("Tag runs");
  d->setLabelText(
      QString("Tags for %1 run(s): KEY or KEY=VALUE, separated by spaces").arg(ids.size()));
  connect(d, &QInputDialog::textValueSelected, this, [this, ids](const QString& text) {
    const QStringList tags = text.split(' ', Qt::SkipEmptyParts);
    if (tags.isEmpty()) return;
    for (int64_t id : ids) runCli(QStringList{"tag", QString::number(id)} + tags);
  });
  d->open();
}

void RunBrowser::noteRun() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.size() != 1) return;
  auto* d = new QInputDialog(this);
  d->setObjectName("runs.note.dialog");
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->setWindowTitle("Note");
  d->setLabelText(QString("Run %1's note:").arg(ids[0]));
  connect(d, &QInputDialog::textValueSelected, this, [this, id = ids[0]](const QString& text) {
    runCli({"note", QString::number(id), text});
  });
  d->open();
}

void RunBrowser::deleteRuns() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.empty()) return;
  QStringList names;
  for (int64_t id : ids) names << QString::number(id);
  auto* box = new QMessageBox(QMessageBox::Question, "Delete runs",
                              QString("Delete run(s) %1 with their metrics, checkpoints and "
                                      "artifacts? Files another run lists are kept.")
                                  .arg(names.join(", ")),
                              QMessageBox::Yes | QMessageBox::Cancel, this);
  box->setObjectName("runs.delete.confirm");
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setDefaultButton(QMessageBox::Cancel);
  connect(box, &QMessageBox::finished, this, [this, names](int result) {
    if (result == QMessageBox::Yes) runCli(QStringList{"delete"} + names);
  });
  box->open();
}

void RunBrowser::forkRun() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.size() != 1) return;
  auto* d = new QDialog(this);
  d->setObjectName("runs.fork.dialog");
  d->setAttribute(Qt::WA_DeleteOnClose);
  d->setWindowTitle(QString("Fork run %1").arg(ids[0]));
  auto* form = new QFormLayout(d);
  auto* step = new QLineEdit;
  step->setObjectName("runs.fork.step");
  step->setPlaceholderText("empty: its last checkpoint");
  auto* sets = new QLineEdit;
  sets->setObjectName("runs.fork.set");
  sets->setPlaceholderText("training.optimizer.lr=0.01 training.epochs=4");
  auto* epochs = new QLineEdit;
  epochs->setObjectName("runs.fork.epochs");
  epochs->setPlaceholderText("empty: the run's own");
  form->addRow("continue from step", step);
  form->addRow("with settings", sets);
  form->addRow("epochs in all", epochs);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText("Fork");
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, d, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, d, &QDialog::reject);
  connect(d, &QDialog::accepted, this, [this, id = ids[0], step, sets, epochs] {
    QStringList args{"fork", QString::number(id)};
    const QString s = step->text().trimmed();
    if (!s.isEmpty()) {
      bool ok = false;
      const qlonglong n = s.toLongLong(&ok);
      if (!ok || n < 0)
        return showMessage("fork: the step must be a whole number of steps, not '" + s + "'", true);
      args << "--step" << QString::number(n);
    }
    if (const QString e = epochs->text().trimmed(); !e.isEmpty()) {
      bool ok = false;
      const qlonglong n = e.toLongLong(&ok);
      if (!ok || n < 1)
        return showMessage("fork: epochs must be a whole number above 0, not '" + e + "'", true);
      args << "--epochs" << QString::number(n);
    }
    for (const QString& kv : sets->text().split(' ', Qt::SkipEmptyParts)) {
      if (!kv.contains('='))
        return showMessage("fork: a setting is KEY=VALUE, not '" + kv + "'", true);
      args << "--set" << kv;
    }
    runCli(args);
  });
  d->open();
}

void RunBrowser::reproduceRun() {
  const std::vector<int64_t> ids = selectedRuns();
  if (ids.size() == 1) runCli({"reproduce", QString::number(ids[0])});
}

}  // namespace mls::editor
