---------------------------------------------------------------------------------------------
-- Statistics: `ql:s:<wait|run>:<day>:<queue>` hashes hold a streaming count, mean and
-- variance term (Welford's method: total, mean, vk) and a histogram (s0..s59 seconds, m1..m59
-- minutes, h1..h23 hours, d<n> days); `ql:s:stats:<day>:<queue>` counts failures, failed and
-- retries. The arithmetic is done in qless-core's order so both scripts store the same values.
---------------------------------------------------------------------------------------------

-- The histogram fields `stats` reports, in order (built when needed: the whole script runs on
-- every call).
local function histogram_fields()
    local fields = {}
    local function range(prefix, first, last)
        for i = first, last do
            fields[#fields + 1] = prefix .. i
        end
    end
    range('s', 0, 59)
    range('m', 1, 59)
    range('h', 1, 23)
    range('d', 1, 6)
    return fields
end

local function bucket_of(seconds)
    local s = math.floor(seconds)
    if s < 60 then
        return 's' .. s
    elseif s < 3600 then
        return 'm' .. math.floor(s / 60)
    elseif s < DAY then
        return 'h' .. math.floor(s / 3600)
    end
    return 'd' .. math.floor(s / DAY)
end

local function record_stat(queue, now, kind, seconds)
    local key = stats_key(kind, day_of(now), queue)
    local stored = redis.call('hmget', key, 'total', 'mean', 'vk')
    local count, mean, vk
    if not stored[1] then
        count, mean, vk = 1, seconds, 0
    else
        count = (tonumber(stored[1]) or 0) + 1
        local previous = tonumber(stored[2]) or 0
        mean = previous + (seconds - previous) / count
        vk = (tonumber(stored[3]) or 0) + (seconds - mean) * (seconds - previous)
    end
    redis.call('hincrby', key, bucket_of(seconds), 1)
    redis.call('hset', key, 'total', count, 'mean', mean, 'vk', vk)
end

local function count_stat(queue, day, field, by)
    redis.call('hincrby', stats_key('stats', day, queue), field, by)
end

-- A failed job leaves the failed state (put again, cancelled): take it off its day's `failed`
-- count, never below 0. Jobs that failed by running out of retries were never counted, and
-- qless-core takes them off anyway (below 0 in `put`; in `cancel` it fails when the day has no
-- count, after part of the cancel is written).
local function uncount_failed(queue, when)
    local day = day_of(when)
    if (tonumber(redis.call('hget', stats_key('stats', day, queue), 'failed')) or 0) > 0 then
        count_stat(queue, day, 'failed', -1)
    end
end

local function stat_summary(kind, day, queue)
    local key = stats_key(kind, day, queue)
    local stored = redis.call('hmget', key, 'total', 'mean', 'vk')
    local count = tonumber(stored[1]) or 0
    local mean = tonumber(stored[2]) or 0
    local std = 0
    if count > 1 then
        std = math.sqrt((tonumber(stored[3]) or 0) / (count - 1))
    end
    local fields = histogram_fields()
    local histogram = {}
    local buckets = redis.call('hmget', key, unpack(fields))
    for i = 1, #fields do
        histogram[i] = tonumber(buckets[i]) or 0
    end
    return { count = count, mean = mean, histogram = histogram, std = std }
end
