-- patterns: backtracking under the limits
print(string.find(string.rep('a', 60), string.rep('a*', 30) .. 'b'))
print(("x=1, y=2"):gsub("(%w+)=(%w+)", "%2=%1"), ("[a[b]]"):match("%b[]"), ("THE (quick)"):find("%f[%a]%a+"))
for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do print(k, v) end
print(pcall(string.gsub, "abc", "(", "x"), pcall(string.find, "abc", "[a"), ("abc"):gsub("", "-"))
