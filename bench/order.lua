-- wrk script: POST /api/orders with a unique buyer (and Idempotency-Key) per request.
--
--   BENCH_RUN=run1 BENCH_ITEM=1 wrk -t2 -c64 -d15s --latency -s bench/order.lua http://127.0.0.1:8080
--
-- Each thread numbers its own requests; users are "<run>-t<thread>-<n>", so runs and threads
-- never collide. At the end it prints one line per status code and p50/p99 in µs (wrk measures
-- from the actual send of each request on a connection: closed loop, so queueing before the send
-- is not counted, unlike oversell's own latency from the intended send time).

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  run = os.getenv("BENCH_RUN") or tostring(os.time())
  item = os.getenv("BENCH_ITEM") or "1"
  n = 0
  statuses = {}
end

function request()
  n = n + 1
  local user = string.format("%s-t%d-%d", run, tid, n)
  local body = string.format('{"item_id": %s, "user_id": "%s", "qty": 1}', item, user)
  return wrk.format("POST", "/api/orders", {
    ["Content-Type"] = "application/json",
    ["Idempotency-Key"] = user,
  }, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local counts = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for code, c in pairs(s) do
      counts[code] = (counts[code] or 0) + c
    end
  end
  for code, c in pairs(counts) do
    io.write(string.format("status %d: %d\n", code, c))
  end
  local secs = summary.duration / 1e6
  io.write(string.format("requests/s %.0f over %.2f s\n", summary.requests / secs, secs))
  io.write(string.format("latency p50 %d us, p99 %d us, max %d us\n",
    latency:percentile(50), latency:percentile(99), latency.max))
end
