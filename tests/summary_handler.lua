-- summary_handler.lua: busted's terminal output, plus one closing line
-- "busted: N passed, N failed, N skipped" that scripts/run_tests.sh adds to the C counts.
return function(options)
  local busted = require("busted")
  local handler = require("busted.outputHandlers.utfTerminal")(options)
  busted.subscribe({ "suite", "end" }, function()
    local failed = handler.failuresCount + handler.errorsCount
    print(("busted: %d passed, %d failed, %d skipped"):format(handler.successesCount, failed,
      handler.pendingsCount))
    io.stdout:flush()
    return nil, true
  end)
  return handler
end
