// Lua syntax highlighting for code cells and Lua files: keywords, strings (quoted and long
// brackets [[...]], [==[...]==], across lines), comments (-- and --[[ ... ]]), numbers and
// the names of the `mls` module (mls.train, mls.plot.line, ...).
//
//   auto* edit = new QPlainTextEdit;
//   new LuaHighlighter(edit->document());   // owned by the document
//
// A long string or comment still open at the end of a line is carried to the next one in the
// block state: level + 1 for a string, -(level + 2) for a comment (-1 is Qt's "no state"),
// the level being the number of '=' in its bracket.
#pragma once

#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace mls::editor {

class LuaHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  enum class Kind { Keyword, String, Comment, Number, MlsName };
  explicit LuaHighlighter(QTextDocument* doc);
  const QTextCharFormat& format_of(Kind k) const;

 protected:
  void highlightBlock(const QString& text) override;

 private:
  QTextCharFormat keyword_, string_, comment_, number_, mls_;
};

}  // namespace mls::editor
