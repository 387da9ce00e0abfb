// The filter language: a lexer, a recursive-descent parser that emits SQL as it goes (each
// comparison is one SQL predicate), and the SQL of each field.
#include "store/run_filter.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "store/process_owner.h"

namespace mls::store {

namespace {

const std::vector<std::string> kAggs = {"latest", "last",  "min",  "max",
                                        "best",   "count", "step", "best_step"};
const std::vector<std::string> kStatuses = {"running", "finished", "failed", "interrupted",
                                            "pruned"};

bool numeric_attribute(const std::string& a) {
  for (const char* n :
       {"id", "seed", "world_size", "parent", "fork_step", "sweep", "trial", "duration"})
    if (a == n) return true;
  return false;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// A whole decimal number ("1e-3", "-2", "0.5"), nothing else (no hex, inf or nan).
bool parse_number(std::string_view s, double& out) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '+' &&
        c != 'e' && c != 'E')
      return false;
  std::string text(s);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '-' ||
         c == ':' || c == '@' || c == '[' || c == ']';
}

struct Segment {
  std::string text;
  bool quoted = false;
};

// A field from its dot-separated segments (the lexer's, or parse_field's).
Result<Field> field_from(const std::vector<Segment>& seg) {
  const std::string head = seg[0].quoted ? seg[0].text : lower(seg[0].text);
  auto join = [&](size_t from, size_t to) {
    std::string k;
    for (size_t i = from; i < to; ++i) k += (i > from ? "." : "") + seg[i].text;
    return k;
  };
  Field f;
  if (seg.size() == 1 || (head != "params" && head != "metrics" && head != "tags")) {
    std::string name = join(0, seg.size());
    const auto& attrs = run_attributes();
    if (seg.size() == 1 && std::find(attrs.begin(), attrs.end(), head) != attrs.end()) {
      f.name = head;
      return f;
    }
    if (seg.size() == 1 && (head == "params" || head == "metrics" || head == "tags"))
      return make_error(head + " needs a key: " + head + ".KEY");
    std::vector<std::string> all = attrs;
    for (const char* p : {"params", "metrics", "tags"}) all.push_back(p);
    std::string guess = closest(seg[0].text, all);
    std::string hint;
    if (!guess.empty())
      hint = numeric_attribute(guess) || std::find(attrs.begin(), attrs.end(), guess) != attrs.end()
                 ? " (did you mean " + guess + "?)"
                 : " (did you mean " + guess + "." + join(1, seg.size()) + "?)";
    return make_error("unknown field '" + name + "'" + hint +
                      "; fields: attributes (id, name, status, ...), params.KEY, "
                      "metrics.KEY[.AGG], tags.KEY");
  }
  f.kind = head == "params" ? Field::Kind::Param
           : head == "tags" ? Field::Kind::Tag
                            : Field::Kind::Metric;
  size_t end = seg.size();
  if (f.kind == Field::Kind::Metric) {
    f.agg = "latest";
    const Segment& last = seg.back();
    if (seg.size() >= 3 && !last.quoted) {
      std::string a = lower(last.text);
      if (std::find(kAggs.begin(), kAggs.end(), a) != kAggs.end()) {
        f.agg = a == "last" ? "latest" : a;
        --end;
      } else if (std::string g = closest(a, kAggs); !g.empty()) {
        return make_error("unknown aggregate '" + last.text + "' of metrics." + join(1, end - 1) +
                          " (did you mean " + g +
                          "?); aggregates: latest, min, max, best, count, step, best_step");
      }
    }
  }
  f.name = join(1, end);
  if (f.name.empty()) return make_error(head + " needs a key: " + head + ".KEY");
  return f;
}

// ---------------------------------------------------------------------------------------
// Lexer

enum class Tok { End, Field, Number, Text, Bool, Op, LParen, RParen, And, Or, Not, Like };

struct Token {
  Tok kind = Tok::End;
  size_t pos = 0;                 // 0-based offset into the text
  std::string text;               // as written (Field: the whole path; Text: the unquoted value)
  std::vector<Segment> segments;  // Field
  double number = 0;              // Number
  bool boolean = false;           // Bool
};

struct ParseError {
  size_t pos;
  std::string message;
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  // All tokens, ending with End; or the first error.
  bool run(std::vector<Token>& out, ParseError& err) {
    for (;;) {
      while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
      Token t;
      t.pos = i_;
      if (i_ >= s_.size()) {
        out.push_back(t);
        return true;
      }
      char c = s_[i_];
      if (c == '(' || c == ')') {
        t.kind = c == '(' ? Tok::LParen : Tok::RParen;
        t.text = std::string(1, c);
        ++i_;
      } else if (c == '\'' || c == '"') {
        t.kind = Tok::Text;
        if (!quoted(c, t.text, err)) return false;
      } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
                 ((c == '-' || c == '+') && i_ + 1 < s_.size() &&
                  (std::isdigit(static_cast<unsigned char>(s_[i_ + 1])) || s_[i_ + 1] == '.'))) {
        size_t j = i_ + 1;
        while (j < s_.size() &&
               (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '.' ||
                ((s_[j] == '-' || s_[j] == '+') && (s_[j - 1] == 'e' || s_[j - 1] == 'E'))))
          ++j;
        t.text = std::string(s_.substr(i_, j - i_));
        if (!parse_number(t.text, t.number)) {
          err = {i_, "'" + t.text + "' is not a number"};
          return false;
        }
        t.kind = Tok::Number;
        i_ = j;
      } else if (std::string_view ops = "=!<>~"; ops.find(c) != std::string_view::npos) {
        std::string two(s_.substr(i_, 2));
        if (two == "==" || two == "!=" || two == "<=" || two == ">=" || two == "<>") {
          t.text = two == "==" ? "=" : two == "<>" ? "!=" : two;
          i_ += 2;
        } else if (c == '!') {
          err = {i_, "'!' is not an operator here (use != or NOT)"};
          return false;
        } else {
          t.text = std::string(1, c);
          ++i_;
        }
        t.kind = Tok::Op;
      } else if (ident_char(c) || c == '`') {
        if (!field(t, err)) return false;
      } else {
        err = {i_, std::string("unexpected character '") + c + "'"};
        return false;
      }
      out.push_back(std::move(t));
    }
  }

