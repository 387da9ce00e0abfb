// [SECTION] tables      commands, sub- and superscript letters
// [SECTION] TeX         a small recursive reader of TeX math
// [SECTION] Markdown    $...$ outside code, as italic Unicode
// [SECTION] HTML        md4c's <x-equation> spans
#include "scripting/notebook/math_text.h"

#include <cctype>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mls::lua {

namespace {

// [SECTION] tables

const std::unordered_map<std::string_view, std::string_view>& symbols() {
  static const std::unordered_map<std::string_view, std::string_view> m = {
      {"alpha", "α"},    {"beta", "β"},       {"gamma", "γ"},       {"delta", "δ"},
      {"epsilon", "ϵ"},  {"varepsilon", "ε"}, {"zeta", "ζ"},        {"eta", "η"},
      {"theta", "θ"},    {"vartheta", "ϑ"},   {"iota", "ι"},        {"kappa", "κ"},
      {"lambda", "λ"},   {"mu", "μ"},         {"nu", "ν"},          {"xi", "ξ"},
      {"pi", "π"},       {"rho", "ρ"},        {"sigma", "σ"},       {"tau", "τ"},
      {"upsilon", "υ"},  {"phi", "ϕ"},        {"varphi", "φ"},      {"chi", "χ"},
      {"psi", "ψ"},      {"omega", "ω"},      {"Gamma", "Γ"},       {"Delta", "Δ"},
      {"Theta", "Θ"},    {"Lambda", "Λ"},     {"Xi", "Ξ"},          {"Pi", "Π"},
      {"Sigma", "Σ"},    {"Upsilon", "Υ"},    {"Phi", "Φ"},         {"Psi", "Ψ"},
      {"Omega", "Ω"},    {"cdot", "·"},       {"times", "×"},       {"div", "÷"},
      {"pm", "±"},       {"mp", "∓"},         {"ast", "∗"},         {"star", "⋆"},
      {"circ", "∘"},     {"bullet", "•"},     {"odot", "⊙"},        {"otimes", "⊗"},
      {"oplus", "⊕"},    {"leq", "≤"},        {"le", "≤"},          {"geq", "≥"},
      {"ge", "≥"},       {"neq", "≠"},        {"ne", "≠"},          {"approx", "≈"},
      {"sim", "∼"},      {"simeq", "≃"},      {"equiv", "≡"},       {"propto", "∝"},
      {"ll", "≪"},       {"gg", "≫"},         {"infty", "∞"},       {"sum", "∑"},
      {"prod", "∏"},     {"int", "∫"},        {"oint", "∮"},        {"partial", "∂"},
      {"nabla", "∇"},    {"to", "→"},         {"rightarrow", "→"},  {"leftarrow", "←"},
      {"gets", "←"},     {"Rightarrow", "⇒"}, {"Leftarrow", "⇐"},   {"leftrightarrow", "↔"},
      {"iff", "⟺"},      {"implies", "⟹"},    {"mapsto", "↦"},      {"in", "∈"},
      {"notin", "∉"},    {"subset", "⊂"},     {"subseteq", "⊆"},    {"supset", "⊃"},
      {"cup", "∪"},      {"cap", "∩"},        {"emptyset", "∅"},    {"varnothing", "∅"},
      {"forall", "∀"},   {"exists", "∃"},     {"neg", "¬"},         {"lnot", "¬"},
      {"land", "∧"},     {"wedge", "∧"},      {"lor", "∨"},         {"vee", "∨"},
      {"ldots", "…"},    {"dots", "…"},       {"cdots", "⋯"},       {"vdots", "⋮"},
      {"ddots", "⋱"},    {"prime", "′"},      {"top", "⊤"},         {"perp", "⊥"},
      {"mid", "∣"},      {"parallel", "∥"},   {"langle", "⟨"},      {"rangle", "⟩"},
      {"lfloor", "⌊"},   {"rfloor", "⌋"},     {"lceil", "⌈"},       {"rceil", "⌉"},
      {"ell", "ℓ"},      {"hbar", "ℏ"},       {"Re", "ℜ"},          {"Im", "ℑ"},
      {"aleph", "ℵ"},    {"angle", "∠"},      {"circledot", "⊙"},   {"quad", "  "},
      {"qquad", "    "}, {"lvert", "|"},      {"rvert", "|"},       {"vert", "|"},
      {"lVert", "‖"},    {"rVert", "‖"},      {"Vert", "‖"},        {"cdotp", "·"},
      {"colon", ":"},    {"setminus", "∖"},   {"det", "det"},       {"exp", "exp"},
      {"log", "log"},    {"ln", "ln"},        {"sin", "sin"},       {"cos", "cos"},
      {"tan", "tan"},    {"tanh", "tanh"},    {"max", "max"},       {"min", "min"},
      {"arg", "arg"},    {"lim", "lim"},      {"sup", "sup"},       {"inf", "inf"},
      {"dim", "dim"},    {"Pr", "Pr"},        {"argmax", "argmax"}, {"argmin", "argmin"},
  };
  return m;
}

// One-character commands: \, \; \{ ...
std::string_view short_command(char c) {
  switch (c) {
    case ',':
      return "\u2009";  // thin space
    case ':':
    case ';':
    case ' ':
      return " ";
    case '!':
      return "";
    case '\\':
      return " ";
    case '{':
      return "{";
    case '}':
      return "}";
    case '|':
      return "‖";
    case '%':
      return "%";
    case '#':
      return "#";
    case '$':
      return "$";
    case '&':
      return "&";
    case '_':
      return "_";
    default:
      return {};
  }
}

// Commands whose one argument is shown as it is (fonts, \text).
bool is_font(std::string_view c) {
  for (std::string_view f :
       {"text", "textrm", "textit", "textbf", "mathrm", "mathit", "mathbf", "mathsf", "mathtt",
        "boldsymbol", "bm", "operatorname", "textsf", "texttt", "mbox", "emph"})
    if (c == f) return true;
  return false;
}

// Sizing and delimiters' helpers: dropped, the delimiter after them stays.
bool is_ignored(std::string_view c) {
  for (std::string_view f : {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl",
                             "Bigr", "displaystyle", "textstyle", "limits", "nolimits"})
    if (c == f) return true;
  return false;
}

// Greek letters and the symbols that read as one: no space after them.
bool letter_like(std::string_view c) {
  for (std::string_view f : {"partial", "nabla", "top", "ell", "hbar", "prime", "infty"})
    if (c == f) return true;
  const auto& m = symbols();
  auto it = m.find(c);
  // Greek letters: U+0370..U+03FF, whose UTF-8 starts with 0xCE or 0xCF.
  if (it == m.end() || it->second.size() != 2) return false;
  const auto lead = static_cast<unsigned char>(it->second[0]);
  return lead == 0xCE || lead == 0xCF;
}

// Combining marks for accents, put after the accented text.
std::string_view accent(std::string_view c) {
  if (c == "hat" || c == "widehat") return "\u0302";
  if (c == "bar" || c == "overline") return "\u0304";
  if (c == "tilde" || c == "widetilde") return "\u0303";
  if (c == "vec") return "\u20D7";
  if (c == "dot") return "\u0307";
  if (c == "ddot") return "\u0308";
  return {};
}

std::string_view blackboard(char c) {
  switch (c) {
    case 'R':
      return "ℝ";
    case 'N':
      return "ℕ";
    case 'Z':
      return "ℤ";
    case 'Q':
      return "ℚ";
    case 'C':
      return "ℂ";
    case 'E':
      return "𝔼";
    case 'P':
      return "ℙ";
    default:
      return {};
  }
}

std::string_view calligraphic(char c) {
  switch (c) {
    case 'L':
      return "ℒ";
    case 'N':
      return "𝒩";
    case 'O':
      return "𝒪";
    case 'D':
      return "𝒟";
    case 'H':
      return "ℋ";
    case 'F':
      return "ℱ";
    case 'X':
      return "𝒳";
    case 'Y':
      return "𝒴";
    default:
      return {};
  }
}

// UTF-8 code points of s.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> cps;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    cps.push_back(s.substr(i, n));
    i += n;
  }
  return cps;
}

