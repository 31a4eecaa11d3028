-- wrk script: POST to the URL it is given (/api/orders) with its own buyer (user, device) and
-- Idempotency-Key per request.
-- The one order script: `oversell bench shop` and `bench generator` embed this file, and
-- bench/hot-row.sh runs it, so they all measure the same request.
--
--   wrk -t2 -c64 -d15s --latency -s bench/order.lua http://127.0.0.1:8080/api/orders -- run1 [item]
--
-- The run tag (first argument, else $BENCH_RUN, else the time) and wrk's thread number make every
-- buyer "u-<run>-<thread>-<n>", so runs and threads never collide; the item is the second
-- argument (else $BENCH_ITEM, else 1). At the end it prints `oversell-created: N` (the 201s,
-- summed over the threads: what `bench shop` reads), one line per status code and p50/p99 in µs
-- (wrk measures from the actual send of each request on a connection: closed loop, so queueing
-- before the send is not counted, unlike oversell's own latency from the intended send time).

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  local run = args[1] or os.getenv("BENCH_RUN") or tostring(os.time())
  item = args[2] or os.getenv("BENCH_ITEM") or "1"
  prefix = run .. "-" .. tid .. "-"
  n = 0
  created = 0
  statuses = {}
end

function request()
  n = n + 1
  local id = prefix .. n
  local body = '{"item_id":' .. item .. ',"qty":1,"user_id":"u-' .. id .. '","device_id":"d-' .. id .. '"}'
  -- nil: the path of the URL wrk was given (`bench shop` gives the route table's /api/orders).
  return wrk.format("POST", nil,
    {["Content-Type"] = "application/json", ["Idempotency-Key"] = "k-" .. id}, body)
end

function response(status, headers, body)
  if status == 201 then created = created + 1 end
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local c = 0
  local counts = {}
  for _, t in ipairs(threads) do
    c = c + t:get("created")
    for code, k in pairs(t:get("statuses")) do
      counts[code] = (counts[code] or 0) + k
    end
  end
  io.write(string.format("oversell-created: %d\n", c))
  for code, k in pairs(counts) do
    io.write(string.format("status %d: %d\n", code, k))
  end
  io.write(string.format("latency p50 %d us, p99 %d us, max %d us\n",
    latency:percentile(50), latency:percentile(99), latency.max))
end
