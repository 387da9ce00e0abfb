#include "editor/cell_widget.h"

#include <QAbstractSlider>
#include <QAbstractTextDocumentLayout>
#include <QCheckBox>
#include <QComboBox>
#include <QCompleter>
#include <QCoreApplication>
#include <QFileInfo>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QScrollBar>
#include <QSlider>
#include <QStringListModel>
#include <QSvgRenderer>
#include <QTableWidget>
#include <QTextBlock>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <cmath>

#include "editor/lua_highlighter.h"
#include "scripting/notebook/math_text.h"

namespace mls::editor {

// [SECTION] CodeEdit

namespace {

const QString kOpen = "([{", kClose = ")]}";

QString kind_label(nodes::CellKind k) {
  switch (k) {
    case nodes::CellKind::Lua:
      return "Lua";
    case nodes::CellKind::Markdown:
      return "Markdown";
    case nodes::CellKind::View:
      return "view";
  }
  return {};
}

bool word_char(QChar c) {
  return c.isLetterOrNumber() || c == '_' || c == '.' || c == ':';
}

}  // namespace

CodeEdit::CodeEdit(QWidget* parent)
    : QPlainTextEdit(parent), highlighter_(new LuaHighlighter(document())) {
  QFont mono("monospace");
  mono.setStyleHint(QFont::Monospace);
  setFont(mono);
  setTabChangesFocus(false);
  setLineWrapMode(QPlainTextEdit::NoWrap);
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  connect(this, &QPlainTextEdit::cursorPositionChanged, this, &CodeEdit::updateSelections);
  // As tall as its lines: the notebook scrolls, not the cell.
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  auto fit = [this] {
    if (fit_to_lines_) setFixedHeight(sizeHint().height());
  };
  connect(this, &QPlainTextEdit::blockCountChanged, this, fit);
  fit();
}

void CodeEdit::setFitToLines(bool fit) {
  fit_to_lines_ = fit;
  if (fit) {
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setFixedHeight(sizeHint().height());
    return;
  }
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setMinimumHeight(0);
  setMaximumHeight(QWIDGETSIZE_MAX);
}

QSize CodeEdit::sizeHint() const {
  const int lines = std::max(1, document()->blockCount());
  const int h = lines * fontMetrics().lineSpacing() + 2 * frameWidth() +
                2 * int(document()->documentMargin()) + horizontalScrollBar()->sizeHint().height() +
                4;
  return {QPlainTextEdit::sizeHint().width(), h};
}

void CodeEdit::keyPressEvent(QKeyEvent* e) {
  if ((e->key() == Qt::Key_Return || e->key() == Qt::Key_Enter) &&
      (e->modifiers() & Qt::ShiftModifier)) {
    Q_EMIT runRequested();
    return;
  }
  if (e->key() == Qt::Key_Tab && e->modifiers() == Qt::NoModifier && completions) {
    const QTextCursor c = textCursor();
    const QString line = c.block().text().left(c.positionInBlock());
    if (!line.isEmpty() && word_char(line.back())) {
      complete();
      return;
    }
  }
  QPlainTextEdit::keyPressEvent(e);
}

void CodeEdit::focusOutEvent(QFocusEvent* e) {
  QPlainTextEdit::focusOutEvent(e);
  Q_EMIT focusLost();
}

void CodeEdit::complete() {
  QTextCursor c = textCursor();
  const QString line = c.block().text().left(c.positionInBlock());
  int start = int(line.size());
  while (start > 0 && word_char(line[start - 1])) --start;
  const QString prefix = line.mid(start);
  const auto options = completions(prefix.toStdString());
  if (options.empty()) return;
  // The longest prefix all the options share (one option: itself).
  QString common = QString::fromStdString(options[0]);
  for (const auto& o : options) {
    const QString q = QString::fromStdString(o);
    int k = 0;
    while (k < common.size() && k < q.size() && common[k] == q[k]) ++k;
    common.truncate(k);
  }
  if (common.size() > prefix.size()) {
    c.insertText(common.mid(prefix.size()));
    setTextCursor(c);
    return;
  }
  QStringList names;
  for (const auto& o : options) names << QString::fromStdString(o);
  auto* comp = new QCompleter(names, this);
  comp->setWidget(this);
  comp->setCompletionPrefix(prefix);
  connect(comp, qOverload<const QString&>(&QCompleter::activated), this,
          [this, prefix](const QString& s) {
            QTextCursor cur = textCursor();
            cur.insertText(s.mid(prefix.size()));
            setTextCursor(cur);
          });
  QRect r = cursorRect();
  r.setWidth(240);
  comp->complete(r);
}

void CodeEdit::markErrorLine(int line) {
  error_line_ = line;
  updateSelections();
}

void CodeEdit::updateSelections() {
  QList<QTextEdit::ExtraSelection> sel;
  // Light marks on a dark theme would hide the light text: darker ones there.
  const bool dark = palette().color(QPalette::Base).lightness() < 128;
  if (error_line_ > 0 && error_line_ <= document()->blockCount()) {
    QTextEdit::ExtraSelection s;
    s.format.setBackground(dark ? QColor(110, 32, 32) : QColor(255, 205, 205));
    s.format.setProperty(QTextFormat::FullWidthSelection, true);
    s.cursor = QTextCursor(document()->findBlockByNumber(error_line_ - 1));
    sel << s;
  }
  // Bracket matching: the bracket after or before the cursor and its partner.
  matched_ = {-1, -1};
  const QString text = toPlainText();
  const int pos = textCursor().position();
  int at = -1;
  if (pos < text.size() && (kOpen.contains(text[pos]) || kClose.contains(text[pos])))
    at = pos;
  else if (pos > 0 && (kOpen.contains(text[pos - 1]) || kClose.contains(text[pos - 1])))
    at = pos - 1;
  if (at >= 0) {
    const QChar c = text[at];
    const bool open = kOpen.contains(c);
    const QChar mate = open ? kClose[kOpen.indexOf(c)] : kOpen[kClose.indexOf(c)];
    int depth = 0, j = at;
    const int step = open ? 1 : -1;
    for (; j >= 0 && j < text.size(); j += step) {
      if (text[j] == c)
        ++depth;
      else if (text[j] == mate && --depth == 0)
        break;
    }
    if (j >= 0 && j < text.size()) matched_ = {at, j};
    for (int p : {at, j}) {
      if (p < 0 || p >= text.size()) continue;
      QTextEdit::ExtraSelection s;
      s.format.setBackground(matched_.second >= 0
                                 ? (dark ? QColor(40, 100, 40) : QColor(190, 230, 190))
                                 : (dark ? QColor(130, 40, 40) : QColor(255, 170, 170)));
      s.cursor = QTextCursor(document());
      s.cursor.setPosition(p);
      s.cursor.setPosition(p + 1, QTextCursor::KeepAnchor);
      sel << s;
    }
  }
  setExtraSelections(sel);
}

// [SECTION] FigureWidget

FigureWidget::FigureWidget(const lua::Figure& f, QWidget* parent) : QSvgWidget(parent) {
  load(QByteArray::fromStdString(f.svg));
  const QSize d = renderer()->defaultSize();
  width_ = f.width > 0 ? f.width : std::max(1, d.width());
  height_ = f.height > 0 ? f.height : std::max(1, d.height());
  ratio_ = double(height_) / double(width_);
  // As wide as the cell allows up to the SVG's own width; the height follows.
  QSizePolicy p(QSizePolicy::Maximum, QSizePolicy::Fixed);
  p.setHeightForWidth(true);
  setSizePolicy(p);
  setFixedHeight(height_);
  setToolTip(QString::fromStdString(f.title));
}

int FigureWidget::heightForWidth(int w) const {
  return std::max(1, int(std::lround(std::min(w, width_) * ratio_)));
}

QSize FigureWidget::sizeHint() const {
  return {width_, height_};
}

QSize FigureWidget::minimumSizeHint() const {
  return {std::min(width_, 60), heightForWidth(std::min(width_, 60))};
}

void FigureWidget::resizeEvent(QResizeEvent* e) {
  QSvgWidget::resizeEvent(e);
  const int h = heightForWidth(width());
  if (h != height()) setFixedHeight(h);
}

void FigureWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const double w = std::min(width(), width_);
  renderer()->render(&p, QRectF(0, 0, w, w * ratio_));
}

