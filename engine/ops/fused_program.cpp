// FusedProgram: the text form of fused_elementwise's expression, its parser and printer,
// and the mapping between instructions and the registry's elementwise ops.
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>

#include "engine/ops/fused.h"

namespace mls {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct CodeInfo {
  FusedCode code;
  std::string_view text;  // the name in a program
  std::string_view op;    // the registry op
  int operands, params;
};

// engine/ops/elementwise_list.h, in FusedCode order.
constexpr CodeInfo kCodes[] = {
#define MLS_CODE_INFO(Name, text, op, operands, params) \
  {FusedCode::Name, #text, #op, operands, params},
    MLS_ELEMENTWISE(MLS_CODE_INFO)
#undef MLS_CODE_INFO
};

// The attributes that an instruction's p0 and p1 stand for, and their defaults (kRequired:
// the op's attribute check demands it). An op whose attribute is absent from the graph gets
// the default, and gives it back to op_of only where it is finite (clamp's open bounds).
constexpr double kRequired = std::numeric_limits<double>::quiet_NaN();
struct ParamAttrs {
  FusedCode code;
  std::array<std::string_view, 2> names;
  std::array<double, 2> defaults;
};
constexpr ParamAttrs kParams[] = {
    {FusedCode::LeakyRelu, {"alpha", ""}, {0.01, 0.0}},
    {FusedCode::Softplus, {"beta", "threshold"}, {1.0, 20.0}},
    {FusedCode::Clamp, {"min", "max"}, {-kInf, kInf}},
    {FusedCode::Scale, {"alpha", ""}, {kRequired, 0.0}},
    {FusedCode::AddScalar, {"value", ""}, {kRequired, 0.0}},
    {FusedCode::ClampBackward, {"min", "max"}, {-kInf, kInf}},
};

// Codes that share their registry op with an earlier code, and the attribute value that
// selects them (a gelu with approximate = "tanh" is GeluTanh).
struct Variant {
  FusedCode code;
  std::string_view attr, value;
};
constexpr Variant kVariants[] = {
    {FusedCode::GeluTanh, "approximate", "tanh"},
    {FusedCode::GeluTanhBackward, "approximate", "tanh"},
};

constexpr const ParamAttrs* params_of(FusedCode c) {
  for (const ParamAttrs& p : kParams)
    if (p.code == c) return &p;
  return nullptr;
}

constexpr int named_params(FusedCode c) {
  const ParamAttrs* p = params_of(c);
  int n = 0;
  if (p)
    for (std::string_view name : p->names) n += name.empty() ? 0 : 1;
  return n;
}

constexpr const Variant* variant_of(FusedCode c) {
  for (const Variant& v : kVariants)
    if (v.code == c) return &v;
  return nullptr;
}

// Whether an earlier code stands for the same registry op.
constexpr bool shares_op(FusedCode c) {
  std::string_view op;
  for (const CodeInfo& i : kCodes)
    if (i.code == c) op = i.op;
  for (const CodeInfo& i : kCodes) {
    if (i.code == c) return false;
    if (i.op == op) return true;
  }
  return false;
}

// A list entry whose attributes or variant are not described above fails the build here,
// naming it: it would otherwise run with p0 = p1 = 0, or never be chosen.
#define MLS_CHECK_ENTRY(Name, text, op, operands, params)                                  \
  static_assert(named_params(FusedCode::Name) == (params),                                 \
                "engine/ops/fused_program.cpp: kParams must name the " #params             \
                " attribute(s) of elementwise op '" #text "'");                            \
  static_assert(shares_op(FusedCode::Name) == (variant_of(FusedCode::Name) != nullptr),    \
                "engine/ops/fused_program.cpp: '" #text "' shares registry op '" #op       \
                "' with another code: kVariants must say which attribute selects it (and " \
                "only such codes are variants)");
MLS_ELEMENTWISE(MLS_CHECK_ENTRY)
#undef MLS_CHECK_ENTRY

const CodeInfo* info_of(FusedCode c) {
  for (const CodeInfo& i : kCodes)
    if (i.code == c) return &i;
  return nullptr;
}

const CodeInfo* info_of_text(std::string_view name) {
  for (const CodeInfo& i : kCodes)
    if (name == i.text) return &i;
  return nullptr;
}

// The shortest text that reads back as the same double.
std::string number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Whether the attributes select this variant code.
bool selects(const Variant& v, const Attrs& a) {
  const AttrValue* value = a.find(std::string(v.attr));
  const std::string* s = value ? std::get_if<std::string>(value) : nullptr;
  return s && *s == v.value;
}

// [SECTION] Parser

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<FusedProgram> run() {
    while (true) {
      skip();
      // A binding "name=expr;" or the final expression.
      size_t save = pos_;
      std::string name = ident();
      skip();
      if (!name.empty() && pos_ < s_.size() && s_[pos_] == '=') {
        if (name[0] == 'x' || info_of_text(name) || name == "inf" || name == "nan")
          return fail("'" + name + "' cannot be bound");
        if (names_.count(name)) return fail("'" + name + "' is bound twice");
        ++pos_;
        auto e = expr();
        if (!e) return e.error();
        names_[name] = *e;
        skip();
        if (pos_ >= s_.size() || s_[pos_] != ';')
          return fail("expected ';' after the binding of " + name);
        ++pos_;
        continue;
      }
      pos_ = save;
      auto e = expr();
      if (!e) return e.error();
      skip();
      if (pos_ != s_.size()) return fail("unexpected text");
      return finish(*e);
    }
  }

 private:
  Error fail(const std::string& what) const {
    return make_error("program \"" + std::string(s_) + "\": " + what + " at " +
                      std::to_string(pos_));
  }
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  std::string ident() {
    size_t b = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
      if (pos_ == b && std::isdigit(static_cast<unsigned char>(s_[pos_]))) break;
      ++pos_;
    }
    return std::string(s_.substr(b, pos_ - b));
  }
  Result<double> num() {
    skip();
    double v = 0;
    auto r = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (r.ec != std::errc()) return fail("expected a number");
    pos_ = static_cast<size_t>(r.ptr - s_.data());
    return v;
  }
  int32_t push(FusedInstr in) {
    code_.push_back(in);
    return static_cast<int32_t>(code_.size() - 1);
  }

  // An expression: x<k>, a bound name, a number (a constant) or a call.
  Result<int32_t> expr() {
    skip();
    if (pos_ >= s_.size()) return fail("expected an expression");
    char c = s_[pos_];
    if (c == '-' || c == '+' || c == '.' || std::isdigit(static_cast<unsigned char>(c))) {
      auto v = num();
      if (!v) return v.error();
      return push({.code = FusedCode::Const, .p0 = *v});
    }
    size_t start = pos_;
    std::string name = ident();
    if (name.empty()) return fail("expected an expression");
    if (name == "inf" || name == "nan") {
      pos_ = start;
      auto v = num();
      if (!v) return v.error();
      return push({.code = FusedCode::Const, .p0 = *v});
    }
    if (name.size() > 1 && name[0] == 'x' &&
        name.find_first_not_of("0123456789", 1) == std::string::npos) {
      int k = std::stoi(name.substr(1));
      if (k > 255) return fail("input " + name + " is out of range");
      auto it = inputs_.find(k);
      if (it != inputs_.end()) return it->second;
      return inputs_[k] = push({.code = FusedCode::Input, .p0 = static_cast<double>(k)});
    }
    if (auto it = names_.find(name); it != names_.end()) return it->second;
    const CodeInfo* info = info_of_text(name);
    if (!info) return fail("unknown op '" + name + "'");
    skip();
    if (pos_ >= s_.size() || s_[pos_] != '(') return fail("expected '(' after " + name);
    ++pos_;
    FusedInstr in{.code = info->code};
    for (int k = 0; k < info->operands + info->params; ++k) {
      if (k > 0) {
        skip();
        if (pos_ >= s_.size() || s_[pos_] != ',')
          return fail(name + " takes " + std::to_string(info->operands) + " operands and " +
                      std::to_string(info->params) + " attributes");
        ++pos_;
      }
      if (k < info->operands) {
        auto e = expr();
        if (!e) return e.error();
        (k == 0 ? in.a : in.b) = *e;
      } else {
        auto v = num();
        if (!v) return v.error();
        (k == info->operands ? in.p0 : in.p1) = *v;
      }
    }
    skip();
    if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')' closing " + name);
    ++pos_;
    return push(in);
  }

  // Renumbers so that the inputs come first, in order, and the result last.
  Result<FusedProgram> finish(int32_t result) {
    if (code_[static_cast<size_t>(result)].code == FusedCode::Input ||
        code_[static_cast<size_t>(result)].code == FusedCode::Const)
      return fail("the program computes nothing");
    FusedProgram p;
    p.num_inputs = inputs_.empty() ? 0 : inputs_.rbegin()->first + 1;
    if (static_cast<int>(inputs_.size()) != p.num_inputs)
      for (int k = 0; k < p.num_inputs; ++k)
        if (!inputs_.count(k)) return fail("input x" + std::to_string(k) + " is not used");
    std::vector<int32_t> at(code_.size(), -1);
    for (int k = 0; k < p.num_inputs; ++k) {
      at[static_cast<size_t>(inputs_[k])] = k;
      p.code.push_back({.code = FusedCode::Input, .p0 = static_cast<double>(k)});
    }
    // Only what the result needs, in the order parsed (operands come first).
    std::vector<bool> need(code_.size(), false);
    need[static_cast<size_t>(result)] = true;
    for (size_t i = code_.size(); i-- > 0;)
      if (need[i]) {
        if (code_[i].a >= 0) need[static_cast<size_t>(code_[i].a)] = true;
        if (code_[i].b >= 0) need[static_cast<size_t>(code_[i].b)] = true;
      }
    for (size_t i = 0; i < code_.size(); ++i) {
      if (!need[i] || code_[i].code == FusedCode::Input) continue;
      FusedInstr in = code_[i];
      if (in.a >= 0) in.a = at[static_cast<size_t>(in.a)];
      if (in.b >= 0) in.b = at[static_cast<size_t>(in.b)];
      at[i] = static_cast<int32_t>(p.code.size());
      p.code.push_back(in);
    }
    for (int k = 0; k < p.num_inputs; ++k)
      if (!need[static_cast<size_t>(inputs_[k])])
        return fail("input x" + std::to_string(k) + " does not reach the result");
    return p;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::vector<FusedInstr> code_;
  std::map<int, int32_t> inputs_;
  std::map<std::string, int32_t> names_;
};

}  // namespace

int fused_operands(FusedCode c) {
  const CodeInfo* i = info_of(c);
  return i ? i->operands : 0;
}

Result<FusedProgram> FusedProgram::parse(std::string_view text) {
  return Parser(text).run();
}

std::string FusedProgram::to_text() const {
  std::vector<int> uses(code.size(), 0);
  for (const FusedInstr& in : code) {
    if (in.a >= 0) ++uses[static_cast<size_t>(in.a)];
    if (in.b >= 0) ++uses[static_cast<size_t>(in.b)];
  }
  std::vector<std::string> text(code.size());
  std::string out;
  int bound = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    const FusedInstr& in = code[i];
    if (in.code == FusedCode::Input) {
      text[i] = "x" + std::to_string(static_cast<int>(in.p0));
      continue;
    }
    if (in.code == FusedCode::Const) {
      text[i] = number(in.p0);
      continue;
    }
    const CodeInfo* info = info_of(in.code);
    std::string s = std::string(info->text) + "(" + text[static_cast<size_t>(in.a)];
    if (info->operands == 2) s += "," + text[static_cast<size_t>(in.b)];
    if (info->params >= 1) s += "," + number(in.p0);
    if (info->params == 2) s += "," + number(in.p1);
    s += ")";
    // A value used twice is bound, so the text stays a faithful DAG.
    if (uses[i] > 1 && i + 1 < code.size()) {
      std::string name = "t" + std::to_string(bound++);
      out += name + "=" + s + "; ";
      s = name;
    }
    text[i] = s;
  }
  return out + text.back();
}