const std::unordered_map<std::string, std::string_view>& superscripts() {
  static const std::unordered_map<std::string, std::string_view> m = {
      {"0", "⁰"}, {"1", "¹"}, {"2", "²"}, {"3", "³"}, {"4", "⁴"}, {"5", "⁵"}, {"6", "⁶"},
      {"7", "⁷"}, {"8", "⁸"}, {"9", "⁹"}, {"+", "⁺"}, {"-", "⁻"}, {"−", "⁻"}, {"=", "⁼"},
      {"(", "⁽"}, {")", "⁾"}, {"a", "ᵃ"}, {"b", "ᵇ"}, {"c", "ᶜ"}, {"d", "ᵈ"}, {"e", "ᵉ"},
      {"f", "ᶠ"}, {"g", "ᵍ"}, {"h", "ʰ"}, {"i", "ⁱ"}, {"j", "ʲ"}, {"k", "ᵏ"}, {"l", "ˡ"},
      {"m", "ᵐ"}, {"n", "ⁿ"}, {"o", "ᵒ"}, {"p", "ᵖ"}, {"r", "ʳ"}, {"s", "ˢ"}, {"t", "ᵗ"},
      {"u", "ᵘ"}, {"v", "ᵛ"}, {"w", "ʷ"}, {"x", "ˣ"}, {"y", "ʸ"}, {"z", "ᶻ"}, {"A", "ᴬ"},
      {"B", "ᴮ"}, {"D", "ᴰ"}, {"E", "ᴱ"}, {"G", "ᴳ"}, {"H", "ᴴ"}, {"I", "ᴵ"}, {"J", "ᴶ"},
      {"K", "ᴷ"}, {"L", "ᴸ"}, {"M", "ᴹ"}, {"N", "ᴺ"}, {"O", "ᴼ"}, {"P", "ᴾ"}, {"R", "ᴿ"},
      {"T", "ᵀ"}, {"U", "ᵁ"}, {"V", "ⱽ"}, {"W", "ᵂ"}, {"⊤", "ᵀ"}, {"′", "′"}, {"∗", "*"},
      {"*", "*"}, {"β", "ᵝ"}, {"γ", "ᵞ"}, {"δ", "ᵟ"}, {"θ", "ᶿ"}, {"φ", "ᵠ"}, {"χ", "ᵡ"},
  };
  return m;
}