// [SECTION] CellWidget

CellWidget::CellWidget(const nodes::Cell& cell, QWidget* parent) : QFrame(parent), cell_(cell) {
  setObjectName(QString::fromStdString("cell." + cell.id));
  setFrameShape(QFrame::StyledPanel);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(6, 4, 6, 4);
  lay->setSpacing(3);
  title_ = new QLabel;
  title_->setStyleSheet("color: grey; font-size: 9pt;");
  lay->addWidget(title_);
  problems_ = new QLabel;
  problems_->setObjectName("cell.problems");
  problems_->setWordWrap(true);
  problems_->setStyleSheet("color: #b00020; background: #fff0f0; padding: 2px;");
  problems_->hide();
  lay->addWidget(problems_);
  if (cell.kind == nodes::CellKind::Lua) {
    edit_ = new CodeEdit;
    edit_->setObjectName("cell.code");
    edit_->setPlainText(QString::fromStdString(cell.source));
    lay->addWidget(edit_);
    connect(edit_, &CodeEdit::runRequested, this,
            [this] { Q_EMIT runRequested(QString::fromStdString(cell_.id)); });
    connect(edit_, &QPlainTextEdit::textChanged, this, [this] {
      if (setting_) return;
      cell_.source = edit_->toPlainText().toStdString();
      edit_->markErrorLine(0);
      Q_EMIT sourceEdited(QString::fromStdString(cell_.id), edit_->toPlainText());
    });
    edit_->installEventFilter(this);
    edit_->viewport()->installEventFilter(this);
  } else if (cell.kind == nodes::CellKind::Markdown) {
    rendered_ = new QTextBrowser;
    rendered_->setObjectName("cell.markdown");
    rendered_->setOpenExternalLinks(true);
    rendered_->setFrameShape(QFrame::NoFrame);
    rendered_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    rendered_->viewport()->installEventFilter(this);
    lay->addWidget(rendered_);
    edit_ = new CodeEdit;
    edit_->setObjectName("cell.code");
    edit_->highlighter()->setDocument(nullptr);
    edit_->setPlainText(QString::fromStdString(cell.source));
    lay->addWidget(edit_);
    connect(edit_, &CodeEdit::runRequested, this, [this] { showMarkdown(false); });
    connect(edit_, &CodeEdit::focusLost, this, [this] { showMarkdown(false); });
    connect(edit_, &QPlainTextEdit::textChanged, this, [this] {
      if (setting_) return;
      cell_.source = edit_->toPlainText().toStdString();
      Q_EMIT sourceEdited(QString::fromStdString(cell_.id), edit_->toPlainText());
    });
    showMarkdown(false);
  } else {
    view_ = new QLabel(QString::fromStdString("view: " + cell.view));
    view_->setObjectName("cell.view");
    view_->setMinimumHeight(40);
    lay->addWidget(view_);
  }
  stale_ = new QLabel("stale");
  stale_->setObjectName("cell.stale");
  stale_->setStyleSheet("color: white; background: #9e9e9e; padding: 0 4px; border-radius: 3px;");
  stale_->hide();
  lay->addWidget(stale_, 0, Qt::AlignLeft);
  outputs_ = new QWidget;
  outputs_layout_ = new QVBoxLayout(outputs_);
  outputs_layout_->setContentsMargins(0, 0, 0, 0);
  text_ = new QLabel(outputs_);
  text_->setObjectName("cell.text");
  text_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont mono("monospace");
  mono.setStyleHint(QFont::Monospace);
  text_->setFont(mono);
  text_->setWordWrap(true);
  text_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  text_->hide();
  error_ = new QLabel(outputs_);
  error_->setObjectName("cell.error");
  error_->setWordWrap(true);
  error_->setStyleSheet("color: #b00020;");
  error_->hide();
  lay->addWidget(outputs_);
  setCell(cell);
}

