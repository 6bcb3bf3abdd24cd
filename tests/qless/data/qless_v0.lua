-- qless.lua: the qless job queue as one Redis Lua script (jobwire's own, written from the
-- qless-core document; docs/qless.md is the reference for every rule below).
--
-- Called as   EVALSHA <sha> <numkeys> <keys...> <command> <now> <args...>
--
--   * <command> is one of the names in COMMANDS at the bottom of this file;
--   * <now> is the caller's clock, UTC seconds as a decimal (milliseconds precision: Lua has no
--     clock, and equal priorities are popped in the order of these times);
--   * KEYS must be exactly the keys the call can name from its own arguments, in the order the
--     command's `keys` function lists them (qless_client/_scripts.py builds the same list). A
--     call whose KEYS differ is refused before anything is read or written. Keys reached through
--     data (a job's old queue, its dependents, its tags, its worker) are not known at call time
--     and are used undeclared, which Redis allows outside cluster mode.
--
-- Errors are error replies "QLESS <command>: <Reason>: <detail>", with <Reason> one of the
-- fixed phrases of `fail` calls below (listed in docs/qless.md). Arguments are all checked
-- before the first write, so a refused call changes nothing.
--
-- Redis 7 rules kept: nothing global is created or changed (everything is `local`, the
-- standard tables are only read), nothing random, nothing read from a clock.

local NS = 'ql:'
local DAY = 86400

-- Keys every command declares first (the global structures of qless).
local K_CONFIG = NS .. 'config'
local K_QUEUES = NS .. 'queues'
local K_WORKERS = NS .. 'workers'
local K_FAILURES = NS .. 'failures'
local K_COMPLETED = NS .. 'completed'
local K_TRACKED = NS .. 'tracked'
local GLOBAL_KEYS = { K_CONFIG, K_QUEUES, K_WORKERS, K_FAILURES, K_COMPLETED, K_TRACKED }

local DEFAULTS = {
    ['heartbeat'] = 60,
    ['stats-history'] = 30,
    ['histogram-history'] = 7,
    ['jobs-history-count'] = 50000,
    ['jobs-history'] = 7 * 24 * 60 * 60,
    ['max-worker-age'] = 24 * 60 * 60,
}

-- Options whose values must be numbers: name -> minimum accepted.
local NUMERIC_OPTIONS = {
    ['heartbeat'] = 0,
    ['stats-history'] = 0,
    ['histogram-history'] = 0,
    ['jobs-history-count'] = 0,
    ['jobs-history'] = 0,
    ['max-worker-age'] = 0,
}

local DEFAULT_RETRIES = 5
local DEFAULT_LIMIT = 25
local STATES = { waiting = true, running = true, stalled = true, scheduled = true,
                 depends = true, complete = true, recurring = true }

---------------------------------------------------------------------------------------------
-- Errors
---------------------------------------------------------------------------------------------

-- Raised as a table so the dispatcher can tell our errors from Redis' and from bugs.
local function fail(reason, detail)
    error({ qless = true, reason = reason, detail = detail }, 0)
end

---------------------------------------------------------------------------------------------
-- JSON: cjson for scalars, our own walk for containers so that an empty list stays `[]` and
-- object keys come out in a stable (sorted) order.
---------------------------------------------------------------------------------------------

local ARRAY = {}
local NULL = {}

local function array(t)
    return setmetatable(t or {}, ARRAY)
end

local function encode(value)
    if value == NULL or value == nil then
        return 'null'
    end
    if type(value) ~= 'table' then
        return cjson.encode(value)
    end
    local parts = {}
    if getmetatable(value) == ARRAY then
        for i = 1, #value do
            parts[i] = encode(value[i])
        end
        return '[' .. table.concat(parts, ',') .. ']'
    end
    local names = {}
    for name in pairs(value) do
        names[#names + 1] = name
    end
    table.sort(names)
    for i, name in ipairs(names) do
        parts[i] = cjson.encode(tostring(name)) .. ':' .. encode(value[name])
    end
    return '{' .. table.concat(parts, ',') .. '}'
end

-- Decode JSON we wrote ourselves (or another binding did); nil when it is not JSON.
local function decode(text)
    if type(text) ~= 'string' then
        return nil
    end
    local ok, value = pcall(cjson.decode, text)
    if ok then
        return value
    end
    return nil
end

local function is_list(value)
    if type(value) ~= 'table' then
        return false
    end
    local n = 0
    for k in pairs(value) do
        if type(k) ~= 'number' or k < 1 or k % 1 ~= 0 then
            return false
        end
        n = n + 1
    end
    return n == #value
end

local function list_copy(values)
    local out = array()
    if type(values) == 'table' then
        for i = 1, #values do
            out[i] = values[i]
        end
    end
    return out
end

local function sorted(values)
    local out = list_copy(values)
    table.sort(out)
    return out
end

---------------------------------------------------------------------------------------------
-- Argument checks (all run before the first write)
---------------------------------------------------------------------------------------------

local function finite(x)
    return x ~= nil and x == x and x ~= math.huge and x ~= -math.huge
end

local function arg_string(value, name)
    if value == nil or value == '' then
        fail('Bad argument', name .. ' is missing')
    end
    return value
end

local function arg_number(value, name, minimum)
    if value == nil then
        fail('Bad argument', name .. ' is missing')
    end
    local x = tonumber(value)
    if not finite(x) then
        fail('Bad argument', name .. ' is not a number: ' .. tostring(value))
    end
    if minimum and x < minimum then
        fail('Bad argument', name .. ' must be >= ' .. minimum .. ': ' .. tostring(value))
    end
    return x
end

local function arg_integer(value, name, minimum)
    local x = arg_number(value, name, minimum)
    if x % 1 ~= 0 then
        fail('Bad argument', name .. ' is not an integer: ' .. tostring(value))
    end
    return x
end

local function arg_json(value, name)
    if value == nil then
        fail('Bad argument', name .. ' is missing')
    end
    local ok, decoded = pcall(cjson.decode, value)
    if not ok then
        fail('Bad argument', name .. ' is not JSON: ' .. string.sub(tostring(value), 1, 60))
    end
    return decoded
end

-- A JSON list of non-empty strings (tags, jids); duplicates dropped, order kept.
local function arg_names(value, name)
    local decoded = arg_json(value, name)
    if not is_list(decoded) then
        fail('Bad argument', name .. ' is not a JSON list: ' .. string.sub(value, 1, 60))
    end
    local out, seen = array(), {}
    for _, item in ipairs(decoded) do
        if type(item) ~= 'string' or item == '' then
            fail('Bad argument', name .. ' holds a value that is not a non-empty string')
        end
        if not seen[item] then
            seen[item] = true
            out[#out + 1] = item
        end
    end
    return out
end

-- The optional trailing `offset`, `count` pair of listing commands.
local function arg_page(args, first, name)
    local offset = 0
    local count = DEFAULT_LIMIT
    if args[first] ~= nil then
        offset = arg_integer(args[first], name .. ' offset', 0)
    end
    if args[first + 1] ~= nil then
        count = arg_integer(args[first + 1], name .. ' count', 0)
    end
    if args[first + 2] ~= nil then
        fail('Bad argument', 'unexpected argument: ' .. tostring(args[first + 2]))
    end
    return offset, count
end

local function no_more(args, n)
    if args[n + 1] ~= nil then
        fail('Bad argument', 'unexpected argument: ' .. tostring(args[n + 1]))
    end
end

---------------------------------------------------------------------------------------------
-- Key names
---------------------------------------------------------------------------------------------

local function day_of(t)
    local s = math.floor(t)
    return s - (s % DAY)
end

local function k_job(jid) return NS .. 'j:' .. jid end
local function k_dependencies(jid) return NS .. 'j:' .. jid .. '-dependencies' end
local function k_dependents(jid) return NS .. 'j:' .. jid .. '-dependents' end
local function k_queue(queue, part) return NS .. 'q:' .. queue .. '-' .. part end
local function k_worker(worker) return NS .. 'w:' .. worker .. ':jobs' end
local function k_tag(tag) return NS .. 't:' .. tag end
local function k_group(group) return NS .. 'f:' .. group end
local function k_recur(jid) return NS .. 'r:' .. jid end
local function k_stats(kind, day, queue)
    return NS .. 's:' .. kind .. ':' .. string.format('%d', day) .. ':' .. queue
end

local QUEUE_PARTS = { 'work', 'locks', 'scheduled', 'depends', 'recur' }

-- Key-list builders for the `keys` functions of the commands.
local function keys_new()
    local out = {}
    for i, key in ipairs(GLOBAL_KEYS) do
        out[i] = key
    end
    return out
end

local function keys_add(out, ...)
    for _, key in ipairs({ ... }) do
        out[#out + 1] = key
    end
    return out
end

local function keys_job(out, jid)
    return keys_add(out, k_job(jid), k_dependencies(jid), k_dependents(jid))
end

local function keys_queue(out, queue)
    for _, part in ipairs(QUEUE_PARTS) do
        out[#out + 1] = k_queue(queue, part)
    end
    return out
end

local function keys_stats(out, queue, now)
    local day = day_of(now)
    return keys_add(out, k_stats('wait', day, queue), k_stats('run', day, queue),
        k_stats('stats', day, queue))
end

---------------------------------------------------------------------------------------------
-- Configuration
---------------------------------------------------------------------------------------------

local function config_number(name)
    local value = tonumber(redis.call('hget', K_CONFIG, name))
    if finite(value) and value >= 0 then
        return value
    end
    return DEFAULTS[name]
end

local function heartbeat_of(queue)
    local value = tonumber(redis.call('hget', K_CONFIG, 'heartbeat-' .. queue))
    if finite(value) and value > 0 then
        return value
    end
    return config_number('heartbeat')
end

---------------------------------------------------------------------------------------------
-- Statistics: Welford's streaming mean and variance, and the histogram of the document:
-- second resolution for the first minute, minute resolution for the first hour, 15-minute
-- resolution for the first day, hour resolution for the first 3 days, day resolution after
-- (the last bucket, 30 days, also holds everything longer).
---------------------------------------------------------------------------------------------

local MAX_DAY_BUCKET = 30

local function bucket_of(seconds)
    if seconds < 60 then
        return 's' .. math.floor(seconds)
    elseif seconds < 3600 then
        return 'm' .. math.floor(seconds / 60)
    elseif seconds < DAY then
        return 'q' .. math.floor(seconds / 900)
    elseif seconds < 3 * DAY then
        return 'h' .. math.floor(seconds / 3600)
    end
    return 'd' .. math.min(math.floor(seconds / DAY), MAX_DAY_BUCKET)
end

-- Every bucket field, in histogram order (60 + 59 + 92 + 48 + 28 = 287).
local BUCKETS = {}
do
    local function range(prefix, first, last)
        for i = first, last do
            BUCKETS[#BUCKETS + 1] = prefix .. i
        end
    end
    range('s', 0, 59)
    range('m', 1, 59)
    range('q', 4, 95)
    range('h', 24, 71)
    range('d', 3, MAX_DAY_BUCKET)
end

-- Stats hashes live `stats-history` days after their day. The TTL is relative to the caller's
-- `now` (qless runs on the clients' clocks, not on the server's).
local function stats_expire(key, day, now)
    local ttl = math.ceil(day + config_number('stats-history') * DAY - now)
    if ttl > 0 then
        redis.call('expire', key, ttl)
    else
        redis.call('del', key)
    end
end

local function record(kind, queue, now, seconds)
    if seconds < 0 then
        seconds = 0
    end
    local day = day_of(now)
    local key = k_stats(kind, day, queue)
    local old = redis.call('hmget', key, 'total', 'mean', 'vk')
    local n = tonumber(old[1]) or 0
    local mean = tonumber(old[2]) or 0
    local vk = tonumber(old[3]) or 0
    n = n + 1
    local delta = seconds - mean
    mean = mean + delta / n
    vk = vk + delta * (seconds - mean)
    redis.call('hset', key, 'total', n, 'mean', mean, 'vk', vk)
    redis.call('hincrby', key, bucket_of(seconds), 1)
    stats_expire(key, day, now)
end

local function count_stat(field, queue, when, by, now)
    local day = day_of(when)
    local key = k_stats('stats', day, queue)
    redis.call('hincrby', key, field, by)
    stats_expire(key, day, now or when)
end

---------------------------------------------------------------------------------------------
-- Jobs
---------------------------------------------------------------------------------------------

local JOB_FIELDS = { 'jid', 'klass', 'state', 'queue', 'worker', 'priority', 'expires',
                     'retries', 'remaining', 'data', 'tags', 'failure', 'history' }

local function job_fields(jid)
    local values = redis.call('hmget', k_job(jid), unpack(JOB_FIELDS))
    if not values[1] and not values[3] then
        return nil
    end
    local job = {}
    for i, name in ipairs(JOB_FIELDS) do
        job[name] = values[i] or false
    end
    job.jid = jid
    return job
end

local function must_exist(jid)
    local job = job_fields(jid)
    if not job then
        fail('Job does not exist', jid)
    end
    return job
end

local function job_history(job)
    local history = decode(job.history)
    if not is_list(history) then
        history = {}
    end
    return array(history)
end

local function job_tags(job)
    local tags = decode(job.tags)
    if not is_list(tags) then
        tags = {}
    end
    return array(tags)
end

local function set_history(jid, history)
    redis.call('hset', k_job(jid), 'history', encode(array(history)))
end

-- Change the last entry of a job's history (the current stage).
local function touch_history(jid, job, changes)
    local history = job_history(job)
    local last = history[#history]
    if type(last) ~= 'table' then
        last = {}
        history[#history + 1] = last
    end
    for name, value in pairs(changes) do
        last[name] = value
    end
    set_history(jid, history)
    job.history = encode(history)
    return last
end

local function push_history(jid, job, entry)
    local history = job_history(job)
    history[#history + 1] = entry
    set_history(jid, history)
    job.history = encode(history)
end

-- The JSON-ready description of a job (`get`), or nil.
local function job_data(jid)
    local job = job_fields(jid)
    if not job then
        return nil
    end
    local failure = decode(job.failure)
    if type(failure) ~= 'table' or next(failure) == nil then
        failure = NULL
    end
    local queue = job.queue
    if not queue or queue == '' then
        queue = NULL
    end
    return {
        jid = jid,
        klass = job.klass or '',
        state = job.state or '',
        queue = queue,
        worker = job.worker or '',
        priority = tonumber(job.priority) or 0,
        expires = tonumber(job.expires) or 0,
        retries = tonumber(job.retries) or 0,
        remaining = tonumber(job.remaining) or 0,
        data = job.data or '{}',
        tags = job_tags(job),
        tracked = redis.call('zscore', K_TRACKED, jid) ~= false,
        history = job_history(job),
        failure = failure,
        dependents = sorted(redis.call('smembers', k_dependents(jid))),
        dependencies = sorted(redis.call('smembers', k_dependencies(jid))),
    }
end

local function jobs_data(jids)
    local out = array()
    for _, jid in ipairs(jids) do
        local data = job_data(jid)
        if data then
            out[#out + 1] = data
        end
    end
    return out
end

local function work_score(priority, when)
    return priority + when / 10000000000
end

-- Take a job out of wherever its current state keeps it (queue sets, its worker's set, its
-- failure group, the completed set), before it is put somewhere else.
local function detach(jid, job, now)
    local queue = job.queue
    if queue and queue ~= '' then
        redis.call('zrem', k_queue(queue, 'work'), jid)
        redis.call('zrem', k_queue(queue, 'locks'), jid)
        redis.call('zrem', k_queue(queue, 'scheduled'), jid)
        redis.call('zrem', k_queue(queue, 'depends'), jid)
    end
    if job.worker and job.worker ~= '' then
        redis.call('zrem', k_worker(job.worker), jid)
    end
    if job.state == 'failed' then
        local failure = decode(job.failure)
        if type(failure) == 'table' and type(failure.group) == 'string' then
            local group_key = k_group(failure.group)
            redis.call('lrem', group_key, 0, jid)
            if redis.call('llen', group_key) == 0 then
                redis.call('srem', K_FAILURES, failure.group)
            end
            if queue and queue ~= '' and tonumber(failure.when) then
                count_stat('failed', queue, tonumber(failure.when), -1, now)
            end
        end
        redis.call('hdel', k_job(jid), 'failure')
    elseif job.state == 'complete' then
        redis.call('zrem', K_COMPLETED, jid)
    end
end

-- Put a job into a queue: `depends` when it still waits on jobs, `scheduled` with a delay,
-- `waiting` otherwise. Returns the new state.
local function enqueue(jid, queue, now, delay, priority)
    local state
    if redis.call('scard', k_dependencies(jid)) > 0 then
        state = 'depends'
        redis.call('zadd', k_queue(queue, 'depends'), now, jid)
    elseif delay > 0 then
        state = 'scheduled'
        redis.call('zadd', k_queue(queue, 'scheduled'), now + delay, jid)
    else
        state = 'waiting'
        redis.call('zadd', k_queue(queue, 'work'), work_score(priority, now), jid)
    end
    redis.call('hset', k_job(jid), 'state', state, 'queue', queue, 'worker', '', 'expires', 0)
    redis.call('zadd', K_QUEUES, 'NX', now, queue)
    return state
end

-- Make `jid` wait on each of `deps` that exists and is not complete (others are satisfied).
local function add_dependencies(jid, deps)
    for _, dep in ipairs(deps) do
        local state = redis.call('hget', k_job(dep), 'state')
        if state and state ~= 'complete' then
            redis.call('sadd', k_dependencies(jid), dep)
            redis.call('sadd', k_dependents(dep), jid)
        end
    end
end

-- A job in `depends` whose last dependency went away moves to its queue's work.
local function release_if_ready(jid, now)
    if redis.call('scard', k_dependencies(jid)) > 0 then
        return
    end
    local job = job_fields(jid)
    if not job or job.state ~= 'depends' then
        return
    end
    local queue = job.queue
    redis.call('zrem', k_queue(queue, 'depends'), jid)
    redis.call('zadd', k_queue(queue, 'work'), work_score(tonumber(job.priority) or 0, now), jid)
    redis.call('hset', k_job(jid), 'state', 'waiting')
end

-- Delete every trace of a job but its place in ql:tracked (a tracked job whose data is gone is
-- reported as `expired` by `track`).
local function delete_job(jid, job)
    for _, tag in ipairs(job_tags(job)) do
        redis.call('zrem', k_tag(tag), jid)
    end
    for _, dep in ipairs(redis.call('smembers', k_dependencies(jid))) do
        redis.call('srem', k_dependents(dep), jid)
    end
    redis.call('del', k_job(jid), k_dependencies(jid), k_dependents(jid))
end

local function fail_job(jid, job, now, group, message, worker, data)
    detach(jid, job, now)
    local failure = { group = group, message = message, when = now, worker = worker }
    redis.call('hset', k_job(jid), 'state', 'failed', 'worker', '', 'expires', 0,
        'failure', encode(failure))
    if data then
        redis.call('hset', k_job(jid), 'data', data)
    end
    touch_history(jid, job, { failed = now })
    redis.call('lpush', k_group(group), jid)
    redis.call('sadd', K_FAILURES, group)
    local queue = job.queue
    if queue and queue ~= '' then
        count_stat('failures', queue, now, 1)
        count_stat('failed', queue, now, 1)
    end
end

local function retries_group(queue)
    return 'failed-retries-' .. queue
end

local function retries_message(queue)
    return 'Job exhausted retries in queue "' .. queue .. '"'
end

-- The lock of `worker` on `jid` is valid now (heartbeat, complete, retry), or fail.
local function check_lock(jid, worker, now, queue)
    local job = must_exist(jid)
    if job.state ~= 'running' then
        fail('Lost lock', 'job ' .. jid .. ' is ' .. tostring(job.state) .. ', not running')
    end
    if job.worker ~= worker then
        fail('Lost lock', 'job ' .. jid .. ' is held by ' .. tostring(job.worker))
    end
    local expires = tonumber(job.expires) or 0
    if expires <= now then
        fail('Lost lock', 'the lock on job ' .. jid .. ' expired at ' .. tostring(expires))
    end
    if queue and job.queue ~= queue then
        fail('Wrong queue', 'job ' .. jid .. ' is in queue ' .. tostring(job.queue))
    end
    return job
end

-- Remove completed jobs older than `jobs-history` seconds, then the oldest beyond
-- `jobs-history-count`.
local function prune(now)
    local horizon = now - config_number('jobs-history')
    local old = redis.call('zrangebyscore', K_COMPLETED, '-inf', '(' .. horizon)
    local keep = config_number('jobs-history-count')
    local total = redis.call('zcard', K_COMPLETED) - #old
    if total > keep then
        local extra = redis.call('zrange', K_COMPLETED, #old, #old + total - keep - 1)
        for _, jid in ipairs(extra) do
            old[#old + 1] = jid
        end
    end
    for _, jid in ipairs(old) do
        local job = job_fields(jid)
        if job then
            delete_job(jid, job)
        end
        redis.call('zrem', K_COMPLETED, jid)
    end
end

---------------------------------------------------------------------------------------------
-- Recurring jobs (not in the document; the layout other bindings use: a `ql:r:<jid>` hash and
-- the queue's `-recur` sorted set scored by the next run time)
---------------------------------------------------------------------------------------------

local RECUR_FIELDS = { 'jid', 'klass', 'data', 'priority', 'tags', 'state', 'queue', 'type',
                       'interval', 'count', 'retries', 'backlog' }

local function recur_fields(jid)
    local values = redis.call('hmget', k_recur(jid), unpack(RECUR_FIELDS))
    if not values[1] then
        return nil
    end
    local recur = {}
    for i, name in ipairs(RECUR_FIELDS) do
        recur[name] = values[i] or false
    end
    return recur
end

-- Spawn the jobs of every recurring template of `queue` that came due by `now`, at most
-- `limit` of them (each occurrence is one job `<jid>-<n>`, put at its own due time).
local function spawn_recurring(queue, now, limit)
    local key = k_queue(queue, 'recur')
    local due = redis.call('zrangebyscore', key, '-inf', now, 'WITHSCORES')
    local spawned = 0
    for i = 1, #due, 2 do
        if spawned >= limit then
            break
        end
        local rjid = due[i]
        local at = tonumber(due[i + 1])
        local recur = recur_fields(rjid)
        if not recur then
            redis.call('zrem', key, rjid)
        else
            local interval = tonumber(recur.interval)
            local backlog = tonumber(recur.backlog) or 0
            local count = tonumber(recur.count) or 0
            local priority = tonumber(recur.priority) or 0
            local retries = tonumber(recur.retries) or DEFAULT_RETRIES
            -- With a backlog, skip occurrences older than `backlog` intervals.
            if backlog > 0 then
                local missed = math.floor((now - at) / interval)
                if missed > backlog then
                    at = at + (missed - backlog) * interval
                end
            end
            while at <= now and spawned < limit do
                count = count + 1
                local jid = rjid .. '-' .. count
                local job_key = k_job(jid)
                local tags = decode(recur.tags)
                if not is_list(tags) then
                    tags = {}
                end
                redis.call('hset', job_key, 'jid', jid, 'klass', recur.klass, 'data', recur.data,
                    'priority', priority, 'tags', encode(array(tags)), 'state', 'waiting',
                    'worker', '', 'expires', 0, 'queue', queue, 'retries', retries,
                    'remaining', retries,
                    'history', encode(array({ { q = queue, put = at } })),
                    'spawned_from_jid', rjid)
                for _, tag in ipairs(tags) do
                    redis.call('zadd', k_tag(tag), 'NX', at, jid)
                end
                redis.call('zadd', k_queue(queue, 'work'), work_score(priority, at), jid)
                at = at + interval
                spawned = spawned + 1
            end
            redis.call('hset', k_recur(rjid), 'count', count)
            redis.call('zadd', key, at, rjid)
        end
    end
end

---------------------------------------------------------------------------------------------
-- Queues
---------------------------------------------------------------------------------------------

-- Scheduled jobs that came due move to the work set, ordered as if put at their due time.
local function promote(queue, now)
    local key = k_queue(queue, 'scheduled')
    local due = redis.call('zrangebyscore', key, '-inf', now, 'WITHSCORES')
    for i = 1, #due, 2 do
        local jid = due[i]
        local at = tonumber(due[i + 1])
        redis.call('zrem', key, jid)
        local priority = redis.call('hget', k_job(jid), 'priority')
        if priority then
            redis.call('zadd', k_queue(queue, 'work'), work_score(tonumber(priority) or 0, at),
                jid)
            redis.call('hset', k_job(jid), 'state', 'waiting')
        end
    end
end

local function queue_counts(queue, now)
    promote(queue, now)
    return {
        name = queue,
        waiting = redis.call('zcard', k_queue(queue, 'work')),
        running = redis.call('zcount', k_queue(queue, 'locks'), '(' .. now, '+inf'),
        stalled = redis.call('zcount', k_queue(queue, 'locks'), '-inf', now),
        scheduled = redis.call('zcard', k_queue(queue, 'scheduled')),
        depends = redis.call('zcard', k_queue(queue, 'depends')),
        recurring = redis.call('zcard', k_queue(queue, 'recur')),
    }
end

---------------------------------------------------------------------------------------------
-- Commands: each has `parse(args)` (checks, no I/O), `keys(p, now)` (the KEYS the call must
-- declare) and `run(p, now)` (the reply).
---------------------------------------------------------------------------------------------

local COMMANDS = {}

-- put <queue> <jid> <klass> <data> <delay> [priority <p>] [tags <json>] [retries <r>]
--     [depends <json>]  ->  jid
COMMANDS.put = {
    parse = function(args)
        local p = {
            queue = arg_string(args[1], 'queue'),
            jid = arg_string(args[2], 'jid'),
            klass = arg_string(args[3], 'klass'),
            data = args[4],
            delay = arg_number(args[5], 'delay', 0),
        }
        arg_json(p.data, 'data')
        local i = 6
        while args[i] ~= nil do
            local option, value = args[i], args[i + 1]
            if value == nil then
                fail('Bad argument', 'option ' .. option .. ' has no value')
            end
            if option == 'priority' then
                p.priority = arg_integer(value, 'priority')
            elseif option == 'tags' then
                p.tags = arg_names(value, 'tags')
            elseif option == 'retries' then
                p.retries = arg_integer(value, 'retries', 0)
            elseif option == 'depends' then
                p.depends = arg_names(value, 'depends')
            else
                fail('Bad argument', 'unknown option: ' .. option)
            end
            i = i + 2
        end
        if p.depends then
            for _, dep in ipairs(p.depends) do
                if dep == p.jid then
                    fail('Bad argument', 'job ' .. p.jid .. ' cannot depend on itself')
                end
            end
            if #p.depends > 0 and p.delay > 0 then
                fail('Bad argument', 'delay and depends cannot be used together')
            end
        end
        return p
    end,
    keys = function(p)
        local out = keys_queue(keys_job(keys_new(), p.jid), p.queue)
        for _, tag in ipairs(p.tags or {}) do
            out[#out + 1] = k_tag(tag)
        end
        for _, dep in ipairs(p.depends or {}) do
            keys_add(out, k_job(dep), k_dependents(dep))
        end
        return out
    end,
    run = function(p, now)
        local jid = p.jid
        local old = job_fields(jid)
        local old_tags = array()
        local priority, retries = 0, DEFAULT_RETRIES
        local history = array()
        if old then
            detach(jid, old, now)
            old_tags = job_tags(old)
            priority = tonumber(old.priority) or 0
            retries = tonumber(old.retries) or DEFAULT_RETRIES
            history = job_history(old)
        end
        priority = p.priority or priority
        retries = p.retries or retries
        local tags = p.tags or old_tags
        -- Tags: the index follows the job's list; a tag kept keeps its first time.
        local keep = {}
        for _, tag in ipairs(tags) do
            keep[tag] = true
            redis.call('zadd', k_tag(tag), 'NX', now, jid)
        end
        for _, tag in ipairs(old_tags) do
            if not keep[tag] then
                redis.call('zrem', k_tag(tag), jid)
            end
        end
        history[#history + 1] = { q = p.queue, put = now }
        redis.call('hset', k_job(jid), 'jid', jid, 'klass', p.klass, 'data', p.data,
            'priority', priority, 'tags', encode(array(tags)), 'retries', retries,
            'remaining', retries, 'history', encode(history))
        redis.call('hdel', k_job(jid), 'failure')
        if p.depends then
            for _, dep in ipairs(redis.call('smembers', k_dependencies(jid))) do
                redis.call('srem', k_dependents(dep), jid)
            end
            redis.call('del', k_dependencies(jid))
            add_dependencies(jid, p.depends)
        end
        enqueue(jid, p.queue, now, p.delay, priority)
        return jid
    end,
}

-- pop <queue> <worker> <count>  ->  JSON list of jobs
COMMANDS.pop = {
    parse = function(args)
        no_more(args, 3)
        return {
            queue = arg_string(args[1], 'queue'),
            worker = arg_string(args[2], 'worker'),
            count = arg_integer(args[3], 'count', 1),
        }
    end,
    keys = function(p, now)
        local out = keys_queue(keys_new(), p.queue)
        out[#out + 1] = k_worker(p.worker)
        return keys_stats(out, p.queue, now)
    end,
    run = function(p, now)
        local queue, worker = p.queue, p.worker
        redis.call('zadd', K_WORKERS, now, worker)
        local jids = {}
        -- 1. Jobs whose lock expired: another worker gets them; that counts as a retry.
        local expired = redis.call('zrangebyscore', k_queue(queue, 'locks'), '-inf', now,
            'LIMIT', 0, p.count)
        for _, jid in ipairs(expired) do
            local job = job_fields(jid)
            redis.call('zrem', k_queue(queue, 'locks'), jid)
            if job then
                if job.worker and job.worker ~= '' then
                    redis.call('zrem', k_worker(job.worker), jid)
                end
                local remaining = redis.call('hincrbyfloat', k_job(jid), 'remaining', -1)
                count_stat('retries', queue, now, 1)
                if tonumber(remaining) < 0 then
                    fail_job(jid, job, now, retries_group(queue), retries_message(queue),
                        job.worker or '', nil)
                else
                    touch_history(jid, job, { popped = now, worker = worker })
                    jids[#jids + 1] = jid
                end
            end
        end
        -- 2. Recurring jobs and scheduled jobs that came due join the work set.
        spawn_recurring(queue, now, p.count - #jids)
        promote(queue, now)
        -- 3. Waiting jobs, by priority then time put.
        local need = p.count - #jids
        if need > 0 then
            local work = redis.call('zrange', k_queue(queue, 'work'), 0, need - 1)
            for _, jid in ipairs(work) do
                redis.call('zrem', k_queue(queue, 'work'), jid)
                local job = job_fields(jid)
                if job then
                    local last = touch_history(jid, job, { popped = now, worker = worker })
                    record('wait', queue, now, now - (tonumber(last.put) or now))
                    jids[#jids + 1] = jid
                end
            end
        end
        local expires = now + heartbeat_of(queue)
        for _, jid in ipairs(jids) do
            redis.call('hset', k_job(jid), 'state', 'running', 'worker', worker,
                'expires', expires)
            redis.call('zadd', k_queue(queue, 'locks'), expires, jid)
            redis.call('zadd', k_worker(worker), now, jid)
        end
        return encode(jobs_data(jids))
    end,
}

-- peek <queue> <count>  ->  JSON list of jobs (what pop would hand out, without locking)
COMMANDS.peek = {
    parse = function(args)
        no_more(args, 2)
        return { queue = arg_string(args[1], 'queue'), count = arg_integer(args[2], 'count', 1) }
    end,
    keys = function(p)
        return keys_queue(keys_new(), p.queue)
    end,
    run = function(p, now)
        local jids = redis.call('zrangebyscore', k_queue(p.queue, 'locks'), '-inf', now,
            'LIMIT', 0, p.count)
        spawn_recurring(p.queue, now, p.count - #jids)
        promote(p.queue, now)
        local need = p.count - #jids
        if need > 0 then
            for _, jid in ipairs(redis.call('zrange', k_queue(p.queue, 'work'), 0, need - 1)) do
                jids[#jids + 1] = jid
            end
        end
        return encode(jobs_data(jids))
    end,
}

-- complete <jid> <worker> <queue> <data> [next <queue> [delay <d> | depends <json>]]
--     ->  the job's new state
COMMANDS.complete = {
    parse = function(args)
        local p = {
            jid = arg_string(args[1], 'jid'),
            worker = arg_string(args[2], 'worker'),
            queue = arg_string(args[3], 'queue'),
            data = args[4],
            delay = 0,
        }
        arg_json(p.data, 'data')
        local i = 5
        while args[i] ~= nil do
            local option, value = args[i], args[i + 1]
            if value == nil then
                fail('Bad argument', 'option ' .. option .. ' has no value')
            end
            if option == 'next' then
                p.next = arg_string(value, 'next')
            elseif option == 'delay' then
                p.delay = arg_number(value, 'delay', 0)
            elseif option == 'depends' then
                p.depends = arg_names(value, 'depends')
            else
                fail('Bad argument', 'unknown option: ' .. option)
            end
            i = i + 2
        end
        if not p.next and (p.delay > 0 or p.depends) then
            fail('Bad argument', 'delay and depends need next')
        end
        if p.depends and #p.depends > 0 and p.delay > 0 then
            fail('Bad argument', 'delay and depends cannot be used together')
        end
        for _, dep in ipairs(p.depends or {}) do
            if dep == p.jid then
                fail('Bad argument', 'job ' .. p.jid .. ' cannot depend on itself')
            end
        end
        return p
    end,
    keys = function(p, now)
        local out = keys_queue(keys_job(keys_new(), p.jid), p.queue)
        out[#out + 1] = k_worker(p.worker)
        keys_stats(out, p.queue, now)
        if p.next then
            keys_queue(out, p.next)
        end
        for _, dep in ipairs(p.depends or {}) do
            keys_add(out, k_job(dep), k_dependents(dep))
        end
        return out
    end,
    run = function(p, now)
        local jid = p.jid
        local job = check_lock(jid, p.worker, now, p.queue)
        redis.call('zrem', k_queue(p.queue, 'locks'), jid)
        redis.call('zrem', k_worker(p.worker), jid)
        redis.call('zadd', K_WORKERS, now, p.worker)
        redis.call('hset', k_job(jid), 'data', p.data)
        local last = touch_history(jid, job, { done = now })
        if tonumber(last.popped) then
            record('run', p.queue, now, now - tonumber(last.popped))
        end
        if p.next then
            local retries = tonumber(job.retries) or DEFAULT_RETRIES
            redis.call('hset', k_job(jid), 'remaining', retries)
            push_history(jid, job, { q = p.next, put = now })
            add_dependencies(jid, p.depends or {})
            return enqueue(jid, p.next, now, p.delay, tonumber(job.priority) or 0)
        end
        redis.call('hset', k_job(jid), 'state', 'complete', 'worker', '', 'expires', 0,
            'queue', '')
        redis.call('zadd', K_COMPLETED, now, jid)
        for _, dependent in ipairs(redis.call('smembers', k_dependents(jid))) do
            redis.call('srem', k_dependencies(dependent), jid)
            release_if_ready(dependent, now)
        end
        redis.call('del', k_dependents(jid))
        prune(now)
        return 'complete'
    end,
}

-- fail <jid> <worker> <group> <message> [data]  ->  jid
COMMANDS.fail = {
    parse = function(args)
        no_more(args, 5)
        local p = {
            jid = arg_string(args[1], 'jid'),
            worker = arg_string(args[2], 'worker'),
            group = arg_string(args[3], 'group'),
            message = args[4],
            data = args[5],
        }
        if p.message == nil then
            fail('Bad argument', 'message is missing')
        end
        if p.data ~= nil then
            arg_json(p.data, 'data')
        end
        return p
    end,
    keys = function(p)
        return keys_add(keys_job(keys_new(), p.jid), k_group(p.group))
    end,
    run = function(p, now)
        local job = must_exist(p.jid)
        fail_job(p.jid, job, now, p.group, p.message, p.worker, p.data)
        return p.jid
    end,
}

-- failed [<group> [offset [count]]]  ->  JSON {group: count} or {total, jobs}
COMMANDS.failed = {
    parse = function(args)
        local p = {}
        if args[1] ~= nil then
            p.group = arg_string(args[1], 'group')
            p.offset, p.count = arg_page(args, 2, 'failed')
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.group then
            out[#out + 1] = k_group(p.group)
        end
        return out
    end,
    run = function(p)
        if not p.group then
            local counts = {}
            for _, group in ipairs(redis.call('smembers', K_FAILURES)) do
                counts[group] = redis.call('llen', k_group(group))
            end
            return encode(counts)
        end
        local key = k_group(p.group)
        local jobs = array()
        if p.count > 0 then
            local jids = redis.call('lrange', key, p.offset, p.offset + p.count - 1)
            for _, data in ipairs(jobs_data(jids)) do
                if data.failure ~= NULL then
                    data.message = data.failure.message
                    data.type = data.failure.group
                end
                jobs[#jobs + 1] = data
            end
        end
        return encode({ total = redis.call('llen', key), jobs = jobs })
    end,
}

-- retry <jid> <queue> <worker> [delay]  ->  retries remaining (negative: the job failed)
COMMANDS.retry = {
    parse = function(args)
        no_more(args, 4)
        local p = {
            jid = arg_string(args[1], 'jid'),
            queue = arg_string(args[2], 'queue'),
            worker = arg_string(args[3], 'worker'),
            delay = 0,
        }
        if args[4] ~= nil then
            p.delay = arg_number(args[4], 'delay', 0)
        end
        return p
    end,
    keys = function(p, now)
        local out = keys_queue(keys_job(keys_new(), p.jid), p.queue)
        keys_add(out, k_worker(p.worker), k_group(retries_group(p.queue)))
        return keys_stats(out, p.queue, now)
    end,
    run = function(p, now)
        local jid = p.jid
        local job = check_lock(jid, p.worker, now, p.queue)
        redis.call('zadd', K_WORKERS, now, p.worker)
        local remaining = tonumber(redis.call('hincrbyfloat', k_job(jid), 'remaining', -1))
        count_stat('retries', p.queue, now, 1)
        if remaining < 0 then
            fail_job(jid, job, now, retries_group(p.queue), retries_message(p.queue), p.worker,
                nil)
            return remaining
        end
        detach(jid, job, now)
        push_history(jid, job, { q = p.queue, put = now })
        enqueue(jid, p.queue, now, p.delay, tonumber(job.priority) or 0)
        return remaining
    end,
}

-- heartbeat <jid> <worker> [data]  ->  the new expiry time (a decimal string)
COMMANDS.heartbeat = {
    parse = function(args)
        no_more(args, 3)
        local p = { jid = arg_string(args[1], 'jid'), worker = arg_string(args[2], 'worker'),
                    data = args[3] }
        if p.data ~= nil then
            arg_json(p.data, 'data')
        end
        return p
    end,
    keys = function(p)
        return keys_add(keys_job(keys_new(), p.jid), k_worker(p.worker))
    end,
    run = function(p, now)
        local job = check_lock(p.jid, p.worker, now, nil)
        local expires = now + heartbeat_of(job.queue)
        redis.call('hset', k_job(p.jid), 'expires', expires)
        if p.data ~= nil then
            redis.call('hset', k_job(p.jid), 'data', p.data)
        end
        redis.call('zadd', k_queue(job.queue, 'locks'), expires, p.jid)
        redis.call('zadd', k_worker(p.worker), now, p.jid)
        redis.call('zadd', K_WORKERS, now, p.worker)
        return tostring(expires)
    end,
}

-- cancel <jid> [<jid>...]  ->  JSON list of the jids cancelled (those that existed)
COMMANDS.cancel = {
    parse = function(args)
        if args[1] == nil then
            fail('Bad argument', 'jid is missing')
        end
        local p = { jids = {} }
        for i, jid in ipairs(args) do
            p.jids[i] = arg_string(jid, 'jid')
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        for _, jid in ipairs(p.jids) do
            keys_job(out, jid)
        end
        return out
    end,
    run = function(p, now)
        local cancelling = {}
        for _, jid in ipairs(p.jids) do
            cancelling[jid] = true
        end
        local jobs = {}
        for _, jid in ipairs(p.jids) do
            local job = job_fields(jid)
            if job and not jobs[jid] then
                for _, dependent in ipairs(redis.call('smembers', k_dependents(jid))) do
                    if not cancelling[dependent] then
                        fail('Has dependents', 'job ' .. dependent .. ' depends on ' .. jid)
                    end
                end
                jobs[jid] = job
            end
        end
        local done = array()
        for _, jid in ipairs(p.jids) do
            local job = jobs[jid]
            if job then
                jobs[jid] = nil
                detach(jid, job, now)
                redis.call('zrem', K_TRACKED, jid)
                delete_job(jid, job)
                done[#done + 1] = jid
            end
        end
        return encode(done)
    end,
}

-- depends <jid> on <jid>...  |  depends <jid> off <jid>...  |  depends <jid> off all  ->  1
COMMANDS.depends = {
    parse = function(args)
        local p = { jid = arg_string(args[1], 'jid'), mode = args[2], jids = {} }
        if p.mode ~= 'on' and p.mode ~= 'off' then
            fail('Bad argument', 'depends takes on or off, not ' .. tostring(p.mode))
        end
        local i = 3
        while args[i] ~= nil do
            p.jids[#p.jids + 1] = arg_string(args[i], 'jid')
            i = i + 1
        end
        if #p.jids == 0 then
            fail('Bad argument', 'depends ' .. p.mode .. ' needs jids')
        end
        if p.mode == 'off' and p.jids[1] == 'all' then
            if #p.jids > 1 then
                fail('Bad argument', 'unexpected argument: ' .. p.jids[2])
            end
            p.all = true
            p.jids = {}
        end
        for _, dep in ipairs(p.jids) do
            if dep == p.jid then
                fail('Bad argument', 'job ' .. p.jid .. ' cannot depend on itself')
            end
        end
        return p
    end,
    keys = function(p)
        local out = keys_job(keys_new(), p.jid)
        for _, dep in ipairs(p.jids) do
            keys_add(out, k_job(dep), k_dependents(dep))
        end
        return out
    end,
    run = function(p, now)
        local job = must_exist(p.jid)
        if job.state ~= 'depends' then
            fail('Wrong state', 'job ' .. p.jid .. ' is ' .. tostring(job.state) ..
                ', not depends')
        end
        if p.mode == 'on' then
            add_dependencies(p.jid, p.jids)
        else
            local drop = p.jids
            if p.all then
                drop = redis.call('smembers', k_dependencies(p.jid))
            end
            for _, dep in ipairs(drop) do
                redis.call('srem', k_dependencies(p.jid), dep)
                redis.call('srem', k_dependents(dep), p.jid)
            end
        end
        release_if_ready(p.jid, now)
        return 1
    end,
}

-- priority <jid> <priority>  ->  the priority
COMMANDS.priority = {
    parse = function(args)
        no_more(args, 2)
        return { jid = arg_string(args[1], 'jid'), priority = arg_integer(args[2], 'priority') }
    end,
    keys = function(p)
        return keys_job(keys_new(), p.jid)
    end,
    run = function(p)
        local job = must_exist(p.jid)
        redis.call('hset', k_job(p.jid), 'priority', p.priority)
        if job.state == 'waiting' and job.queue and job.queue ~= '' then
            local key = k_queue(job.queue, 'work')
            local score = tonumber(redis.call('zscore', key, p.jid))
            if score then
                -- Keep the time part of the score: the job keeps its place among its equals.
                local when = score - (tonumber(job.priority) or 0)
                redis.call('zadd', key, p.priority + when, p.jid)
            end
        end
        return p.priority
    end,
}

-- tag add <jid> <tag>... | tag remove <jid> <tag>...  ->  JSON list of the job's tags
-- tag get <tag> [offset [count]]  ->  JSON {total, jobs}
COMMANDS.tag = {
    parse = function(args)
        local p = { mode = args[1] }
        if p.mode == 'add' or p.mode == 'remove' then
            p.jid = arg_string(args[2], 'jid')
            p.tags = {}
            local i = 3
            while args[i] ~= nil do
                p.tags[#p.tags + 1] = arg_string(args[i], 'tag')
                i = i + 1
            end
        elseif p.mode == 'get' then
            p.tag = arg_string(args[2], 'tag')
            p.offset, p.count = arg_page(args, 3, 'tag get')
        else
            fail('Bad argument', 'tag takes add, remove or get, not ' .. tostring(p.mode))
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.mode == 'get' then
            out[#out + 1] = k_tag(p.tag)
            return out
        end
        keys_job(out, p.jid)
        for _, tag in ipairs(p.tags) do
            out[#out + 1] = k_tag(tag)
        end
        return out
    end,
    run = function(p, now)
        if p.mode == 'get' then
            local key = k_tag(p.tag)
            local jobs = array()
            if p.count > 0 then
                jobs = list_copy(redis.call('zrange', key, p.offset, p.offset + p.count - 1))
            end
            return encode({ total = redis.call('zcard', key), jobs = jobs })
        end
        local job = must_exist(p.jid)
        local tags = job_tags(job)
        local out = array()
        if p.mode == 'add' then
            local have = {}
            for _, tag in ipairs(tags) do
                have[tag] = true
                out[#out + 1] = tag
            end
            for _, tag in ipairs(p.tags) do
                if not have[tag] then
                    have[tag] = true
                    out[#out + 1] = tag
                    redis.call('zadd', k_tag(tag), 'NX', now, p.jid)
                end
            end
        else
            local drop = {}
            for _, tag in ipairs(p.tags) do
                drop[tag] = true
                redis.call('zrem', k_tag(tag), p.jid)
            end
            for _, tag in ipairs(tags) do
                if not drop[tag] then
                    out[#out + 1] = tag
                end
            end
        end
        redis.call('hset', k_job(p.jid), 'tags', encode(out))
        return encode(out)
    end,
}

-- track  ->  JSON {jobs, expired}  |  track track <jid>  |  track untrack <jid>  ->  1 or 0
COMMANDS.track = {
    parse = function(args)
        local p = { mode = args[1] }
        if p.mode == nil then
            return p
        end
        if p.mode ~= 'track' and p.mode ~= 'untrack' then
            fail('Bad argument', 'track takes track or untrack, not ' .. tostring(p.mode))
        end
        p.jid = arg_string(args[2], 'jid')
        no_more(args, 2)
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.jid then
            keys_job(out, p.jid)
        end
        return out
    end,
    run = function(p, now)
        if p.mode == 'track' then
            must_exist(p.jid)
            return redis.call('zadd', K_TRACKED, 'NX', now, p.jid)
        elseif p.mode == 'untrack' then
            return redis.call('zrem', K_TRACKED, p.jid)
        end
        local jobs, expired = array(), array()
        for _, jid in ipairs(redis.call('zrange', K_TRACKED, 0, -1)) do
            local data = job_data(jid)
            if data then
                jobs[#jobs + 1] = data
            else
                expired[#expired + 1] = jid
            end
        end
        return encode({ jobs = jobs, expired = expired })
    end,
}

-- get <jid>  ->  JSON job, or nil when there is no such job
COMMANDS.get = {
    parse = function(args)
        no_more(args, 1)
        return { jid = arg_string(args[1], 'jid') }
    end,
    keys = function(p)
        return keys_job(keys_new(), p.jid)
    end,
    run = function(p)
        local data = job_data(p.jid)
        if not data then
            return false
        end
        return encode(data)
    end,
}

-- jobs <state> <queue> [offset [count]]  |  jobs complete [offset [count]]  ->  JSON jids
COMMANDS.jobs = {
    parse = function(args)
        local p = { state = args[1] }
        if not STATES[p.state or ''] then
            fail('Bad argument', 'unknown state: ' .. tostring(p.state))
        end
        if p.state == 'complete' then
            p.offset, p.count = arg_page(args, 2, 'jobs')
        else
            p.queue = arg_string(args[2], 'queue')
            p.offset, p.count = arg_page(args, 3, 'jobs')
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.queue then
            keys_queue(out, p.queue)
        end
        return out
    end,
    run = function(p, now)
        local first, last = p.offset, p.offset + p.count - 1
        if p.count == 0 then
            return '[]'
        end
        if p.state == 'complete' then
            return encode(list_copy(redis.call('zrevrange', K_COMPLETED, first, last)))
        end
        local q = p.queue
        local jids
        if p.state == 'running' then
            jids = redis.call('zrangebyscore', k_queue(q, 'locks'), '(' .. now, '+inf',
                'LIMIT', p.offset, p.count)
        elseif p.state == 'stalled' then
            jids = redis.call('zrangebyscore', k_queue(q, 'locks'), '-inf', now,
                'LIMIT', p.offset, p.count)
        else
            promote(q, now)
            local part = ({ waiting = 'work', scheduled = 'scheduled', depends = 'depends',
                            recurring = 'recur' })[p.state]
            jids = redis.call('zrange', k_queue(q, part), first, last)
        end
        return encode(list_copy(jids))
    end,
}

-- queues [<queue>]  ->  JSON list of counts, or the counts of one queue
COMMANDS.queues = {
    parse = function(args)
        no_more(args, 1)
        local p = {}
        if args[1] ~= nil then
            p.queue = arg_string(args[1], 'queue')
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.queue then
            keys_queue(out, p.queue)
        end
        return out
    end,
    run = function(p, now)
        if p.queue then
            return encode(queue_counts(p.queue, now))
        end
        local out = array()
        for _, queue in ipairs(redis.call('zrange', K_QUEUES, 0, -1)) do
            out[#out + 1] = queue_counts(queue, now)
        end
        return encode(out)
    end,
}

-- workers [<worker>]  ->  JSON list of {name, jobs, stalled} or {jobs, stalled} of one worker
COMMANDS.workers = {
    parse = function(args)
        no_more(args, 1)
        local p = {}
        if args[1] ~= nil then
            p.worker = arg_string(args[1], 'worker')
        end
        return p
    end,
    keys = function(p)
        local out = keys_new()
        if p.worker then
            out[#out + 1] = k_worker(p.worker)
        end
        return out
    end,
    run = function(p, now)
        redis.call('zremrangebyscore', K_WORKERS, '-inf',
            '(' .. (now - config_number('max-worker-age')))
        local function split(worker)
            local jobs, stalled = array(), array()
            for _, jid in ipairs(redis.call('zrevrange', k_worker(worker), 0, -1)) do
                local expires = tonumber(redis.call('hget', k_job(jid), 'expires'))
                if expires and expires > now then
                    jobs[#jobs + 1] = jid
                else
                    stalled[#stalled + 1] = jid
                end
            end
            return jobs, stalled
        end
        if p.worker then
            local jobs, stalled = split(p.worker)
            return encode({ jobs = jobs, stalled = stalled })
        end
        local out = array()
        for _, worker in ipairs(redis.call('zrevrange', K_WORKERS, 0, -1)) do
            local jobs, stalled = split(worker)
            out[#out + 1] = { name = worker, jobs = #jobs, stalled = #stalled }
        end
        return encode(out)
    end,
}

-- stats <queue> <date>  ->  JSON {failed, failures, retries, wait, run}
COMMANDS.stats = {
    parse = function(args)
        no_more(args, 2)
        return { queue = arg_string(args[1], 'queue'), date = arg_number(args[2], 'date', 0) }
    end,
    keys = function(p)
        return keys_stats(keys_new(), p.queue, p.date)
    end,
    run = function(p, now)
        local day = day_of(p.date)
        local old = now - day >= config_number('histogram-history') * DAY
        local function summary(kind)
            local key = k_stats(kind, day, p.queue)
            if old then
                -- Histograms are kept `histogram-history` days: drop them on sight.
                redis.call('hdel', key, unpack(BUCKETS))
            end
            local values = redis.call('hmget', key, 'total', 'mean', 'vk', unpack(BUCKETS))
            local total = tonumber(values[1]) or 0
            local vk = tonumber(values[3]) or 0
            local histogram = array()
            for i = 1, #BUCKETS do
                histogram[i] = tonumber(values[i + 3]) or 0
            end
            local variance = 0
            if total > 1 then
                variance = vk / (total - 1)
            end
            return { total = total, mean = tonumber(values[2]) or 0, variance = variance,
                     histogram = histogram }
        end
        local counts = redis.call('hmget', k_stats('stats', day, p.queue), 'failed',
            'failures', 'retries')
        return encode({
            failed = tonumber(counts[1]) or 0,
            failures = tonumber(counts[2]) or 0,
            retries = tonumber(counts[3]) or 0,
            wait = summary('wait'),
            run = summary('run'),
        })
    end,
}

-- config.get [option]  ->  the value (nil when unset without default) or JSON of them all
COMMANDS['config.get'] = {
    parse = function(args)
        no_more(args, 1)
        return { option = args[1] }
    end,
    keys = function()
        return keys_new()
    end,
    run = function(p)
        if p.option ~= nil then
            local value = redis.call('hget', K_CONFIG, p.option)
            if value then
                return value
            end
            if DEFAULTS[p.option] then
                return tostring(DEFAULTS[p.option])
            end
            return false
        end
        local all = {}
        for name, value in pairs(DEFAULTS) do
            all[name] = tostring(value)
        end
        local stored = redis.call('hgetall', K_CONFIG)
        for i = 1, #stored, 2 do
            all[stored[i]] = stored[i + 1]
        end
        return encode(all)
    end,
}

-- config.set <option> <value>  ->  nil
COMMANDS['config.set'] = {
    parse = function(args)
        no_more(args, 2)
        local p = { option = arg_string(args[1], 'option'), value = args[2] }
        if p.value == nil then
            fail('Bad argument', 'value is missing')
        end
        local minimum = NUMERIC_OPTIONS[p.option]
        if minimum == nil and string.sub(p.option, 1, 10) == 'heartbeat-' then
            minimum = 0
        end
        if minimum ~= nil then
            arg_number(p.value, p.option, minimum)
        end
        return p
    end,
    keys = function()
        return keys_new()
    end,
    run = function(p)
        redis.call('hset', K_CONFIG, p.option, p.value)
        return false
    end,
}

-- config.unset <option>  ->  nil
COMMANDS['config.unset'] = {
    parse = function(args)
        no_more(args, 1)
        return { option = arg_string(args[1], 'option') }
    end,
    keys = function()
        return keys_new()
    end,
    run = function(p)
        redis.call('hdel', K_CONFIG, p.option)
        return false
    end,
}

-- unfail <queue> <group> [count]  ->  how many jobs moved (the oldest failures first)
COMMANDS.unfail = {
    parse = function(args)
        no_more(args, 3)
        local p = { queue = arg_string(args[1], 'queue'), group = arg_string(args[2], 'group'),
                    count = DEFAULT_LIMIT }
        if args[3] ~= nil then
            p.count = arg_integer(args[3], 'count', 1)
        end
        return p
    end,
    keys = function(p)
        return keys_add(keys_queue(keys_new(), p.queue), k_group(p.group))
    end,
    run = function(p, now)
        local jids = redis.call('lrange', k_group(p.group), -p.count, -1)
        local moved = 0
        for i = #jids, 1, -1 do
            local jid = jids[i]
            local job = job_fields(jid)
            if job and job.state == 'failed' then
                detach(jid, job, now)
                redis.call('hset', k_job(jid), 'remaining', tonumber(job.retries) or
                    DEFAULT_RETRIES)
                push_history(jid, job, { q = p.queue, put = now })
                enqueue(jid, p.queue, now, 0, tonumber(job.priority) or 0)
                moved = moved + 1
            else
                redis.call('lrem', k_group(p.group), 0, jid)
            end
        end
        if redis.call('llen', k_group(p.group)) == 0 then
            redis.call('srem', K_FAILURES, p.group)
        end
        return moved
    end,
}

-- recur <queue> <jid> <klass> <data> interval <seconds> <offset> [priority <p>] [tags <json>]
--     [retries <r>] [backlog <b>]  ->  jid
COMMANDS.recur = {
    parse = function(args)
        local p = {
            queue = arg_string(args[1], 'queue'),
            jid = arg_string(args[2], 'jid'),
            klass = arg_string(args[3], 'klass'),
            data = args[4],
            priority = 0,
            tags = array(),
            retries = DEFAULT_RETRIES,
            backlog = 0,
        }
        arg_json(p.data, 'data')
        if args[5] ~= 'interval' then
            fail('Bad argument', 'recur takes interval, not ' .. tostring(args[5]))
        end
        p.interval = arg_number(args[6], 'interval', 0)
        if p.interval <= 0 then
            fail('Bad argument', 'interval must be > 0: ' .. tostring(args[6]))
        end
        p.offset = arg_number(args[7], 'offset', 0)
        local i = 8
        while args[i] ~= nil do
            local option, value = args[i], args[i + 1]
            if value == nil then
                fail('Bad argument', 'option ' .. option .. ' has no value')
            end
            if option == 'priority' then
                p.priority = arg_integer(value, 'priority')
            elseif option == 'tags' then
                p.tags = arg_names(value, 'tags')
            elseif option == 'retries' then
                p.retries = arg_integer(value, 'retries', 0)
            elseif option == 'backlog' then
                p.backlog = arg_integer(value, 'backlog', 0)
            else
                fail('Bad argument', 'unknown option: ' .. option)
            end
            i = i + 2
        end
        return p
    end,
    keys = function(p)
        return keys_add(keys_queue(keys_new(), p.queue), k_recur(p.jid))
    end,
    run = function(p, now)
        local old = redis.call('hget', k_recur(p.jid), 'queue')
        if old then
            redis.call('zrem', k_queue(old, 'recur'), p.jid)
        end
        redis.call('hset', k_recur(p.jid), 'jid', p.jid, 'klass', p.klass, 'data', p.data,
            'priority', p.priority, 'tags', encode(p.tags), 'state', 'recur', 'queue', p.queue,
            'type', 'interval', 'interval', p.interval, 'count', 0, 'retries', p.retries,
            'backlog', p.backlog)
        redis.call('zadd', k_queue(p.queue, 'recur'), now + p.offset, p.jid)
        redis.call('zadd', K_QUEUES, 'NX', now, p.queue)
        return p.jid
    end,
}

-- recur.get <jid>  ->  JSON template, or nil
COMMANDS['recur.get'] = {
    parse = function(args)
        no_more(args, 1)
        return { jid = arg_string(args[1], 'jid') }
    end,
    keys = function(p)
        return keys_add(keys_new(), k_recur(p.jid))
    end,
    run = function(p)
        local recur = recur_fields(p.jid)
        if not recur then
            return false
        end
        local tags = decode(recur.tags)
        if not is_list(tags) then
            tags = {}
        end
        return encode({
            jid = p.jid, klass = recur.klass, data = recur.data, queue = recur.queue,
            state = recur.state, type = recur.type,
            priority = tonumber(recur.priority) or 0, tags = array(tags),
            interval = tonumber(recur.interval) or 0, count = tonumber(recur.count) or 0,
            retries = tonumber(recur.retries) or 0, backlog = tonumber(recur.backlog) or 0,
            next = tonumber(redis.call('zscore', k_queue(recur.queue, 'recur'), p.jid)) or NULL,
        })
    end,
}

-- unrecur <jid>  ->  1 if there was such a template, else 0
COMMANDS.unrecur = {
    parse = function(args)
        no_more(args, 1)
        return { jid = arg_string(args[1], 'jid') }
    end,
    keys = function(p)
        return keys_add(keys_new(), k_recur(p.jid))
    end,
    run = function(p)
        local queue = redis.call('hget', k_recur(p.jid), 'queue')
        if not queue then
            return 0
        end
        redis.call('zrem', k_queue(queue, 'recur'), p.jid)
        redis.call('del', k_recur(p.jid))
        return 1
    end,
}

---------------------------------------------------------------------------------------------
-- Dispatcher
---------------------------------------------------------------------------------------------

local function main()
    local name = ARGV[1]
    local command = COMMANDS[name or '']
    if not command then
        fail('Unknown command', tostring(name))
    end
    local now = arg_number(ARGV[2], 'now', 0)
    local args = {}
    for i = 3, #ARGV do
        args[i - 2] = ARGV[i]
    end
    local p = command.parse(args)
    local expected = command.keys(p, now)
    local ok = #expected == #KEYS
    local at = 0
    for i = 1, math.max(#expected, #KEYS) do
        if expected[i] ~= KEYS[i] then
            ok, at = false, i
            break
        end
    end
    if not ok then
        if at == 0 then
            at = math.min(#expected, #KEYS) + 1
        end
        fail('Undeclared keys', 'expected ' .. #expected .. ' keys, KEYS[' .. at .. '] should be '
            .. tostring(expected[at]) .. ', not ' .. tostring(KEYS[at]))
    end
    return command.run(p, now)
end

local ok, result = pcall(main)
if ok then
    return result
end
if type(result) == 'table' and result.qless then
    local text = 'QLESS ' .. tostring(ARGV[1]) .. ': ' .. result.reason
    if result.detail then
        text = text .. ': ' .. result.detail
    end
    return redis.error_reply(text)
end
error(result, 0)
