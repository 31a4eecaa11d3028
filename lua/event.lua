-- The events stream's entry, prepended to every script that writes or reads one (the Rust side:
-- src/pipeline/entry.rs). One field, `event`: the type, the order id, the user, the device,
-- the quantity, the time (ms, Redis's clock) and the Idempotency-Key, joined by the ASCII unit
-- separator (\31), which no id can hold (the shop refuses ids with control characters, and
-- keys that are not printable ASCII). One field rather than seven named ones: the consumer
-- reads three values an entry instead of fifteen. Entries written with the seven named fields
-- (`type`, `order`, `user`, `device`, `qty`, `at`, `key`) are still read.
local function event(kind, order, user, device, qty, at, key)
  return kind .. '\31' .. order .. '\31' .. user .. '\31' .. device .. '\31' .. qty .. '\31'
    .. at .. '\31' .. key
end
-- An entry's fields by name (`kv`: its field, value, field, value, ... list), either form.
local function event_fields(kv)
  local f = {}
  for i = 1, #kv, 2 do f[kv[i]] = kv[i + 1] end
  if f['event'] then
    local names = {'type', 'order', 'user', 'device', 'qty', 'at', 'key'}
    local n = 1
    for part in string.gmatch(f['event'] .. '\31', '([^\31]*)\31') do
      if names[n] then f[names[n]] = part end
      n = n + 1
    end
  end
  return f
end