void CellWidget::setCell(const nodes::Cell& cell) {
  cell_ = cell;
  QString t = QString::fromStdString(cell.id) + "  ·  " + kind_label(cell.kind);
  if (cell.on_demand) t += "  ·  run only when asked";
  switch (cell.role) {
    case nodes::CellRole::Free:
      break;
    case nodes::CellRole::Locked:
      t += "  ·  locked";
      break;
    case nodes::CellRole::Answer:
      t += "  ·  your answer";
      break;
    case nodes::CellRole::Check:
      t += "  ·  check (locked)";
      break;
    case nodes::CellRole::HiddenCheck:
      t += "  ·  hidden check (locked; graders only)";
      break;
  }
  title_->setText(t);
  if (edit_ && edit_->toPlainText().toStdString() != cell.source) {
    setting_ = true;
    edit_->setPlainText(QString::fromStdString(cell.source));
    setting_ = false;
  }
  if (rendered_ && !editingMarkdown()) showMarkdown(false);
}

void CellWidget::setLocked(bool locked) {
  locked_ = locked;
  if (edit_) edit_->setReadOnly(locked);
  if (locked && rendered_ && editingMarkdown()) showMarkdown(false);
}

void CellWidget::setViewWidget(QWidget* w) {
  if (!view_ || !w) return;
  w->setObjectName("cell.view");
  layout()->replaceWidget(view_, w);
  view_->deleteLater();
  view_ = w;
}