std::optional<FusedInstr> FusedProgram::instr_of(std::string_view op, const Attrs& a) {
  const CodeInfo* info = nullptr;
  for (const CodeInfo& i : kCodes) {
    if (op != i.op) continue;
    const Variant* v = variant_of(i.code);
    if (!info && !v) info = &i;          // the op's own code
    if (v && selects(*v, a)) info = &i;  // a variant its attributes select
  }
  if (!info) return std::nullopt;
  FusedInstr in{.code = info->code};
  if (const ParamAttrs* p = params_of(info->code))
    for (size_t k = 0; k < p->names.size() && !p->names[k].empty(); ++k) {
      const std::string name(p->names[k]);
      (k == 0 ? in.p0 : in.p1) =
          std::isnan(p->defaults[k]) ? a.get_float(name) : a.get_float_or(name, p->defaults[k]);
    }
  return in;
}

std::pair<std::string, Attrs> FusedProgram::op_of(const FusedInstr& in) {
  const CodeInfo* info = info_of(in.code);
  MLS_CHECK(info != nullptr, "FusedProgram::op_of on an input or a constant");
  Attrs a;
  if (const Variant* v = variant_of(in.code)) a.set(std::string(v->attr), std::string(v->value));
  if (const ParamAttrs* p = params_of(in.code))
    for (size_t k = 0; k < p->names.size() && !p->names[k].empty(); ++k) {
      const double value = k == 0 ? in.p0 : in.p1;
      if (!std::isfinite(value) && value == p->defaults[k]) continue;  // an open clamp bound
      a.set(std::string(p->names[k]), value);
    }
  return {std::string(info->op), a};
}

}  // namespace mls
