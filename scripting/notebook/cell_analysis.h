// What a Lua cell reads and defines, found by the Lua compiler itself: the cell is compiled
// (luaL_loadbufferx), dumped as a Lua 5.4 binary chunk with its debug information, and the
// chunk's bytecode is read here. A global read is a GETTABUP on the upvalue named _ENV with a
// string constant key, a write is a SETTABUP likewise; the functions a cell defines count as
// the cell (a function that reads x makes its cell read x). Never a regular expression.
//
//   Result<CellSymbols> s = analyse_cell("y = x * 2\nlocal t = mls.project.current()", "=cell b");
//   s->reads == {"mls", "x"}; s->writes == {"y"}; s->reads_project == true;
//
// A syntax error is Lua's own message ("cell b:3: unexpected symbol near 'x'").
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace mls::lua {

struct CellSymbols {
  std::set<std::string> reads;   // globals read that the cell does not itself define
  std::set<std::string> writes;  // globals assigned
  bool reads_project = false;    // mls.project (the model graph) is read
  bool operator==(const CellSymbols&) const = default;
};

// A cell that ends in a bare expression (`m`, `x * 2`) shows it, as a notebook shows its last
// expression: such a source does not compile, and with "return " before its last line of code
// it does. analyse_cell analyses that form then, and says so in `returns_last` (when given);
// the meaning of a source that compiles as it is never changes (`m:sum()` is a call).
Result<CellSymbols> analyse_cell(std::string_view source, const std::string& chunkname,
                                 bool* returns_last = nullptr);
// Where the last line of code starts (comments and blank lines skipped); npos: none.
size_t last_code_line(std::string_view source);
// The source with "return " before its last line of code ("" when it has none).
std::string with_last_line_returned(std::string_view source);

// A decoded Lua 5.4 function prototype (the parts the analysis uses, and the rest of what the
// dump holds, so that a nested prototype's place in the chunk is found).
struct LuaProto {
  std::string source;
  int line_defined = 0, last_line_defined = 0;
  int num_params = 0, is_vararg = 0, max_stack = 0;
  std::vector<uint32_t> code;
  struct Constant {
    int tag = 0;  // Lua's variant tag: 0 nil, 1 false, 17 true, 3 int, 19 float, 4/20 string
    std::string str;
    int64_t i = 0;
    double n = 0;
  };
  std::vector<Constant> constants;
  struct Upvalue {
    int instack = 0, idx = 0, kind = 0;
    std::string name;  // from the debug information
  };
  std::vector<Upvalue> upvalues;
  std::vector<LuaProto> protos;
  std::vector<int8_t> line_info;
  std::vector<std::pair<int, int>> abs_line_info;  // pc, line
  struct LocVar {
    std::string name;
    int start_pc = 0, end_pc = 0;
  };
  std::vector<LocVar> locvars;
};

// The main function of a Lua 5.4 binary chunk (as lua_dump writes it, strip = 0).
Result<LuaProto> decode_lua_chunk(std::string_view chunk);

// Lua 5.4's opcodes the analysis reads (lopcodes.h order).
inline constexpr int kOpMove = 0;
inline constexpr int kOpLoadNil = 8;
inline constexpr int kOpGetTabUp = 11;
inline constexpr int kOpGetField = 14;
inline constexpr int kOpSetTabUp = 15;
inline constexpr int kOpSelf = 20;
inline constexpr int kOpCall = 68;
inline constexpr int kOpClosure = 79;
inline constexpr int kOpVararg = 80;

}  // namespace mls::lua