void CellWidget::setBaseDir(const QString& dir) {
  base_dir_ = dir;
  if (rendered_) {
    rendered_->setSearchPaths({dir});
    if (!editingMarkdown()) showMarkdown(false);
  }
}

void CellWidget::setCompletions(std::function<std::vector<std::string>(const std::string&)> f) {
  if (edit_ && cell_.kind == nodes::CellKind::Lua) edit_->completions = std::move(f);
}

bool CellWidget::editingMarkdown() const {
  return rendered_ && edit_->isVisible() && !rendered_->isVisible();
}

void CellWidget::showMarkdown(bool edit) {
  if (!rendered_) return;
  if (edit) {
    rendered_->hide();
    edit_->show();
    edit_->setFocus();
    return;
  }
  // Parsed again only when the text or the folder of its images changed (a notebook's
  // refreshes call this for every cell; 100 Markdown cells parsed thrice took 0.2 s).
  const QString key = base_dir_ + '\n' + QString::fromStdString(cell_.source);
  if (rendered_->property("mls.rendered").toString() != key) {
    rendered_->document()->setBaseUrl(QUrl::fromLocalFile(base_dir_ + "/"));
    // Inline math ($...$) as Unicode text: Qt's Markdown has none.
    rendered_->setMarkdown(QString::fromStdString(lua::markdown_math(cell_.source)));
    rendered_->setProperty("mls.rendered", key);
  }
  fitMarkdown();
  edit_->hide();
  rendered_->show();
}

void CellWidget::fitMarkdown() {
  // setTextWidth lays the whole document out again even at the same width.
  const int w = std::max(100, rendered_->viewport()->width());
  if (rendered_->document()->textWidth() != w) rendered_->document()->setTextWidth(w);
  rendered_->setFixedHeight(int(rendered_->document()->size().height()) + 8);
}

void CellWidget::resizeEvent(QResizeEvent* e) {
  QFrame::resizeEvent(e);
  if (rendered_ && rendered_->isVisible()) fitMarkdown();
}

bool CellWidget::eventFilter(QObject* o, QEvent* e) {
  if (rendered_ && o == rendered_->viewport() && e->type() == QEvent::MouseButtonDblClick) {
    if (!locked_) showMarkdown(true);
    return true;
  }
  // A wheel over a slider or a list that has not the focus scrolls the notebook, as over text,
  // and leaves the value alone (scrolling past a slider moved it and re-ran its readers).
  if (e->type() == QEvent::Wheel) {
    auto* w = qobject_cast<QWidget*>(o);
    if (w && (qobject_cast<QAbstractSlider*>(w) || qobject_cast<QComboBox*>(w)) && !w->hasFocus()) {
      const auto* we = static_cast<QWheelEvent*>(e);
      QWheelEvent up(mapFromGlobal(we->globalPosition()), we->globalPosition(), we->pixelDelta(),
                     we->angleDelta(), we->buttons(), we->modifiers(), we->phase(), we->inverted());
      QCoreApplication::sendEvent(this, &up);  // ignored here: it goes up to the scroll area
      return true;
    }
  }
  if (e->type() == QEvent::FocusIn || e->type() == QEvent::MouseButtonPress)
    Q_EMIT selected(QString::fromStdString(cell_.id));
  return QFrame::eventFilter(o, e);
}

void CellWidget::mousePressEvent(QMouseEvent* e) {
  Q_EMIT selected(QString::fromStdString(cell_.id));
  QFrame::mousePressEvent(e);
}

void CellWidget::setRunning(bool running) {
  setStyleSheet(running ? "CellWidget { border: 2px solid #1565c0; }" : QString());
}

