-- wrk -s scripts/lib/wrk-p999.lua --latency …: after wrk's own output, print
-- the 99.9 % latency (which wrk --latency leaves out) in the form of its
-- latency distribution lines, "  99.9%  1.23ms"; `idload wrk` reads it.
-- Only done() is defined, so wrk keeps its static request: no Lua runs
-- per request.
done = function(summary, latency, requests)
  local us = latency:percentile(99.9)
  local s
  if us >= 1000000 then
    s = string.format("%.2fs", us / 1000000)
  elseif us >= 1000 then
    s = string.format("%.2fms", us / 1000)
  else
    s = string.format("%.2fus", us)
  end
  io.write(string.format("  99.9%%  %s\n", s))
end
