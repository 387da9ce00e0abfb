# Writes the Lua file IN as a C++ raw string constant NAME into OUT.
file(READ ${IN} content)
file(WRITE ${OUT} "// Generated from ${IN}; edit that file.\nnamespace mls::lua {\nextern const char* const ${NAME};\nconst char* const ${NAME} = R\"mlslua(${content})mlslua\";\n}\n")
