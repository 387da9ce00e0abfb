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
  const char* text;  // the name in a program
  const char* op;    // the registry op
  int operands, params;
};

constexpr CodeInfo kCodes[] = {
    {FusedCode::Neg, "neg", "neg", 1, 0},
    {FusedCode::Abs, "abs", "abs", 1, 0},
    {FusedCode::Exp, "exp", "exp", 1, 0},
    {FusedCode::Log, "log", "log", 1, 0},
    {FusedCode::Sqrt, "sqrt", "sqrt", 1, 0},
    {FusedCode::Rsqrt, "rsqrt", "rsqrt", 1, 0},
    {FusedCode::Tanh, "tanh", "tanh", 1, 0},
    {FusedCode::Sigmoid, "sigmoid", "sigmoid", 1, 0},
    {FusedCode::Relu, "relu", "relu", 1, 0},
    {FusedCode::Silu, "silu", "silu", 1, 0},
    {FusedCode::Gelu, "gelu", "gelu", 1, 0},
    {FusedCode::GeluTanh, "gelu_tanh", "gelu", 1, 0},
    {FusedCode::LeakyRelu, "leaky_relu", "leaky_relu", 1, 1},
    {FusedCode::Softplus, "softplus", "softplus", 1, 2},
    {FusedCode::Clamp, "clamp", "clamp", 1, 2},
    {FusedCode::Scale, "scale", "scale", 1, 1},
    {FusedCode::AddScalar, "add_scalar", "add_scalar", 1, 1},
    {FusedCode::Add, "add", "add", 2, 0},
    {FusedCode::Sub, "sub", "sub", 2, 0},
    {FusedCode::Mul, "mul", "mul", 2, 0},
    {FusedCode::Div, "div", "div", 2, 0},
    {FusedCode::Maximum, "maximum", "maximum", 2, 0},
    {FusedCode::Minimum, "minimum", "minimum", 2, 0},
    {FusedCode::Pow, "pow", "pow", 2, 0},
    {FusedCode::ReluBackward, "relu_backward", "relu_backward", 2, 0},
    {FusedCode::GeluBackward, "gelu_backward", "gelu_backward", 2, 0},
    {FusedCode::GeluTanhBackward, "gelu_tanh_backward", "gelu_backward", 2, 0},
    {FusedCode::ClampBackward, "clamp_backward", "clamp_backward", 2, 2},
};

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

bool is_tanh_form(const Attrs& a) {
  const AttrValue* v = a.find("approximate");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  return s && *s == "tanh";
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
        if (pos_ >= s_.size() || s_[pos_] != ';') return fail("expected ';' after the binding of " + name);
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
    return make_error("program \"" + std::string(s_) + "\": " + what + " at " + std::to_string(pos_));
  }
  void skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  std::string ident() {
    size_t b = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
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

Result<FusedProgram> FusedProgram::parse(std::string_view text) { return Parser(text).run(); }

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
  for (const CodeInfo& i : kCodes)
    if (op == i.op) {
      info = &i;
      break;
    }
  if (!info) return std::nullopt;
  FusedInstr in{.code = info->code};
  switch (info->code) {
    case FusedCode::Gelu:
      if (is_tanh_form(a)) in.code = FusedCode::GeluTanh;
      break;
    case FusedCode::GeluBackward:
      if (is_tanh_form(a)) in.code = FusedCode::GeluTanhBackward;
      break;
    case FusedCode::LeakyRelu:
      in.p0 = a.get_float_or("alpha", 0.01);
      break;
    case FusedCode::Softplus:
      in.p0 = a.get_float_or("beta", 1.0);
      in.p1 = a.get_float_or("threshold", 20.0);
      break;
    case FusedCode::Clamp:
    case FusedCode::ClampBackward:
      in.p0 = a.get_float_or("min", -kInf);
      in.p1 = a.get_float_or("max", kInf);
      break;
    case FusedCode::Scale:
      in.p0 = a.get_float("alpha");
      break;
    case FusedCode::AddScalar:
      in.p0 = a.get_float("value");
      break;
    default:
      break;
  }
  return in;
}

std::pair<std::string, Attrs> FusedProgram::op_of(const FusedInstr& in) {
  const CodeInfo* info = info_of(in.code);
  MLS_CHECK(info != nullptr, "FusedProgram::op_of on an input or a constant");
  Attrs a;
  switch (in.code) {
    case FusedCode::GeluTanh:
    case FusedCode::GeluTanhBackward:
      a.set("approximate", std::string("tanh"));
      break;
    case FusedCode::LeakyRelu:
    case FusedCode::Scale:
      a.set("alpha", in.p0);
      break;
    case FusedCode::Softplus:
      a.set("beta", in.p0);
      a.set("threshold", in.p1);
      break;
    case FusedCode::Clamp:
    case FusedCode::ClampBackward:
      if (std::isfinite(in.p0)) a.set("min", in.p0);
      if (std::isfinite(in.p1)) a.set("max", in.p1);
      break;
    case FusedCode::AddScalar:
      a.set("value", in.p0);
      break;
    default:
      break;
  }
  return {info->op, a};
}

}  // namespace mls
