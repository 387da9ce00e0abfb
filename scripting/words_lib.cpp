// mls.sample_words: new words from a character-level model written in Lua, drawn by the one
// sampler `mlstudio --run` uses for a words project (runner/word_samples.h). The model is
// called eagerly, without gradients, on a batch of `count` contexts [count, block_size] of
// token ids (as numbers, the way the "words" dataset feeds them) and gives logits [count, 27].
//
//   local words = mls.sample_words(model, {block_size = 16, count = 10, seed = 7})
//   print(table.concat(words, " "))
#include "runner/word_samples.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

// mls.sample_words(model, {block_size = 16, count = 10, max_length = 32, seed = <script seed>}).
int l_sample_words(lua_State* L) {
  if (!lua_isfunction(L, 1) && !lua_istable(L, 1))
    return luaL_argerror(L, 1, "a model (an mls.nn module or a function of the contexts)");
  Runtime& rt = runtime(L);
  runner::WordSampling o;
  o.block_size = opt_integer(L, 2, "block_size", o.block_size);
  o.count = opt_integer(L, 2, "count", o.count);
  o.max_length = opt_integer(L, 2, "max_length", o.max_length);
  o.seed = static_cast<uint64_t>(opt_integer(L, 2, "seed", static_cast<int64_t>(rt.seed)));
  if (o.count > 4096) return luaL_argerror(L, 2, "count: at most 4096 words at once");
  if (o.block_size > 1024) return luaL_argerror(L, 2, "block_size: at most 1024");
  const bool saved = rt.grad_enabled;
  rt.grad_enabled = false;
  bool ok = true;
  {
    std::string model_error;
    auto model = [&](const HostBatch& b) -> Result<std::vector<float>> {
      lua_pushcfunction(L, traceback_handler);
      const int handler = lua_gettop(L);
      lua_pushvalue(L, 1);
      push_value(L, Tensor::from_f32(rt.backend, {b.size, o.block_size}, b.x, AllocTag::Input));
      if (lua_pcall(L, 1, 1, handler) != LUA_OK) {
        std::string msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "an error object";
        lua_settop(L, handler - 1);
        return make_error("the model failed: " + msg);
      }
      LuaTensor* y = to_tensor(L, -1);
      if (y == nullptr || y->trace_id != 0 || !y->value.defined()) {
        lua_settop(L, handler - 1);
        return make_error("the model must return a tensor of logits [count, 27]");
      }
      std::vector<float> v = y->value.to_f32();
      lua_settop(L, handler - 1);
      return v;
    };
    auto words = runner::sample_words(model, o);
    if (!words) {
      rt.error = "mls.sample_words: " + words.error().message;
      ok = false;
    } else {
      lua_createtable(L, static_cast<int>(words->size()), 0);
      for (size_t i = 0; i < words->size(); ++i) {
        lua_pushstring(L, (*words)[i].c_str());
        lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
      }
    }
  }
  rt.grad_enabled = saved;
  return ok ? 1 : raise(L);
}

const luaL_Reg kWordsFuncs[] = {{"sample_words", l_sample_words}, {nullptr, nullptr}};

}  // namespace

void open_words_lib(lua_State* L) {
  set_funcs(L, kWordsFuncs);
}

}  // namespace mls::lua
