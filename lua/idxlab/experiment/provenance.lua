-- idxlab.experiment.provenance: what a result row records about where it came from: the
-- library's version, the project's git commit and whether the tree was dirty, and the time.
local fs = require("idxlab.fs")
local binding = require("idxlab.ffi")

local M = {}

M.version = binding.ffi.string(binding.C.ixl_version())

-- The repository root: $IDXLAB_ROOT, else two levels above lua/idxlab/.
function M.repo_root()
  local r = os.getenv("IDXLAB_ROOT")
  if r and r ~= "" then return r end
  local src = debug.getinfo(1, "S").source
  src = src:sub(1, 1) == "@" and src:sub(2) or src
  local dir = src:match("^(.*)/[^/]*$") or "."
  return dir .. "/../../.."
end

-- { commit = hex or "unknown", dirty = true/false (nil when unknown) }, asked once a process.
local git_cache
function M.git_info()
  if git_cache then return git_cache end
  local root = fs.shell_quote(M.repo_root())
  local f = io.popen("git -C " .. root .. " rev-parse HEAD 2>/dev/null")
  local commit = f and f:read("*l") or nil
  if f then f:close() end
  local info = { commit = "unknown", dirty = nil }
  if commit and commit:match("^%x+$") and #commit >= 40 then
    info.commit = commit
    local g = io.popen("git -C " .. root .. " status --porcelain --untracked-files=no 2>/dev/null")
    local text = g and g:read("*a") or ""
    if g then g:close() end
    info.dirty = text:match("%S") ~= nil
  end
  git_cache = info
  return info
end

function M.utc_now() return os.date("!%Y-%m-%dT%H:%M:%SZ") end

return M
