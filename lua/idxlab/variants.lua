-- idxlab.variants: the kernel variant registry from Lua (kernels/variants.c).
--
-- Each op family ("logits", "select", "index", "formats", "gen") has named variants: "ref"
-- and "fast" on the CPU, "v1", "v2", ... on CUDA. An op runs the context's pin for its family,
-- or by default the best variant that runs on the machine and supports the problem.
--   variants.families()           -> {"logits", "select", "index", "formats", "gen"}
--   variants.list(family)         -> { {name=, backend="cpu"|"cuda", min_sm=, about=}, ... }
--   variants.set(ctx, family, nm) -- pin (nil or "" = back to the default)
--   variants.get(ctx, family)     -> the pinned name, or nil
--   variants.ran(ctx, family)     -> the variant the context's last op of the family ran, or
--                                    nil: the result row's `variant.<family>` value
--   variants.fuses(family, name)  -> the stages that variant fuses into another, as a set
--                                    ({remap = true} for select v2; {} for none or no such
--                                    variant): SPEC 6's `fused`
-- ctx is a Context (idxlab.context) or its ixl_ctx cdata. Every failure raises an idxlab
-- error (idxlab.errors); the library's refusals keep its message.
local core = require("idxlab.ffi")
local errors = require("idxlab.errors")

local ffi, C = core.ffi, core.C

local M = {}

local FAMILIES = { "logits", "select", "index", "formats", "gen" }

function M.families()
  local out = {}
  for i, f in ipairs(FAMILIES) do out[i] = f end
  return out
end

local function need_family(family, fn)
  if type(family) ~= "string" or C.ixl_variant_count(family) < 0 then
    errors.fail("variants.%s: family = %s: must be one of %s", fn, tostring(family),
      table.concat(FAMILIES, ", "))
  end
end

local function ctx_of(ctx, fn)
  if type(ctx) == "table" and ctx.cd ~= nil then return ctx.cd end
  if type(ctx) == "cdata" and ffi.istype("ixl_ctx *", ctx) and ctx ~= nil then return ctx end
  errors.fail("variants.%s: ctx must be a Context, got %s", fn, type(ctx))
end

local function str_or_nil(p)
  if p == nil then return nil end
  local s = ffi.string(p)
  return s ~= "" and s or nil
end

function M.list(family)
  need_family(family, "list")
  local out = {}
  for i = 0, C.ixl_variant_count(family) - 1 do
    out[#out + 1] = {
      name = ffi.string(C.ixl_variant_name(family, i)),
      backend = ffi.string(C.ixl_variant_backend(family, i)),
      min_sm = tonumber(C.ixl_variant_min_sm(family, i)),
      about = ffi.string(C.ixl_variant_about(family, i)),
    }
  end
  return out
end

local fuses_of = {} -- family .. "/" .. name -> set: the registry is fixed, so asked once
function M.fuses(family, name)
  need_family(family, "fuses")
  local key = family .. "/" .. tostring(name)
  if fuses_of[key] then return fuses_of[key] end
  local set = {}
  for i = 0, C.ixl_variant_count(family) - 1 do
    if ffi.string(C.ixl_variant_name(family, i)) == name then
      for stage in ffi.string(C.ixl_variant_fuses(family, i)):gmatch("[^,]+") do
        set[stage] = true
      end
    end
  end
  fuses_of[key] = set
  return set
end

function M.set(ctx, family, name)
  local cd = ctx_of(ctx, "set")
  need_family(family, "set")
  if name ~= nil and type(name) ~= "string" then
    errors.fail("variants.set: name = %s: must be a string (or nil for the default)",
      tostring(name))
  end
  core.check(cd, C.ixl_ctx_set_variant(cd, family, name))
end

function M.get(ctx, family)
  local cd = ctx_of(ctx, "get")
  need_family(family, "get")
  return str_or_nil(C.ixl_ctx_variant(cd, family))
end

function M.ran(ctx, family)
  local cd = ctx_of(ctx, "ran")
  need_family(family, "ran")
  return str_or_nil(C.ixl_ctx_variant_ran(cd, family))
end

return errors.wrap(M)
