#include "editor/lua_highlighter.h"

#include <QSet>

namespace mls::editor {

namespace {

const QSet<QString>& keywords() {
  static const QSet<QString> k = {"and",   "break", "do",       "else", "elseif", "end",
                                  "false", "for",   "function", "goto", "if",     "in",
                                  "local", "nil",   "not",      "or",   "repeat", "return",
                                  "then",  "true",  "until",    "while"};
  return k;
}

bool ident_start(QChar c) {
  return c.isLetter() || c == '_';
}
bool ident_char(QChar c) {
  return c.isLetterOrNumber() || c == '_';
}

// At text[i] == '[': the level of a long bracket opening there ([[ is 0, [==[ is 2), or -1.
int long_open_level(const QString& text, int i) {
  if (i >= text.size() || text[i] != '[') return -1;
  int j = i + 1, level = 0;
  while (j < text.size() && text[j] == '=') ++j, ++level;
  return j < text.size() && text[j] == '[' ? level : -1;
}

// From `from`, the index just past the closing bracket of the given level, or -1.
int long_close(const QString& text, int from, int level) {
  const QString close = "]" + QString(level, '=') + "]";
  const int at = text.indexOf(close, from);
  return at < 0 ? -1 : at + int(close.size());
}

}  // namespace

LuaHighlighter::LuaHighlighter(QTextDocument* doc) : QSyntaxHighlighter(doc) {
  keyword_.setForeground(QColor(0x7c, 0x4d, 0xff));
  keyword_.setFontWeight(QFont::Bold);
  string_.setForeground(QColor(0x2e, 0x7d, 0x32));
  comment_.setForeground(QColor(0x8a, 0x8a, 0x8a));
  comment_.setFontItalic(true);
  number_.setForeground(QColor(0xc2, 0x18, 0x5b));
  mls_.setForeground(QColor(0x15, 0x65, 0xc0));
}

const QTextCharFormat& LuaHighlighter::format_of(Kind k) const {
  switch (k) {
    case Kind::Keyword:
      return keyword_;
    case Kind::String:
      return string_;
    case Kind::Comment:
      return comment_;
    case Kind::Number:
      return number_;
    case Kind::MlsName:
      return mls_;
  }
  return keyword_;
}

void LuaHighlighter::highlightBlock(const QString& text) {
  setCurrentBlockState(0);
  int i = 0;
  const int n = int(text.size());
  // A long string (state level + 1) or comment (-(level + 2)) carried from the previous line;
  // -1 is Qt's "no state" of the first block.
  if (const int prev = previousBlockState(); prev > 0 || prev < -1) {
    const bool comment = prev < 0;
    const int level = comment ? -prev - 2 : prev - 1;
    const int end = long_close(text, 0, level);
    setFormat(0, end < 0 ? n : end, comment ? comment_ : string_);
    if (end < 0) {
      setCurrentBlockState(prev);
      return;
    }
    i = end;
  }
  while (i < n) {
    const QChar c = text[i];
    if (c == '-' && i + 1 < n && text[i + 1] == '-') {
      if (const int level = long_open_level(text, i + 2); level >= 0) {
        const int end = long_close(text, i + 4 + level, level);
        setFormat(i, (end < 0 ? n : end) - i, comment_);
        if (end < 0) {
          setCurrentBlockState(-(level + 2));
          return;
        }
        i = end;
        continue;
      }
      setFormat(i, n - i, comment_);
      return;
    }
    if (const int level = long_open_level(text, i); level >= 0) {
      const int end = long_close(text, i + 2 + level, level);
      setFormat(i, (end < 0 ? n : end) - i, string_);
      if (end < 0) {
        setCurrentBlockState(level + 1);
        return;
      }
      i = end;
      continue;
    }
    if (c == '"' || c == '\'') {
      int j = i + 1;
      while (j < n && text[j] != c) j += text[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, n);
      setFormat(i, j - i, string_);
      i = j;
      continue;
    }
    if (c.isDigit() || (c == '.' && i + 1 < n && text[i + 1].isDigit())) {
      int j = i;
      const bool hex = c == '0' && i + 1 < n && (text[i + 1] == 'x' || text[i + 1] == 'X');
      if (hex) j += 2;
      while (j < n) {
        const QChar d = text[j];
        const bool exp = hex ? (d == 'p' || d == 'P') : (d == 'e' || d == 'E');
        if (exp && j + 1 < n && (text[j + 1] == '+' || text[j + 1] == '-')) {
          j += 2;
          continue;
        }
        if (d.isLetterOrNumber() || d == '.')
          ++j;
        else
          break;
      }
      setFormat(i, j - i, number_);
      i = j;
      continue;
    }
    if (ident_start(c)) {
      int j = i;
      while (j < n && ident_char(text[j])) ++j;
      const QString word = text.mid(i, j - i);
      if (keywords().contains(word)) {
        setFormat(i, j - i, keyword_);
      } else if (word == "mls" && (i == 0 || text[i - 1] != '.')) {
        // mls and its dotted path: mls.plot.line
        while (j + 1 < n && (text[j] == '.' || text[j] == ':') && ident_start(text[j + 1])) {
          ++j;
          while (j < n && ident_char(text[j])) ++j;
        }
        setFormat(i, j - i, mls_);
      }
      i = j;
      continue;
    }
    ++i;
  }
}

}  // namespace mls::editor