 private:
  bool quoted(char q, std::string& text, ParseError& err) {
    size_t start = i_++;
    for (; i_ < s_.size(); ++i_) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size() && (s_[i_ + 1] == q || s_[i_ + 1] == '\\')) {
        text += s_[++i_];
      } else if (s_[i_] == q) {
        ++i_;
        return true;
      } else {
        text += s_[i_];
      }
    }
    err = {start, std::string("unterminated text: no closing ") + q};
    return false;
  }

  bool field(Token& t, ParseError& err) {
    size_t start = i_;
    for (;;) {
      Segment seg;
      if (i_ < s_.size() && (s_[i_] == '`' || (s_[i_] == '"' && !t.segments.empty()) ||
                             (s_[i_] == '\'' && !t.segments.empty()))) {
        seg.quoted = true;
        if (!quoted(s_[i_], seg.text, err)) return false;
      } else {
        size_t j = i_;
        while (j < s_.size() && ident_char(s_[j])) ++j;
        seg.text = std::string(s_.substr(i_, j - i_));
        i_ = j;
      }
      if (seg.text.empty() && !seg.quoted) {
        err = {i_, "expected a key after '.'"};
        return false;
      }
      t.segments.push_back(std::move(seg));
      if (i_ < s_.size() && s_[i_] == '.') {
        ++i_;
        continue;
      }
      break;
    }
    t.text = std::string(s_.substr(start, i_ - start));
    t.kind = Tok::Field;
    if (t.segments.size() == 1 && !t.segments[0].quoted) {
      std::string w = lower(t.segments[0].text);
      if (w == "and") t.kind = Tok::And;
      if (w == "or") t.kind = Tok::Or;
      if (w == "not") t.kind = Tok::Not;
      if (w == "like") t.kind = Tok::Like;
      if (w == "true" || w == "false") {
        t.kind = Tok::Bool;
        t.boolean = w == "true";
      }
    }
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------
// Parser: emits SQL directly.

class Parser {
 public:
  Parser(std::vector<Token> toks, SqlBinds& binds, std::vector<Field>* fields)
      : t_(std::move(toks)), binds_(binds), fields_(fields) {}

  bool parse(std::string& sql, ParseError& err) {
    if (!expr(sql, err)) return false;
    if (peek().kind != Tok::End) {
      err = {peek().pos, peek().kind == Tok::RParen
                             ? "')' without a matching '('"
                             : "expected AND, OR or the end, found '" + peek().text + "'"};
      return false;
    }
    return true;
  }

 private:
  const Token& peek() const { return t_[k_]; }
  const Token& next() { return t_[k_ == t_.size() - 1 ? k_ : k_++]; }

  bool expr(std::string& out, ParseError& err) {
    std::string left;
    if (!and_expr(left, err)) return false;
    // A chain is one flat SQL list: SQLite's parser stack is shallow (a nested pair per
    // operator overflowed it at about 100 terms).
    bool chain = false;
    while (peek().kind == Tok::Or) {
      next();
      std::string right;
      if (!and_expr(right, err)) return false;
      left += " OR " + right;
      chain = true;
    }
    out = chain ? "(" + left + ")" : std::move(left);
    return true;
  }

  bool and_expr(std::string& out, ParseError& err) {
    std::string left;
    if (!not_expr(left, err)) return false;
    bool chain = false;
    while (peek().kind == Tok::And) {
      next();
      std::string right;
      if (!not_expr(right, err)) return false;
      left += " AND " + right;
      chain = true;
    }
    out = chain ? "(" + left + ")" : std::move(left);
    return true;
  }

  // Parentheses and NOTs nest at most this deep, and a filter holds at most kMaxTerms
  // comparisons: the parser's stack and SQLite's expression depth stay bounded whatever the
  // text (a filter box's contents are user input).
  static constexpr int kMaxDepth = 32;
  static constexpr int kMaxTerms = 256;

  bool deeper(const Token& at, ParseError& err) {
    if (++depth_ <= kMaxDepth) return true;
    err = {at.pos, "nested deeper than " + std::to_string(kMaxDepth) + " (parentheses or NOT)"};
    return false;
  }

  // NOT NOT x is x in SQL's three-valued logic too (NULL stays NULL), so a run of NOTs is
  // one NOT or none: SQLite's parser stack need not hold them.
  bool not_expr(std::string& out, ParseError& err) {
    int nots = 0;
    const int depth = depth_;
    while (peek().kind == Tok::Not) {
      if (!deeper(peek(), err)) return false;
      next();
      ++nots;
    }
    std::string inner;
    if (!primary(inner, err)) return false;
    depth_ = depth;
    out = nots % 2 ? "(NOT " + inner + ")" : inner;
    return true;
  }

  bool primary(std::string& out, ParseError& err) {
    const Token& t = peek();
    if (t.kind == Tok::LParen) {
      if (!deeper(t, err)) return false;
      next();
      std::string inner;
      if (!expr(inner, err)) return false;
      --depth_;
      if (peek().kind != Tok::RParen) {
        err = {peek().pos, "expected ')' to close the '(' at column " + std::to_string(t.pos + 1)};
        return false;
      }
      next();
      out = inner;
      return true;
    }
    if (t.kind != Tok::Field) {
      std::string found = t.kind == Tok::End ? "the end" : "'" + t.text + "'";
      if (k_ > 0 && (t_[k_ - 1].kind == Tok::And || t_[k_ - 1].kind == Tok::Or ||
                     t_[k_ - 1].kind == Tok::Not))
        err = {t.pos,
               "expected a field, '(' or NOT after '" + t_[k_ - 1].text + "', found " + found};
      else
        err = {t.pos, "expected a field, '(' or NOT, found " + found};
      return false;
    }
    if (++terms_ > kMaxTerms) {
      err = {t.pos, "more than " + std::to_string(kMaxTerms) + " comparisons"};
      return false;
    }
    Token ft = next();
    Result<Field> f = field_from(ft.segments);
    if (!f) {
      err = {ft.pos, f.error().message};
      return false;
    }
    if (fields_) fields_->push_back(*f);
    std::string fsql = field_sql(*f, binds_);
    // A field alone: a test that the run has it.
    const Token& op = peek();
    bool negated_like = false;
    if (op.kind == Tok::Not && k_ + 1 < t_.size() && t_[k_ + 1].kind == Tok::Like) {
      next();
      negated_like = true;
    }
    if (op.kind != Tok::Op && op.kind != Tok::Like && !negated_like) {
      if (f->kind == Field::Kind::Attribute) {
        err = {op.pos, "expected an operator (= != < <= > >= ~ LIKE) after '" + ft.text + "'" +
                           (op.kind == Tok::End ? "" : ", found '" + op.text + "'")};
        return false;
      }
      out = f->kind == Field::Kind::Tag
                ? "EXISTS(SELECT 1 FROM tags WHERE run_id = r.id AND key = " + binds_.add(f->name) +
                      ")"
                : "(" + fsql + " IS NOT NULL)";
      return true;
    }
    Token o = next();
    std::string opname = negated_like ? "NOT LIKE" : o.kind == Tok::Like ? "LIKE" : o.text;
    const Token& v = peek();
    if (v.kind != Tok::Number && v.kind != Tok::Text && v.kind != Tok::Bool) {
      std::string hint;
      if (v.kind == Tok::Field) hint = " (text is quoted: '" + v.text + "')";
      err = {v.pos, "expected a value after '" + (negated_like ? std::string("LIKE") : o.text) +
                        "'" + hint};
      return false;
    }
    Token val = next();
    return comparison(*f, fsql, ft, opname, val, out, err);
  }

  bool comparison(const Field& f, const std::string& fsql, const Token& ft, const std::string& op,
                  const Token& val, std::string& out, ParseError& err) {
    bool pattern = op == "LIKE" || op == "NOT LIKE" || op == "~";
    std::string sqlop = op == "~" ? "GLOB" : op;
    if (pattern) {
      std::string text = val.kind == Tok::Bool ? (val.boolean ? "true" : "false") : val.text;
      std::string lhs = fsql;
      if (f.numeric() && f.kind == Field::Kind::Attribute) lhs = "CAST(" + fsql + " AS TEXT)";
      out = "(" + lhs + " " + sqlop + " " + binds_.add(text) + ")";
      return true;
    }
    if (f.numeric()) {
      if (val.kind == Tok::Text) {
        err = {val.pos,
               "'" + ft.text + "' is a number: compare it with a number, not '" + val.text + "'"};
        return false;
      }
      double n = val.kind == Tok::Bool ? (val.boolean ? 1 : 0) : val.number;
      out = "(" + fsql + " " + op + " " + binds_.add(n) + ")";
      return true;
    }
    if (f.kind == Field::Kind::Attribute) {
      std::string text = val.kind == Tok::Bool ? (val.boolean ? "true" : "false") : val.text;
      if (f.name == "status" && (op == "=" || op == "!=") &&
          std::find(kStatuses.begin(), kStatuses.end(), text) == kStatuses.end()) {
        std::string g = closest(lower(text), kStatuses);
        err = {val.pos, "unknown status '" + text + "'" +
                            (g.empty() ? "" : " (did you mean " + g + "?)") +
                            "; statuses: running, finished, failed, interrupted, pruned"};
        return false;
      }
      out = "(" + fsql + " " + op + " " + binds_.add(text) + ")";
      return true;
    }
    // params and tags hold text.
    if (val.kind == Tok::Number) {
      out = "(mls_num(" + fsql + ") " + op + " " + binds_.add(val.number) + ")";
      return true;
    }
    std::string text = val.kind == Tok::Bool ? (val.boolean ? "true" : "false") : val.text;
    out = "(" + fsql + " " + op + " " + binds_.add(text) + ")";
    return true;
  }

  std::vector<Token> t_;
  size_t k_ = 0;
  SqlBinds& binds_;
  std::vector<Field>* fields_;
  int depth_ = 0, terms_ = 0;
};

std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return out;
}