const std::unordered_map<std::string, std::string_view>& subscripts() {
  static const std::unordered_map<std::string, std::string_view> m = {
      {"0", "₀"}, {"1", "₁"}, {"2", "₂"}, {"3", "₃"}, {"4", "₄"}, {"5", "₅"}, {"6", "₆"},
      {"7", "₇"}, {"8", "₈"}, {"9", "₉"}, {"+", "₊"}, {"-", "₋"}, {"−", "₋"}, {"=", "₌"},
      {"(", "₍"}, {")", "₎"}, {"a", "ₐ"}, {"e", "ₑ"}, {"h", "ₕ"}, {"i", "ᵢ"}, {"j", "ⱼ"},
      {"k", "ₖ"}, {"l", "ₗ"}, {"m", "ₘ"}, {"n", "ₙ"}, {"o", "ₒ"}, {"p", "ₚ"}, {"r", "ᵣ"},
      {"s", "ₛ"}, {"t", "ₜ"}, {"u", "ᵤ"}, {"v", "ᵥ"}, {"x", "ₓ"}, {"β", "ᵦ"}, {"γ", "ᵧ"},
      {"ρ", "ᵨ"}, {"φ", "ᵩ"}, {"χ", "ᵪ"},
  };
  return m;
}

// Text raised or lowered: each code point's small form, or "^(...)" / "_(...)" when one has
// none (a mix would misread: x^{ab1} must not become "xᵃᵇ1").
std::string script(const std::string& text, bool super) {
  const auto& table = super ? superscripts() : subscripts();
  std::string out;
  const auto cps = code_points(text);
  bool all = !cps.empty();
  for (const auto& cp : cps) {
    if (cp == " ") continue;
    auto it = table.find(cp);
    if (it == table.end()) {
      all = false;
      break;
    }
    out += it->second;
  }
  if (all) return out;
  const std::string mark = super ? "^" : "_";
  return cps.size() <= 1 ? mark + text : mark + "(" + text + ")";
}

// A fraction's part: bare when it is one symbol or a plain word, else in parentheses.
std::string operand(const std::string& s) {
  bool plain = true;
  for (unsigned char c : s)
    if (c < 0x80 && !std::isalnum(c) && c != '.') plain = false;
  return plain ? s : "(" + s + ")";
}

// [SECTION] TeX

class TexReader {
 public:
  explicit TexReader(std::string_view s) : s_(s) {}

