-- `idxlab script FILE [key=value ...]`: runs a script file -- a benchmark or the soak run --
-- with idxlab on the module path. Such a file returns a table with main(opts); the key=value
-- arguments become opts (numbers where they parse as numbers). Experiment files, which are
-- plain data, go through `idxlab run` instead. Failures raise; bin/idxlab prints them.
local errors = require("idxlab.errors")

local fail = errors.fail

return function(argv)
  local file = argv[1]
  if not file then fail("usage: idxlab script FILE.lua [key=value ...]") end
  local chunk, err = loadfile(file)
  if not chunk then fail(tostring(err)) end
  local opts = {}
  for i = 2, #argv do
    local k, v = argv[i]:match("^([%w_]+)=(.*)$")
    if not k then fail("script argument %q: expected key=value", argv[i]) end
    opts[k] = tonumber(v) or (v == "true" and true) or (v == "false" and false) or v
  end
  rawset(_G, "IDXLAB_SCRIPT", true) -- files that run themselves under plain luajit stay quiet
  local mod = chunk()
  if type(mod) ~= "table" or type(mod.main) ~= "function" then
    fail("%s does not return a table with main(opts); experiment files run with `idxlab run`",
      file)
  end
  mod.main(opts)
  return 0
end