void CellWidget::setStale(bool stale) {
  // setStyleSheet re-polishes every child and re-lays the cell out, even with the same sheet:
  // at 300 cells a refresh spent most of its time here.
  if (stale == stale_shown_) return;
  stale_shown_ = stale;
  stale_->setVisible(stale);
  outputs_->setStyleSheet(stale ? "QLabel, QTableWidget { color: #9e9e9e; }" : QString());
}

void CellWidget::setProblems(const QStringList& reasons) {
  problems_->setText(reasons.join("\n"));
  problems_->setVisible(!reasons.isEmpty());
}

void CellWidget::clearOutputs() {
  outputs_layout_->removeWidget(text_);
  outputs_layout_->removeWidget(error_);
  while (QLayoutItem* item = outputs_layout_->takeAt(0)) {
    if (QWidget* w = item->widget()) w->deleteLater();
    delete item;
  }
  text_->hide();
  error_->hide();
}

void CellWidget::setOutput(const lua::CellOutput* out, bool stale) {
  // The notebook refreshes every cell after each edit anywhere: an output already shown keeps
  // its widgets (building a 100 x 64 table took ~40 ms), only its stale mark follows.
  const bool same = out ? shown_output_ && *shown_output_ == *out : !shown_output_;
  if (!same) clearOutputs();
  setStale(stale);
  if (edit_ && cell_.kind == nodes::CellKind::Lua)
    edit_->markErrorLine(out && !out->ok ? out->error_line : 0);
  if (same) return;
  shown_output_ = out ? std::optional<lua::CellOutput>(*out) : std::nullopt;
  if (!out) return;
  if (!out->text.empty()) {
    QString t = QString::fromStdString(out->text);
    if (t.endsWith('\n')) t.chop(1);
    text_->setText(t);
    outputs_layout_->addWidget(text_);
    text_->show();
  }
  for (const auto& t : out->tables) outputs_layout_->addWidget(makeTable(t));
  for (const auto& f : out->figures) {
    auto* svg = new FigureWidget(f);
    svg->setObjectName("cell.figure");
    outputs_layout_->addWidget(svg, 0, Qt::AlignLeft);
  }
  for (const auto& w : out->widgets) outputs_layout_->addWidget(makeWidget(w));
  if (!out->ok) {
    QString e = QString::fromStdString(out->error);
    if (out->error_line > 0) e = QString("line %1: ").arg(out->error_line) + e;
    error_->setText(e);
    outputs_layout_->addWidget(error_);
    error_->show();
  }
}

QWidget* CellWidget::makeTable(const lua::Table& t) {
  auto* box = new QWidget;
  box->setObjectName("cell.table_box");
  auto* lay = new QVBoxLayout(box);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->setSpacing(1);
  if (!t.title.empty()) {
    auto* title = new QLabel(QString::fromStdString(t.title));
    title->setObjectName("cell.table_title");
    title->setStyleSheet("color: grey; font-size: 9pt;");
    lay->addWidget(title);
  }
  auto* table = new QTableWidget(int(t.rows.size()), int(t.columns.size()));
  table->setObjectName("cell.table");
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::ContiguousSelection);
  table->setWordWrap(false);
  QStringList header;
  for (const auto& c : t.columns) header << QString::fromStdString(c);
  table->setHorizontalHeaderLabels(header);
  if (t.row_labels.empty()) {
    table->verticalHeader()->hide();
  } else {
    QStringList rows;
    for (const auto& r : t.row_labels) rows << QString::fromStdString(r);
    table->setVerticalHeaderLabels(rows);
  }
  QFont mono("monospace");
  mono.setStyleHint(QFont::Monospace);
  table->setFont(mono);
  table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
  for (size_t r = 0; r < t.rows.size(); ++r)
    for (size_t c = 0; c < t.rows[r].size() && c < t.columns.size(); ++c) {
      auto* item = new QTableWidgetItem(QString::fromStdString(t.rows[r][c]));
      // Numbers read right-aligned (a tensor's values, a summary's counts), names left.
      const bool number = !t.shape.empty() || t.columns[c] == "parameters";
      item->setTextAlignment(Qt::AlignVCenter | (number ? Qt::AlignRight : Qt::AlignLeft));
      table->setItem(int(r), int(c), item);
    }
  table->resizeColumnsToContents();
  // At most 12 rows high: a long tensor scrolls inside its table, not the notebook.
  constexpr int kRowsShown = 12;
  int h = table->horizontalHeader()->sizeHint().height() + 2 * table->frameWidth() +
          table->horizontalScrollBar()->sizeHint().height();
  for (int r = 0; r < std::min(table->rowCount(), kRowsShown); ++r) h += table->rowHeight(r);
  table->setFixedHeight(h);
  table->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
  lay->addWidget(table);
  QStringList notes;
  if (t.truncated) {
    QString n = QString("showing %1 of %2 rows").arg(t.rows.size()).arg(t.total_rows);
    if (t.columns.size() < t.total_cols)
      n += QString(", %1 of %2 columns").arg(t.columns.size()).arg(t.total_cols);
    notes << n;
  }
  if (!t.note.empty()) notes << QString::fromStdString(t.note);
  if (!notes.isEmpty()) {
    auto* note = new QLabel(notes.join("; "));
    note->setObjectName("cell.table_note");
    note->setWordWrap(true);
    note->setStyleSheet("color: grey; font-size: 9pt;");
    lay->addWidget(note);
  }
  return box;
}