  std::string sequence(bool in_group) {
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '}') {
        if (in_group) {
          ++i_;
          return out;
        }
        ++i_;  // a stray brace: dropped
        continue;
      }
      if (c == '^' || c == '_') {
        ++i_;
        out += script(atom(), c == '^');
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++i_;
        if (!out.empty() && out.back() != ' ' && out.back() != '(' && out.back() != '[') out += ' ';
        continue;
      }
      std::string a = atom();
      if (!a.empty() && (a[0] == ')' || a[0] == ']') && !out.empty() && out.back() == ' ')
        out.pop_back();
      out += a;
    }
    return out;
  }

 private:
  // One unit: a group, a command with its arguments, or one character.
  std::string atom() {
    skip_spaces();
    if (i_ >= s_.size()) return {};
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      return sequence(true);
    }
    if (c == '\\') return command();
    if (c == '-') {
      ++i_;
      return "−";
    }
    if (c == '~') {
      ++i_;
      return " ";
    }
    if (c == '\'') {
      ++i_;
      return "′";
    }
    // One UTF-8 code point as it is.
    const auto b = static_cast<unsigned char>(c);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 1;
    std::string cp(s_.substr(i_, n));
    i_ += n;
    return cp;
  }

  // An argument in braces (or one token), as text read verbatim (for \text) or as math.
  std::string verbatim_group() {
    skip_spaces();
    if (i_ < s_.size() && s_[i_] == '{') {
      ++i_;
      std::string out;
      int depth = 1;
      while (i_ < s_.size()) {
        const char c = s_[i_++];
        if (c == '{') ++depth;
        if (c == '}' && --depth == 0) break;
        out += c;
      }
      return out;
    }
    return atom();
  }

  std::string command() {
    ++i_;  // the backslash
    if (i_ >= s_.size()) return "\\";
    if (!std::isalpha(static_cast<unsigned char>(s_[i_]))) {
      const char c = s_[i_++];
      const std::string_view v = short_command(c);
      return v.empty() && c != '!' ? std::string(1, c) : std::string(v);
    }
    const size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    const std::string_view name = s_.substr(start, i_ - start);
    if (name == "frac" || name == "dfrac" || name == "tfrac") {
      const std::string num = atom(), den = atom();
      return operand(num) + "/" + operand(den);
    }
    if (name == "sqrt") {
      std::string index;
      skip_spaces();
      if (i_ < s_.size() && s_[i_] == '[') {
        const size_t close = s_.find(']', i_);
        if (close != std::string_view::npos) {
          index = TexReader(s_.substr(i_ + 1, close - i_ - 1)).sequence(false);
          i_ = close + 1;
        }
      }
      return (index.empty() ? "" : script(index, true)) + "√" + operand(atom());
    }
    if (is_font(name)) return verbatim_group_as(name);
    if (name == "mathbb" || name == "mathcal") {
      const std::string arg = verbatim_group();
      std::string out;
      for (char c : arg) {
        const std::string_view v = name == "mathbb" ? blackboard(c) : calligraphic(c);
        out += v.empty() ? std::string(1, c) : std::string(v);
      }
      return out;
    }
    if (const std::string_view mark = accent(name); !mark.empty()) {
      const std::string arg = atom();
      // The mark goes on each letter of a short argument (\bar{xy} -> x̄ȳ).
      std::string out;
      for (const auto& cp : code_points(arg)) out += cp + std::string(mark);
      return out;
    }
    if (is_ignored(name)) {
      skip_spaces();
      if (i_ < s_.size() && s_[i_] == '.') ++i_;  // \left. : no delimiter
      return {};
    }
    if (name == "begin" || name == "end") {
      (void)verbatim_group();  // the environment's name
      return name == "begin" ? "" : " ";
    }
    auto it = symbols().find(name);
    if (it == symbols().end()) return std::string(name);
    // A letter-like symbol ends its name with the space after it, as in TeX (\partial L is
    // ∂L); an operator or a function name keeps the writer's spacing (x \leq y, \log p).
    if (letter_like(name)) skip_spaces();
    return std::string(it->second);
  }

  // \text{a b}: spaces kept; \mathbf{x^2}: read as math.
  std::string verbatim_group_as(std::string_view name) {
    const std::string arg = verbatim_group();
    if (name.substr(0, 4) == "text" || name == "mbox" || name == "emph") return arg;
    return TexReader(arg).sequence(false);
  }

  void skip_spaces() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n')) ++i_;
  }

  std::string_view s_;
  size_t i_ = 0;
};

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t k = 0;
  while (k < s.size() && s[k] == ' ') ++k;
  return s.substr(k);
}

// [SECTION] Markdown

// Markdown's specials in ASCII, escaped so the math text is shown as it is.
std::string markdown_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c > 0 && c < 0x7f && std::ispunct(static_cast<unsigned char>(c))) out += '\\';
    out += c;
  }
  return out;
}

