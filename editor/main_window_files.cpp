// The main window's files: templates, open (in part, when broken; ONNX models through an
// import), save, recent files, the unsaved-changes prompt, the autosave with its recovery
// after a crash, and the project's Lua files in tabs beside the canvas.
#include <QAction>
#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QMessageBox>
#include <QSettings>
#include <QStandardPaths>
#include <QTabWidget>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "editor/main_window.h"

namespace mls::editor {

namespace {

QString examplePath(const QString& file) {
  return QString(MLS_RESOURCE_DIR) + "/examples/" + file;
}

}  // namespace

Result<void> MainWindow::openFile(const QString& path) {
  if (QFileInfo(path).suffix().compare("lua", Qt::CaseInsensitive) == 0) {
    auto s = openScript(path);
    if (!s) return s.error();
    return {};
  }
  if (QFileInfo(path).suffix().compare("onnx", Qt::CaseInsensitive) == 0) {
    // A model from ONNX becomes a project: asked where (interactive), else beside the model.
    QString project = QFileInfo(path).dir().filePath(QFileInfo(path).completeBaseName() + ".mls");
    if (options_.interactive) {
      project = QFileDialog::getSaveFileName(this, "Save the imported model as a project", project,
                                             "mlstudio projects (*.mls)");
      if (project.isEmpty()) return make_error("import of " + path.toStdString() + " cancelled");
      return importOnnx(path, project, /*replace=*/true);  // the dialog asked before replacing
    }
    return importOnnx(path, project);
  }
  auto r = model_.load(path.toStdString());
  if (!r) {
    showStatus(QString::fromStdString(r.error().message), true);
    if (options_.interactive)
      QMessageBox::warning(this, "Cannot open " + QFileInfo(path).fileName(),
                           QString::fromStdString(r.error().message));
    return r;
  }
  if (!model_.salvaged().empty()) {
    // Opened in part: say what was left out, in the run log and (interactive) a dialog.
    QString list;
    for (const std::string& w : model_.salvaged()) list += "• " + QString::fromStdString(w) + "\n";
    run_log_->appendPlainText("opened " + path + " in part; left out or changed:\n" +
                              list.trimmed());
    showStatus(
        QString("opened %1 in part: %2 problem(s), see the run log; saving asks for a new name")
            .arg(QFileInfo(path).fileName())
            .arg(model_.salvaged().size()),
        true);
    if (options_.interactive)
      QMessageBox::warning(this, "Opened " + QFileInfo(path).fileName() + " in part",
                           "This file is broken or was written by a newer mlstudio. What could be "
                           "read is open, as an "
                           "untitled copy; the original is untouched.\n\n" +
                               list);
    view_->fitAll();
    return {};
  }
  addRecent(path);
  QString note = "opened " + path;
  if (!model_.doc().warnings.empty())
    note += " (" + QString::fromStdString(model_.doc().warnings[0]) + ")";
  if (!model_.analysis().problems.empty())
    note += " — draft: " + QString::fromStdString(model_.analysis().problems[0]);
  showStatus(note);
  view_->fitAll();
  return {};
}

Result<void> MainWindow::saveTo(const QString& path) {
  auto r = model_.saveAs(path.toStdString());
  if (!r) {
    showStatus(QString::fromStdString(r.error().message), true);
    if (options_.interactive)
      QMessageBox::critical(this, "Cannot save", QString::fromStdString(r.error().message));
    return r;
  }
  QFile::remove(autosavePath());
  addRecent(path);
  updateTitle();
  showStatus("saved " + path);
  return {};
}

void MainWindow::newFromTemplate(const QString& example_file) {
  if (example_file.isEmpty()) {
    nodes::Document d;
    d.name = "untitled";
    d.dataset.source = "fashion-mnist";
    model_.reset(std::move(d));
  } else {
    auto doc =
        nodes::load_document(examplePath(example_file).toStdString(), nodes::GraphCheck::Draft);
    if (!doc) {
      showStatus(QString::fromStdString(doc.error().message), true);
      return;
    }
    // A template is a new, unsaved project; its data paths are absolute or packaged.
    model_.reset(std::move(*doc));
  }
  showStatus(example_file.isEmpty() ? "new project: drag nodes from the palette"
                                    : "new project from " + example_file);
  view_->fitAll();
}

bool MainWindow::maybeSave() {
  if (!model_.isModified() || !options_.interactive) return true;
  const auto answer =
      QMessageBox::question(this, "Unsaved changes",
                            "Save the changes to " +
                                (model_.path().empty() ? QString("the untitled project")
                                                       : QString::fromStdString(model_.path())) +
                                "?",
                            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Cancel) return false;
  if (answer == QMessageBox::Discard) return true;
  QString p = QString::fromStdString(model_.path());
  if (p.isEmpty())
    p = QFileDialog::getSaveFileName(this, "Save project", "untitled.mls",
                                     "mlstudio projects (*.mls)");
  return !p.isEmpty() && saveTo(p).ok();
}

QString MainWindow::autosavePath() const {
  QString dir =
      options_.autosave_dir.empty()
          ? QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/autosave"
          : QString::fromStdString(options_.autosave_dir);
  // One autosave per window: the process id keeps two editors apart.
  return dir + QString("/autosave-%1.mls").arg(QCoreApplication::applicationPid());
}

void MainWindow::autosave() {
  if (!model_.isModified()) return;
  const QString p = autosavePath();
  QDir().mkpath(QFileInfo(p).path());
  if (auto r = nodes::save_document(model_.doc(), p.toStdString()); !r) {
    showStatus("autosave failed: " + QString::fromStdString(r.error().message), true);
    return;
  }
  // Where it came from, so a recovery can offer to save it back there.
  QSettings().setValue("autosave/" + QFileInfo(p).fileName(),
                       QString::fromStdString(model_.path()));
}

QStringList MainWindow::leftoverAutosaves() const {
  QStringList out;
  const QDir dir = QFileInfo(autosavePath()).dir();
  for (const QFileInfo& f : dir.entryInfoList({"autosave-*.mls"}, QDir::Files, QDir::Time)) {
    if (f.absoluteFilePath() == QFileInfo(autosavePath()).absoluteFilePath()) continue;
    // Another editor that is still open keeps its own autosave: not a crash.
    bool ok = false;
    const qint64 pid = f.completeBaseName().mid(int(std::strlen("autosave-"))).toLongLong(&ok);
    if (ok && pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) continue;
    out << f.absoluteFilePath();
  }
  return out;
}

Result<void> MainWindow::recoverAutosave(const QString& file) {
  const QString key = "autosave/" + QFileInfo(file).fileName();
  const QString origin = QSettings().value(key).toString();
  auto doc = nodes::load_document(file.toStdString(), nodes::GraphCheck::Draft);
  if (!doc) {
    // Kept under another name, so nothing is lost and it is not offered again.
    QFile::rename(file, file + ".unreadable");
    QSettings().remove(key);
    const std::string msg = "cannot recover " + file.toStdString() + ": " + doc.error().message +
                            " (kept as " + file.toStdString() + ".unreadable)";
    showStatus(QString::fromStdString(msg), true);
    return make_error(msg);
  }
  model_.reset(std::move(*doc), origin.toStdString(), /*saved=*/false);
  // The recovered copy becomes this editor's autosave rather than going away: a crash before
  // the next autosave would otherwise lose the work a second time. The next autosave
  // replaces it, a save removes it. Where it cannot be moved, it stays where it is.
  const QString mine = autosavePath();
  QDir().mkpath(QFileInfo(mine).path());
  QFile::remove(mine);
  if (QFile::rename(file, mine)) {
    QSettings().remove(key);
    QSettings().setValue("autosave/" + QFileInfo(mine).fileName(), origin);
  }
  showStatus("recovered unsaved work" + (origin.isEmpty() ? QString() : " of " + origin) +
             " (save to keep it)");
  view_->fitAll();
  return {};
}

void MainWindow::discardAutosave(const QString& file) {
  QFile::remove(file);
  QSettings().remove("autosave/" + QFileInfo(file).fileName());
}

void MainWindow::offerRecovery() {
  const QStringList left = leftoverAutosaves();
  if (left.isEmpty()) return;
  const QString f = left.front();  // the newest; older ones are older sessions' leftovers
  const QString origin = QSettings().value("autosave/" + QFileInfo(f).fileName()).toString();
  const auto answer = QMessageBox::question(
      this, "Recover unsaved work",
      "mlstudio did not close cleanly. Recover the unsaved changes to " +
          (origin.isEmpty() ? QString("an untitled project") : origin) + " (autosaved " +
          QFileInfo(f).lastModified().toString("yyyy-MM-dd hh:mm") + ")?",
      QMessageBox::Yes | QMessageBox::No);
  if (answer == QMessageBox::Yes) {
    if (auto r = recoverAutosave(f); !r)
      QMessageBox::warning(this, "Cannot recover", QString::fromStdString(r.error().message));
  } else {
    discardAutosave(f);
  }
}

void MainWindow::addRecent(const QString& path) {
  QSettings s;
  QStringList list = s.value("files/recent").toStringList();
  const QString abs = QFileInfo(path).absoluteFilePath();
  list.removeAll(abs);
  list.prepend(abs);
  while (list.size() > 10) list.removeLast();
  s.setValue("files/recent", list);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recent_menu_->clear();
  const QStringList list = QSettings().value("files/recent").toStringList();
  for (const QString& p : list)
    recent_menu_->addAction(p, this, [this, p] {
      if (maybeSave()) (void)openFile(p);
    });
  recent_menu_->setEnabled(!list.isEmpty());
}

// [SECTION] Lua files

Result<ScriptEditor*> MainWindow::openScript(const QString& path) {
  const QString abs = QFileInfo(path).absoluteFilePath();
  for (ScriptEditor* s : scripts())
    if (s->path() == abs) {
      tabs_->setCurrentWidget(s);
      s->editor()->setFocus();
      return s;
    }
  auto made = ScriptEditor::open(abs, {.db_path = options_.db, .model = &model_});
  if (!made) {
    showStatus(QString::fromStdString(made.error().message), true);
    if (options_.interactive)
      QMessageBox::warning(this, "Cannot open " + QFileInfo(path).fileName(),
                           QString::fromStdString(made.error().message));
    return made.error();
  }
  ScriptEditor* s = made->release();
  const int i = tabs_->addTab(s, s->fileName());
  tabs_->setTabToolTip(i, abs);
  connect(s, &ScriptEditor::modifiedChanged, this, [this, s](bool modified) {
    const int at = tabs_->indexOf(s);
    if (at >= 0) tabs_->setTabText(at, s->fileName() + (modified ? " •" : ""));
  });
  connect(s, &ScriptEditor::message, this, &MainWindow::showStatus);
  // mls.train in the script: the Instruments tab follows it, as the console's runs.
  connect(s, &ScriptEditor::liveRunStarted, this, [this](std::shared_ptr<Telemetry> tm) {
    telemetry_ = tm;
    instruments_->setLive(tm);
  });
  connect(s, &ScriptEditor::runFinished, this, &MainWindow::loadRunCurves);
  // Trust is the file's for this session: a tab closed and opened again keeps it.
  if (trusted_scripts_.contains(abs)) s->trustAction()->setChecked(true);
  connect(s->trustAction(), &QAction::toggled, this, [this, abs](bool on) {
    if (on)
      trusted_scripts_.insert(abs);
    else
      trusted_scripts_.remove(abs);
  });
  tabs_->setCurrentWidget(s);
  s->editor()->setFocus();
  showStatus("opened " + abs + " (F5 runs it" +
             (s->trusted() ? QString(")") : ", sandboxed under " + s->sandboxRoot() + ")"));
  return s;
}

QList<ScriptEditor*> MainWindow::scripts() const {
  QList<ScriptEditor*> out;
  for (int i = 0; i < tabs_->count(); ++i)
    if (auto* s = qobject_cast<ScriptEditor*>(tabs_->widget(i))) out << s;
  return out;
}

bool MainWindow::closeScript(ScriptEditor* script) {
  const int i = tabs_->indexOf(script);
  if (i < 0 || !script->maybeClose()) return false;
  tabs_->removeTab(i);
  delete script;  // waits for a stopped script's worker to end
  return true;
}

QStringList MainWindow::projectScripts() const {
  if (model_.path().empty()) return {};
  const QDir dir = QFileInfo(QString::fromStdString(model_.path())).absoluteDir();
  QStringList out;
  // The project's folder and its subfolders, hidden ones left out; a bounded walk (a project
  // kept in a home folder must not freeze the menu).
  QDirIterator it(dir.absolutePath(), {"*.lua"}, QDir::Files | QDir::Readable,
                  QDirIterator::Subdirectories);
  for (int seen = 0; it.hasNext() && seen < 2000; ++seen) {
    const QString f = it.next();
    const QStringList parts = dir.relativeFilePath(f).split('/');
    if (std::none_of(parts.begin(), parts.end(),
                     [](const QString& p) { return p.startsWith('.'); }))
      out << f;
    if (out.size() >= 200) break;
  }
  out.sort();
  return out;
}

void MainWindow::rebuildScriptsMenu() {
  scripts_menu_->clear();
  if (model_.path().empty()) {
    scripts_menu_->addAction("(save the project to list the .lua files in its folder)")
        ->setEnabled(false);
    return;
  }
  const QStringList files = projectScripts();
  const QDir dir = QFileInfo(QString::fromStdString(model_.path())).absoluteDir();
  if (files.isEmpty())
    scripts_menu_->addAction("(no .lua files in " + dir.absolutePath() + ")")->setEnabled(false);
  for (const QString& f : files)
    scripts_menu_->addAction(dir.relativeFilePath(f), this, [this, f] { (void)openScript(f); });
}

}  // namespace mls::editor