QWidget* CellWidget::makeWidget(const lua::Widget& w) {
  auto* row = new QWidget;
  auto* lay = new QHBoxLayout(row);
  lay->setContentsMargins(0, 0, 0, 0);
  const QString name = QString::fromStdString(w.name);
  const QString label = QString::fromStdString(w.label.empty() ? w.name : w.label);
  if (w.kind == "slider") {
    // Integer ticks over [min, max] by step (100 ticks when no step is given).
    const double step = w.step > 0 ? w.step : (w.max - w.min) / 100.0;
    const int ticks = step > 0 ? int(std::lround((w.max - w.min) / step)) : 100;
    auto* value = new QLabel;
    auto* s = new QSlider(Qt::Horizontal);
    s->setObjectName("widget." + name);
    s->setFocusPolicy(Qt::StrongFocus);  // not by the wheel: see eventFilter
    s->installEventFilter(this);
    s->setRange(0, ticks);
    const double v = w.value.is_number() ? w.value.get<double>() : w.min;
    s->setValue(step > 0 ? int(std::lround((v - w.min) / step)) : 0);
    value->setText(QString::number(v));
    lay->addWidget(new QLabel(label));
    lay->addWidget(s, 1);
    lay->addWidget(value);
    connect(s, &QSlider::valueChanged, this,
            [value, min = w.min, step](int t) { value->setText(QString::number(min + t * step)); });
    // Only when the user lets go (or a key moved it): one re-run, not one per pixel.
    auto emit_value = [this, s, name, min = w.min, step] {
      if (!s->isSliderDown()) Q_EMIT widgetChanged(name, min + s->value() * step);
    };
    connect(s, &QSlider::sliderReleased, this, emit_value);
    connect(s, &QSlider::actionTriggered, this, [emit_value, s](int) {
      QMetaObject::invokeMethod(s, emit_value, Qt::QueuedConnection);
    });
  } else if (w.kind == "select") {
    auto* c = new QComboBox;
    c->setObjectName("widget." + name);
    c->setFocusPolicy(Qt::StrongFocus);
    c->installEventFilter(this);
    for (const auto& o : w.options) c->addItem(QString::fromStdString(o));
    if (w.value.is_string()) c->setCurrentText(QString::fromStdString(w.value.get<std::string>()));
    lay->addWidget(new QLabel(label));
    lay->addWidget(c, 1);
    connect(c, &QComboBox::activated, this,
            [this, c, name](int) { Q_EMIT widgetChanged(name, c->currentText().toStdString()); });
  } else if (w.kind == "checkbox") {
    auto* c = new QCheckBox(label);
    c->setObjectName("widget." + name);
    c->setChecked(w.value.is_boolean() && w.value.get<bool>());
    lay->addWidget(c);
    connect(c, &QCheckBox::clicked, this,
            [this, name](bool on) { Q_EMIT widgetChanged(name, on); });
  } else {
    auto* b = new QPushButton(label);
    b->setObjectName("widget." + name);
    const int clicks = w.value.is_number() ? w.value.get<int>() : 0;
    lay->addWidget(b, 0, Qt::AlignLeft);
    connect(b, &QPushButton::clicked, this,
            [this, name, clicks] { Q_EMIT widgetChanged(name, clicks + 1); });
  }
  return row;
}

}  // namespace mls::editor
