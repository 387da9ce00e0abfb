// [SECTION] chunk decoding   the Lua 5.4 binary chunk (ldump.c's format)
// [SECTION] analysis         global reads and writes from the bytecode
#include "scripting/notebook/cell_analysis.h"

#include <bitset>
#include <cstring>
#include <memory>

#include <lua.hpp>

namespace mls::lua {

// [SECTION] chunk decoding

namespace {

class ChunkReader {
 public:
  explicit ChunkReader(std::string_view s) : s_(s) {}
  bool failed() const { return failed_; }
  uint8_t byte() {
    if (pos_ >= s_.size()) {
      failed_ = true;
      return 0;
    }
    return static_cast<uint8_t>(s_[pos_++]);
  }
  std::string_view bytes(size_t n) {
    if (n > s_.size() - pos_) {
      failed_ = true;
      pos_ = s_.size();
      return {};
    }
    std::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  // ldump.c's dumpSize: 7 bits a byte, most significant first, the last byte marked 0x80.
  size_t size() {
    size_t x = 0;
    for (int i = 0; i < 10; ++i) {
      const uint8_t b = byte();
      if (failed_) return 0;
      x = (x << 7) | (b & 0x7f);
      if (b & 0x80) return x;
    }
    failed_ = true;
    return 0;
  }
  int integer() { return static_cast<int>(size()); }
  std::string string() {
    const size_t n = size();
    if (n == 0) return {};
    return std::string(bytes(n - 1));
  }
  template <typename T>
  T raw() {
    std::string_view b = bytes(sizeof(T));
    T v{};
    if (!failed_) std::memcpy(&v, b.data(), sizeof(T));
    return v;
  }
  // A count the rest of the chunk could hold (a corrupt count fails, it does not allocate).
  size_t count(size_t min_each) {
    const size_t n = size();
    if (min_each > 0 && n > (s_.size() - pos_) / min_each) failed_ = true;
    return failed_ ? 0 : n;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  bool failed_ = false;
};

void read_function(ChunkReader& r, LuaProto& f, const std::string& parent_source, int depth) {
  if (depth > 200) {
    r.bytes(SIZE_MAX);  // fails
    return;
  }
  f.source = r.string();
  if (f.source.empty()) f.source = parent_source;
  f.line_defined = r.integer();
  f.last_line_defined = r.integer();
  f.num_params = r.byte();
  f.is_vararg = r.byte();
  f.max_stack = r.byte();
  const size_t ncode = r.count(4);
  f.code.reserve(ncode);
  for (size_t i = 0; i < ncode && !r.failed(); ++i) f.code.push_back(r.raw<uint32_t>());
  const size_t nk = r.count(1);
  for (size_t i = 0; i < nk && !r.failed(); ++i) {
    LuaProto::Constant k;
    k.tag = r.byte();
    switch (k.tag) {
      case 0x00:  // nil
      case 0x01:  // false
      case 0x11:  // true
        break;
      case 0x03:
        k.i = r.raw<int64_t>();
        break;
      case 0x13:
        k.n = r.raw<double>();
        break;
      case 0x04:
      case 0x14:
        k.str = r.string();
        break;
      default:
        r.bytes(SIZE_MAX);
        break;  // an unknown constant type: fail
    }
    f.constants.push_back(std::move(k));
  }
  const size_t nup = r.count(3);
  f.upvalues.resize(nup);
  for (auto& u : f.upvalues) {
    u.instack = r.byte();
    u.idx = r.byte();
    u.kind = r.byte();
  }
  const size_t np = r.count(1);
  for (size_t i = 0; i < np && !r.failed(); ++i) {
    f.protos.emplace_back();
    read_function(r, f.protos.back(), f.source, depth + 1);
  }
  const size_t nline = r.count(1);
  for (size_t i = 0; i < nline && !r.failed(); ++i)
    f.line_info.push_back(static_cast<int8_t>(r.byte()));
  const size_t nabs = r.count(2);
  for (size_t i = 0; i < nabs && !r.failed(); ++i) {
    const int pc = r.integer();
    f.abs_line_info.emplace_back(pc, r.integer());
  }
  const size_t nloc = r.count(3);
  for (size_t i = 0; i < nloc && !r.failed(); ++i) {
    LuaProto::LocVar v;
    v.name = r.string();
    v.start_pc = r.integer();
    v.end_pc = r.integer();
    f.locvars.push_back(std::move(v));
  }
  const size_t nupn = r.count(1);
  for (size_t i = 0; i < nupn && !r.failed(); ++i) {
    std::string name = r.string();
    if (i < f.upvalues.size()) f.upvalues[i].name = std::move(name);
  }
}

}  // namespace

Result<LuaProto> decode_lua_chunk(std::string_view chunk) {
  ChunkReader r(chunk);
  if (r.bytes(4) != std::string_view("\x1bLua", 4)) return Error{"not a Lua binary chunk"};
  const uint8_t version = r.byte();
  if (version != 0x54)
    return Error{"a Lua binary chunk of version " + std::to_string(version >> 4) + "." +
                 std::to_string(version & 0xf) + ": the cell analysis reads Lua 5.4's only"};
  if (r.byte() != 0) return Error{"a Lua 5.4 binary chunk in a non-official format"};
  if (r.bytes(6) != std::string_view("\x19\x93\r\n\x1a\n", 6))
    return Error{"a corrupt Lua binary chunk (its header's check bytes)"};
  if (r.byte() != 4 || r.byte() != 8 || r.byte() != 8)
    return Error{
        "a Lua 5.4 binary chunk with other sizes than 4-byte instructions and 8-byte numbers"};
  if (r.raw<int64_t>() != 0x5678 || r.raw<double>() != 370.5)
    return Error{"a Lua 5.4 binary chunk of another byte order or number format"};
  r.byte();  // the main closure's upvalue count
  LuaProto main;
  read_function(r, main, "", 0);
  if (r.failed()) return Error{"a truncated or corrupt Lua 5.4 binary chunk"};
  return main;
}

// [SECTION] analysis

namespace {

int op_of(uint32_t i) {
  return static_cast<int>(i & 0x7f);
}
int arg_a(uint32_t i) {
  return static_cast<int>((i >> 7) & 0xff);
}
int arg_b(uint32_t i) {
  return static_cast<int>((i >> 16) & 0xff);
}
int arg_c(uint32_t i) {
  return static_cast<int>((i >> 24) & 0xff);
}

const std::string* string_constant(const LuaProto& f, int k) {
  if (k < 0 || static_cast<size_t>(k) >= f.constants.size()) return nullptr;
  const auto& c = f.constants[static_cast<size_t>(k)];
  return (c.tag == 0x04 || c.tag == 0x14) ? &c.str : nullptr;
}

// Which upvalues of `f` are the chunk's own _ENV, the global table: in the main function the
// upvalue named _ENV; in a nested one an upvalue taken from such an upvalue of its parent
// (instack = 0). One taken from a parent's local (a `local _ENV = ...`) is not.
std::vector<char> global_env(const LuaProto& f, const std::vector<char>* parent) {
  std::vector<char> env(f.upvalues.size(), 0);
  for (size_t u = 0; u < f.upvalues.size(); ++u) {
    const auto& up = f.upvalues[u];
    if (!parent)
      env[u] = up.name == "_ENV";
    else
      env[u] = !up.instack && static_cast<size_t>(up.idx) < parent->size() &&
               (*parent)[static_cast<size_t>(up.idx)];
  }
  return env;
}

bool is_env(const std::vector<char>& env, int up) {
  return up >= 0 && static_cast<size_t>(up) < env.size() && env[static_cast<size_t>(up)];
}

// The registers that hold the global `mls` (a GETTABUP "mls", or a MOVE of such a register)
// are followed along the code, so that `mls.project` is told from `mls.data.project` (whose
// second GETFIELD reads a register the first one overwrote). Straight-line: a register is
// forgotten when an instruction writes it; jumps are not followed.
void collect(const LuaProto& f, const std::vector<char>* parent_env, std::set<std::string>& reads,
             CellSymbols& s) {
  const std::vector<char> env = global_env(f, parent_env);
  std::bitset<256> holds_mls;
  auto forget_from = [&](int a) {
    for (int r = a; r < 256; ++r) holds_mls.reset(static_cast<size_t>(r));
  };
  for (uint32_t ins : f.code) {
    const int op = op_of(ins), a = arg_a(ins), b = arg_b(ins);
    const auto ra = static_cast<size_t>(a);
    if (op == kOpGetTabUp) {
      const std::string* name = is_env(env, b) ? string_constant(f, arg_c(ins)) : nullptr;
      if (name) reads.insert(*name);
      holds_mls.set(ra, name && *name == "mls");
    } else if (op == kOpSetTabUp) {
      if (!is_env(env, a)) continue;
      if (const std::string* name = string_constant(f, b)) s.writes.insert(*name);
    } else if (op == kOpGetField) {
      const std::string* key = string_constant(f, arg_c(ins));
      if (holds_mls.test(static_cast<size_t>(b)) && key && *key == "project")
        s.reads_project = true;
      holds_mls.reset(ra);
    } else if (op == kOpMove) {
      holds_mls.set(ra, holds_mls.test(static_cast<size_t>(b)));
    } else if (op == kOpLoadNil) {
      for (int r = a; r <= a + b && r < 256; ++r) holds_mls.reset(static_cast<size_t>(r));
    } else if (op == kOpSelf) {
      holds_mls.reset(ra);
      if (a + 1 < 256) holds_mls.reset(ra + 1);
    } else if (op == kOpCall || op == kOpVararg) {
      forget_from(a);
    } else if ((op >= 1 && op <= 9) || op == 12 || op == 13 || op == 19 || (op >= 21 && op <= 45) ||
               (op >= 49 && op <= 53) || op == kOpClosure) {
      holds_mls.reset(ra);  // these write R[A] (lopcodes.h)
    }
  }
  for (const LuaProto& p : f.protos) collect(p, &env, reads, s);
}

int dump_writer(lua_State*, const void* p, size_t sz, void* ud) {
  static_cast<std::string*>(ud)->append(static_cast<const char*>(p), sz);
  return 0;
}

}  // namespace

size_t last_code_line(std::string_view source) {
  size_t end = source.size();
  while (end > 0) {
    const size_t nl = source.rfind('\n', end - 1);
    const size_t start = nl == std::string_view::npos ? 0 : nl + 1;
    const size_t code = source.find_first_not_of(" \t\r", start);
    if (code < end && source.substr(code, 2) != "--") return code;
    end = start == 0 ? 0 : start - 1;
  }
  return std::string_view::npos;
}

std::string with_last_line_returned(std::string_view source) {
  const size_t at = last_code_line(source);
  if (at == std::string_view::npos) return {};
  return std::string(source.substr(0, at)) + "return " + std::string(source.substr(at));
}

namespace {

Result<CellSymbols> analyse_chunk(std::string_view source, const std::string& chunkname) {
  // A bare state: the compiler only (no libraries, nothing runs).
  std::unique_ptr<lua_State, decltype(&lua_close)> state(luaL_newstate(), &lua_close);
  if (!state) return Error{chunkname + ": no memory for the cell analysis"};
  lua_State* L = state.get();
  std::string chunk;
  std::string error;
  if (luaL_loadbufferx(L, source.data(), source.size(), chunkname.c_str(), "t") != LUA_OK)
    error = lua_tostring(L, -1) ? lua_tostring(L, -1) : "syntax error";
  else
    lua_dump(L, dump_writer, &chunk, 0);
  if (!error.empty()) return Error{error};
  Result<LuaProto> main = decode_lua_chunk(chunk);
  if (!main) return Error{chunkname + ": " + main.error().message};
  CellSymbols s;
  std::set<std::string> reads;
  collect(*main, nullptr, reads, s);
  for (const std::string& r : reads)
    if (!s.writes.count(r)) s.reads.insert(r);
  return s;
}

}  // namespace

Result<CellSymbols> analyse_cell(std::string_view source, const std::string& chunkname,
                                 bool* returns_last) {
  if (returns_last) *returns_last = false;
  Result<CellSymbols> r = analyse_chunk(source, chunkname);
  if (r) return r;
  // The source's own error stands unless returning its last line makes it compile.
  const std::string alt = with_last_line_returned(source);
  if (alt.empty()) return r;
  Result<CellSymbols> r2 = analyse_chunk(alt, chunkname);
  if (!r2) return r;
  if (returns_last) *returns_last = true;
  return r2;
}

}  // namespace mls::lua
