 -- run through load() with the mode the second byte picks and an environment
print(load("return 1", "x", {}))
print(pcall(load, "return 1", "x", {}))
print(load(string.dump(function() end), "x", "b"))
print(load("return 1", "x", "t", {})())
print(loadfile("x.lua", "bt", {}))
x = 1