// The lines of md that are code (fenced blocks, the fences included).
std::vector<bool> code_lines(const std::vector<std::string_view>& lines) {
  std::vector<bool> code(lines.size(), false);
  std::string fence;
  bool prev_blank = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    size_t ind = 0;
    while (ind < l.size() && l[ind] == ' ') ++ind;
    const std::string_view body = l.substr(ind);
    if (!fence.empty()) {
      code[i] = true;
      if (body.substr(0, fence.size()) == fence) fence.clear();
      continue;
    }
    if (ind <= 3 && (body.substr(0, 3) == "```" || body.substr(0, 3) == "~~~")) {
      size_t n = 0;
      while (n < body.size() && body[n] == body[0]) ++n;
      fence = std::string(n, body[0]);
      code[i] = true;
      continue;
    }
    // An indented block starts after a blank line.
    const bool blank = body.empty();
    if (!blank && (ind >= 4 || (!l.empty() && l[0] == '\t')) && (prev_blank || (i && code[i - 1])))
      code[i] = true;
    prev_blank = blank;
  }
  return code;
}

}  // namespace

std::string tex_to_unicode(std::string_view tex) {
  return trim(TexReader(tex).sequence(false));
}

std::string markdown_math(std::string_view md) {
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t nl = md.find('\n', start);
    lines.push_back(md.substr(start, nl == std::string_view::npos ? nl : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  const std::vector<bool> code = code_lines(lines);
  std::string out;
  for (size_t li = 0; li < lines.size(); ++li) {
    if (li) out += '\n';
    const std::string_view l = lines[li];
    if (code[li]) {
      out += l;
      continue;
    }
    for (size_t i = 0; i < l.size();) {
      const char c = l[i];
      if (c == '\\' && i + 1 < l.size()) {  // an escaped character, $ too
        out += l.substr(i, 2);
        i += 2;
        continue;
      }
      if (c == '`') {  // a code span: copied up to the same run of backticks
        size_t n = 0;
        while (i + n < l.size() && l[i + n] == '`') ++n;
        const size_t close = l.find(std::string(n, '`'), i + n);
        const size_t end = close == std::string_view::npos ? i + n : close + n;
        out += l.substr(i, end - i);
        i = end;
        continue;
      }
      if (c == '$') {
        const bool display = i + 1 < l.size() && l[i + 1] == '$';
        const size_t open = i + (display ? 2 : 1);
        size_t close = std::string_view::npos;
        if (open < l.size() && l[open] != ' ') {
          for (size_t k = open; k < l.size(); ++k) {
            if (l[k] == '\\') {
              ++k;
              continue;
            }
            if (l[k] != '$') continue;
            if (display
                    ? (k + 1 < l.size() && l[k + 1] == '$')
                    : (l[k - 1] != ' ' &&
                       !(k + 1 < l.size() && std::isdigit(static_cast<unsigned char>(l[k + 1]))))) {
              close = k;
              break;
            }
            if (!display) break;  // a "$" that cannot close: no math here
          }
        }
        if (close != std::string_view::npos && close > open) {
          out += '*' + markdown_escape(tex_to_unicode(l.substr(open, close - open))) + '*';
          i = close + (display ? 2 : 1);
          continue;
        }
      }
      out += c;
      ++i;
    }
  }
  return out;
}

// [SECTION] HTML

std::string html_math(std::string_view html) {
  auto unescape = [](std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      bool done = false;
      for (auto [ent, ch] : {std::pair<std::string_view, char>{"&amp;", '&'},
                             {"&lt;", '<'},
                             {"&gt;", '>'},
                             {"&quot;", '"'}}) {
        if (s.substr(i, ent.size()) == ent) {
          out += ch;
          i += ent.size();
          done = true;
          break;
        }
      }
      if (!done) out += s[i++];
    }
    return out;
  };
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '&')
        out += "&amp;";
      else if (c == '<')
        out += "&lt;";
      else if (c == '>')
        out += "&gt;";
      else
        out += c;
    }
    return out;
  };
  std::string out;
  constexpr std::string_view open = "<x-equation", close = "</x-equation>";
  for (size_t i = 0;;) {
    const size_t a = html.find(open, i);
    if (a == std::string_view::npos) {
      out += html.substr(i);
      break;
    }
    const size_t gt = html.find('>', a);
    const size_t b = gt == std::string_view::npos ? gt : html.find(close, gt);
    if (b == std::string_view::npos) {
      out += html.substr(i);
      break;
    }
    out += html.substr(i, a - i);
    const bool display = html.substr(a, gt - a).find("display") != std::string_view::npos;
    const std::string text = escape(tex_to_unicode(unescape(html.substr(gt + 1, b - gt - 1))));
    out += display ? "<div class=\"math\">" + text + "</div>"
                   : "<span class=\"math\">" + text + "</span>";
    i = b + close.size();
  }
  return out;
}

}  // namespace mls::lua
