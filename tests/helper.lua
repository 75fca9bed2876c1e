-- Loaded once by busted before any spec (--helper): loads the FFI binding before busted's
-- insulation starts, so cdefs and metatypes are made exactly once per process.
require("idxlab")