// Per connection: owner strings already looked up (a statement asks once per owner).
struct OwnerCache {
  std::mutex mu;
  std::unordered_map<std::string, bool> gone;
};

void sql_num(sqlite3_context* ctx, int, sqlite3_value** argv) {
  switch (sqlite3_value_type(argv[0])) {
    case SQLITE_INTEGER:
    case SQLITE_FLOAT:
      sqlite3_result_value(ctx, argv[0]);
      return;
    case SQLITE_TEXT: {
      const char* t = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
      double v = 0;
      if (t && parse_number(t, v)) {
        sqlite3_result_double(ctx, v);
        return;
      }
      break;
    }
    default:
      break;
  }
  sqlite3_result_null(ctx);
}

void sql_owner_gone(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto* cache = static_cast<OwnerCache*>(sqlite3_user_data(ctx));
  const char* t = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
  std::string owner = t ? t : "";
  bool gone = false;
  {
    std::lock_guard<std::mutex> lock(cache->mu);
    auto it = cache->gone.find(owner);
    if (it == cache->gone.end()) it = cache->gone.emplace(owner, owner_gone(owner)).first;
    gone = it->second;
  }
  sqlite3_result_int(ctx, gone ? 1 : 0);
}

}  // namespace

bool Field::numeric() const {
  if (kind == Kind::Metric) return true;
  return kind == Kind::Attribute && numeric_attribute(name);
}

std::string Field::label() const {
  auto key = [](const std::string& k) {
    bool plain = !k.empty();
    for (char c : k) plain = plain && ident_char(c);
    return plain ? k : "`" + k + "`";
  };
  switch (kind) {
    case Kind::Attribute:
      return name;
    case Kind::Param:
      return "params." + key(name);
    case Kind::Tag:
      return "tags." + key(name);
    case Kind::Metric:
      return "metrics." + key(name) + (agg == "latest" ? "" : "." + agg);
  }
  return name;
}

const std::vector<std::string>& run_attributes() {
  static const std::vector<std::string> a = {
      "id",     "name",  "status",     "started",    "ended",       "duration",
      "device", "seed",  "world_size", "experiment", "parent",      "fork_step",
      "sweep",  "trial", "note",       "project",    "project_hash"};
  return a;
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  std::string w = lower(word);
  for (const std::string& c : candidates) {
    size_t d = edit_distance(w, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

Result<Field> parse_field(std::string_view text) {
  Lexer lex(text);
  std::vector<Token> toks;
  ParseError err;
  if (!lex.run(toks, err)) return make_error(err.message);
  if (toks.size() != 2 || toks[0].kind != Tok::Field)
    return make_error("'" + one_line(text) +
                      "' is not a field (e.g. status, params.lr, "
                      "metrics.val/loss.best, tags.keep)");
  return field_from(toks[0].segments);
}

std::string SqlBinds::add(SqlValue v) {
  values.push_back(std::move(v));
  return "?" + std::to_string(values.size());
}

std::string field_sql(const Field& f, SqlBinds& binds) {
  switch (f.kind) {
    case Field::Kind::Param:
      return "(SELECT value FROM params WHERE run_id = r.id AND key = " + binds.add(f.name) + ")";
    case Field::Kind::Tag:
      return "(SELECT value FROM tags WHERE run_id = r.id AND key = " + binds.add(f.name) + ")";
    case Field::Kind::Metric: {
      std::string col = f.agg == "step" ? "latest_step" : f.agg;
      return "(SELECT " + col +
             " FROM metric_summary WHERE run_id = r.id AND key = " + binds.add(f.name) + ")";
    }
    case Field::Kind::Attribute:
      break;
  }
  const std::string& a = f.name;
  if (a == "status")
    return "(CASE WHEN r.status = 'running' AND mls_owner_gone(r.owner) THEN 'interrupted' "
           "ELSE r.status END)";
  if (a == "duration")
    return "((julianday(COALESCE(r.ended, 'now')) - julianday(r.started)) * 86400.0)";
  if (a == "experiment") return "(SELECT name FROM experiments WHERE id = r.experiment_id)";
  if (a == "parent") return "r.parent_run_id";
  if (a == "sweep") return "r.sweep_id";
  if (a == "project") return "r.project_path";
  return "r." + a;  // id name started ended device seed world_size fork_step trial note
                    // project_hash: names from run_attributes(), never user text
}

std::string field_order_sql(const Field& f, SqlBinds& binds, bool descending) {
  std::string x = field_sql(f, binds);
  std::string dir = descending ? " DESC" : "";
  if (f.kind == Field::Kind::Param || f.kind == Field::Kind::Tag)
    return x + " IS NULL, mls_num(" + x + ") IS NULL, mls_num(" + x + ")" + dir + ", " + x + dir;
  return x + " IS NULL, " + x + dir;
}

Result<std::string> filter_sql(std::string_view where, SqlBinds& binds,
                               std::vector<Field>* fields) {
  bool blank = std::all_of(where.begin(), where.end(),
                           [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
  if (blank) return std::string("1");
  std::vector<Token> toks;
  ParseError err;
  std::string sql;
  SqlBinds local = binds;
  bool ok = Lexer(where).run(toks, err) && Parser(std::move(toks), local, fields).parse(sql, err);
  if (!ok) {
    std::string text = one_line(where);
    return make_error("--where: column " + std::to_string(err.pos + 1) + ": " + err.message +
                      "\n  " + text + "\n  " + std::string(err.pos, ' ') + "^");
  }
  binds = std::move(local);
  return sql;
}

void bind_all(sqlite3_stmt* st, const SqlBinds& binds) {
  for (size_t i = 0; i < binds.values.size(); ++i) {
    int idx = static_cast<int>(i + 1);
    const SqlValue& v = binds.values[i];
    if (const auto* n = std::get_if<int64_t>(&v)) sqlite3_bind_int64(st, idx, *n);
    if (const auto* d = std::get_if<double>(&v)) sqlite3_bind_double(st, idx, *d);
    if (const auto* s = std::get_if<std::string>(&v))
      sqlite3_bind_text(st, idx, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
  }
}

Result<void> register_filter_functions(sqlite3* db) {
  int rc = sqlite3_create_function_v2(db, "mls_num", 1,
                                      SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                      nullptr, sql_num, nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function_v2(db, "mls_owner_gone", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
                                    new OwnerCache, sql_owner_gone, nullptr, nullptr,
                                    [](void* p) { delete static_cast<OwnerCache*>(p); });
  if (rc != SQLITE_OK)
    return make_error(std::string("cannot add the filter's SQL functions: ") + sqlite3_errmsg(db));
  return {};
}

}  // namespace mls::store
