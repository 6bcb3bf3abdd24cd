-- GENERATED from qless_client/lua/src/*.lua by scripts/build_lua.py: do not edit, edit those.

-- from src/01_keys.lua
-- qless.lua: jobwire's own implementation of the qless-core script.
--
-- qless keeps its jobs in Redis and makes every change through one Lua script. This script is
-- written for jobwire to behave as the qless-core script that deployments run (the one
-- qless-py 0.11.4 and the Ruby `qless` gem ship): the same commands, keys, encodings, replies,
-- pub/sub events and error texts, so that jobwire, qless-py, the Ruby gem and qless-web can
-- share one Redis. Where it deliberately differs (it refuses input that would make qless-core
-- corrupt its data or crash), docs/qless.md lists each case.
--
-- Calling convention (qless-core's):
--
--     EVALSHA <sha> 0 <command> <now> <args...>
--
--   * no KEYS: the keys a call touches depend on what Redis holds (a job's queue, its worker,
--     its tags, its dependents), so none are declared (Redis allows this outside a cluster);
--   * <command> is one of the names in COMMANDS (put, pop, complete, ...);
--   * <now> is the caller's clock in seconds, as a decimal string: the script reads no clock.
--
-- Errors are script errors; Redis prefixes them with "user_script:<line>: ". Their texts are
-- qless-core's, since bindings match on some ("... not currently running ...").
--
-- Redis 7 rules: everything here is local (no global is created, no standard table is
-- changed), nothing random, no clock.
--
-- The source is qless_client/lua/src/, one file per concern, joined in the order of their
-- numbers into one chunk by scripts/build_lua.py (a file uses the locals of the files before
-- it): 01-03 keys, arguments and JSON; 04-10 the state the commands share (configuration,
-- history, statistics, jobs, queues, dependencies, recurring templates); 11-17 the commands,
-- each an entry of COMMANDS; 18 the dispatch.

local NS = 'ql:'
local DAY = 86400

---------------------------------------------------------------------------------------------
-- Key names and pub/sub channels (everything under `ql:`)
---------------------------------------------------------------------------------------------

local CONFIG = NS .. 'config'
local QUEUES = NS .. 'queues'
local WORKERS = NS .. 'workers'
local FAILURES = NS .. 'failures'
local COMPLETED = NS .. 'completed'
local TRACKED = NS .. 'tracked'
local TAGS = NS .. 'tags'
local PAUSED = NS .. 'paused_queues'

local function job_key(jid) return NS .. 'j:' .. jid end
local function history_key(jid) return NS .. 'j:' .. jid .. '-history' end
local function dependents_key(jid) return NS .. 'j:' .. jid .. '-dependents' end
local function dependencies_key(jid) return NS .. 'j:' .. jid .. '-dependencies' end
local function queue_key(queue, part) return NS .. 'q:' .. queue .. '-' .. part end
local function worker_key(worker) return NS .. 'w:' .. worker .. ':jobs' end
local function tag_key(tag) return NS .. 't:' .. tag end
local function group_key(group) return NS .. 'f:' .. group end
local function recur_key(jid) return NS .. 'r:' .. jid end

-- The start of the day `t` falls in. Written as qless-core writes it (no floor), and
-- concatenated as a Lua number, so that the stats keys come out byte for byte the same.
local function day_of(t)
    return t - (t % DAY)
end

local function stats_key(kind, day, queue)
    return NS .. 's:' .. kind .. ':' .. day .. ':' .. queue
end

local function publish(channel, message)
    redis.call('publish', NS .. channel, message)
end

-- from src/02_args.lua
---------------------------------------------------------------------------------------------
-- Arguments: numbers, options, the names every command needs
---------------------------------------------------------------------------------------------

-- A number, or nil. Lua's tonumber also reads "inf" and "nan"; those are refused here: once
-- stored, cjson cannot encode the job any more and Redis cannot score it.
local function number(value)
    local x = tonumber(value)
    if x == nil or x ~= x or x == math.huge or x == -math.huge then
        return nil
    end
    return x
end

-- The `key value` options of a command, `list[first]` on: put (and requeue), complete, recur
-- and recur.update all read them here. Returns a table from key to value (a later key wins;
-- a trailing key without a value is left out) and the same pairs in order, as {key, value}
-- lists (a trailing key's value is nil). With `even`, a list whose options are not whole pairs
-- is refused first, in qless-core's words, naming all of `list`.
local function read_options(list, first, even)
    if even and (#list - first + 1) % 2 == 1 then
        error('Odd number of additional args: ' .. table.concat(list, ' '))
    end
    local options, in_order = {}, {}
    for i = first, #list, 2 do
        local key, value = list[i], list[i + 1]
        in_order[#in_order + 1] = { key, value }
        if value ~= nil then
            options[key] = value
        end
    end
    return options, in_order
end

local function need_jid(jid)
    if not jid then
        error('Job(): no jid provided')
    end
end

local function need_queue(queue)
    if not queue then
        error('Queue(): no queue name provided')
    end
end

local function need_recurring_jid(jid)
    if not jid then
        error('Recurring(): no jid provided')
    end
end

-- from src/03_json.lua
---------------------------------------------------------------------------------------------
-- JSON: what we read back from Redis, what callers give
---------------------------------------------------------------------------------------------

-- JSON we read back from Redis (written by us or by another binding): nil when it is not JSON,
-- so that one odd field never makes a job unreadable.
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

-- A JSON argument. Text that is not JSON gets cjson's own error (as in qless-core); a missing
-- argument or a JSON `false` gets `message`.
local function json_arg(text, message)
    if text == nil then
        error(message)
    end
    local value = cjson.decode(text)
    if value == false then
        error(message)
    end
    return value
end

-- Tags and jids given as JSON: a JSON array (qless-core writes an empty one as `{}`) of
-- strings or numbers. qless-core takes anything and then crashes on other values, after it
-- has written part of the change.
local function is_name_list(value)
    if type(value) ~= 'table' then
        return false
    end
    for _, item in ipairs(value) do
        local kind = type(item)
        if kind ~= 'string' and kind ~= 'number' then
            return false
        end
    end
    return true
end

-- The tags stored in a job or template hash, as a list (an odd value reads as no tags).
local function stored_tags(text)
    local tags = decode(text)
    local out = {}
    if type(tags) == 'table' then
        for _, tag in ipairs(tags) do
            if type(tag) == 'string' or type(tag) == 'number' then
                out[#out + 1] = tag
            end
        end
    end
    return out
end

-- from src/04_config.lua
---------------------------------------------------------------------------------------------
-- Configuration (the `ql:config` hash; unset options read as these defaults)
---------------------------------------------------------------------------------------------

local CONFIG_DEFAULTS = {
    ['application'] = 'qless',
    ['heartbeat'] = 60,
    ['grace-period'] = 10,
    ['stats-history'] = 30,
    ['histogram-history'] = 7,
    ['jobs-history-count'] = 50000,
    ['jobs-history'] = 604800,
}

local function config_get(name, fallback)
    local value = redis.call('hget', CONFIG, name)
    if value then
        return value
    end
    if CONFIG_DEFAULTS[name] ~= nil then
        return CONFIG_DEFAULTS[name]
    end
    return fallback
end

-- A numeric option. qless-core stores any text with config.set and then fails on arithmetic
-- with nil where it uses it (in `complete`, after part of the change is written): we refuse
-- the command before its first write instead.
local function config_number(caller, name, fallback, integer)
    local value = config_get(name, fallback)
    local x = number(value)
    if x == nil or (integer and x % 1 ~= 0) then
        error(caller .. ': config option "' .. name .. '" is not a number: ' .. tostring(value))
    end
    return x
end

-- The lock length for jobs of `queue`: `<queue>-heartbeat`, else `heartbeat`.
local function heartbeat_of(caller, queue)
    local name = queue .. '-heartbeat'
    if not redis.call('hget', CONFIG, name) then
        name = 'heartbeat'
    end
    return config_number(caller, name, 60)
end

-- from src/05_history.lua
---------------------------------------------------------------------------------------------
-- Job history: the list `ql:j:<jid>-history` of JSON arrays [when, what, {details}], read
-- back as objects {when, what, details...}.
---------------------------------------------------------------------------------------------

-- Older scripts kept the history as a JSON list of stages in the job hash's `history` field:
-- qless-core's old stages are {q, put, popped, worker, done, failed}, and jobwire's previous
-- script wrote the same shape. Turn the field into list entries (put, popped, failed, done,
-- in that order, for each stage) and drop it. A stage may lack some times (jobwire's previous
-- script wrote stages without `put` for jobs another binding had put, whose put is already in
-- the list): those entries are skipped, where qless-core fails on them.
local function convert_old_history(jid)
    local text = redis.call('hget', job_key(jid), 'history')
    if not text then
        return
    end
    local stages = decode(text)
    if type(stages) == 'table' then
        local key = history_key(jid)
        for _, stage in ipairs(stages) do
            if type(stage) == 'table' then
                local put = number(stage.put)
                local popped = number(stage.popped)
                local failed = number(stage.failed)
                local done = number(stage.done)
                if put then
                    redis.call('rpush', key,
                        cjson.encode({ math.floor(put), 'put', { q = stage.q } }))
                end
                if popped then
                    redis.call('rpush', key,
                        cjson.encode({ math.floor(popped), 'popped', { worker = stage.worker } }))
                end
                if failed then
                    redis.call('rpush', key, cjson.encode({ math.floor(failed), 'failed' }))
                end
                if done then
                    redis.call('rpush', key, cjson.encode({ math.floor(done), 'done' }))
                end
            end
        end
    end
    redis.call('hdel', job_key(jid), 'history')
end

-- Append an event (`details` is a table or nil); returns the list's new length.
local function add_history(jid, now, what, details)
    convert_old_history(jid)
    return redis.call('rpush', history_key(jid), cjson.encode({ math.floor(now), what, details }))
end

local function read_history(jid)
    convert_old_history(jid)
    local out = {}
    for _, text in ipairs(redis.call('lrange', history_key(jid), 0, -1)) do
        local entry = decode(text)
        if type(entry) == 'table' then
            -- Details that are not an object (qless-core's `log` takes any JSON) are left
            -- out, where qless-core fails to read the job at all.
            local item = entry[3]
            if type(item) ~= 'table' then
                item = {}
            end
            item['when'] = entry[1]
            item['what'] = entry[2]
            out[#out + 1] = item
        end
    end
    return out
end

-- from src/06_stats.lua
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

-- from src/07_jobs.lua
---------------------------------------------------------------------------------------------
-- Jobs: reading a job hash, tracking, tag indexes
---------------------------------------------------------------------------------------------

local function is_tracked(jid)
    return redis.call('zscore', TRACKED, jid) ~= false
end

local JOB_FIELDS = { 'jid', 'klass', 'state', 'queue', 'worker', 'priority', 'expires',
                     'retries', 'remaining', 'data', 'tags', 'failure', 'spawned_from_jid' }

-- The job as `get` describes it, or nil when there is no job hash (with its `jid` field).
local function job_data(jid)
    local f = redis.call('hmget', job_key(jid), unpack(JOB_FIELDS))
    if not f[1] then
        return nil
    end
    local remaining = number(f[9])
    if remaining then
        remaining = math.floor(remaining)
    end
    local tags = decode(f[11])
    if type(tags) ~= 'table' then
        tags = {}
    end
    local failure = decode(f[12] or '{}')
    if type(failure) ~= 'table' then
        failure = {}
    end
    return {
        jid = f[1],
        klass = f[2],
        state = f[3],
        queue = f[4],
        worker = f[5] or '',
        tracked = is_tracked(jid),
        priority = number(f[6]),
        expires = number(f[7]) or 0,
        retries = number(f[8]),
        remaining = remaining,
        data = f[10],
        tags = tags,
        history = read_history(jid),
        failure = failure,
        dependents = redis.call('smembers', dependents_key(jid)),
        dependencies = redis.call('smembers', dependencies_key(jid)),
        -- A recurring run's template (newer qless-core writes it too; 0.11.4 does not).
        spawned_from_jid = f[13] or nil,
    }
end

local function jobs_data(jids)
    local out = {}
    for _, jid in ipairs(jids) do
        local data = job_data(jid)
        if data then
            out[#out + 1] = data
        end
    end
    return out
end

local function job_exists(jid)
    return redis.call('exists', job_key(jid)) == 1
end

-- Count a tag on (+1) or off (-1) a job in the tag's index and in the `ql:tags` counts.
local function index_tag(jid, tag, now, by)
    if by > 0 then
        redis.call('zadd', tag_key(tag), now, jid)
    else
        redis.call('zrem', tag_key(tag), jid)
    end
    redis.call('zincrby', TAGS, by, tag)
end

-- Take a job's stored tags off the tag indexes and counts (before it is deleted or re-put).
local function unindex_tags(jid, tags_text)
    for _, tag in ipairs(stored_tags(tags_text)) do
        index_tag(jid, tag, 0, -1)
    end
end

local function exhausted_message(queue)
    return 'Job exhausted retries in queue "' .. queue .. '"'
end

-- from src/08_queues.lua
---------------------------------------------------------------------------------------------
-- Queue sets: `-work` (waiting, scored priority - put time / 1e10 and read highest first, so
-- a higher priority pops first and equal priorities oldest first), `-locks` (running, scored
-- by lock expiry), `-scheduled` (by due time), `-depends` (by time put), `-recur` (recurring
-- templates, by next run).
---------------------------------------------------------------------------------------------

local function add_queue_name(queue, now)
    if redis.call('zscore', QUEUES, queue) == false then
        redis.call('zadd', QUEUES, now, queue)
    end
end

local function work_add(queue, now, priority, jid)
    redis.call('zadd', queue_key(queue, 'work'), priority - (now / 10000000000), jid)
end

-- The first `count` waiting jids, highest score first.
local function work_peek(queue, count)
    if count == 0 then
        return {}
    end
    return redis.call('zrevrange', queue_key(queue, 'work'), 0, count - 1)
end

-- Running jobs whose lock expired by `now` (stalled).
local function expired_locks(queue, now, offset, count)
    return redis.call('zrangebyscore', queue_key(queue, 'locks'), '-inf', now,
        'LIMIT', offset, count)
end

-- Take `jid` out of `queue`'s sets, `parts` naming which.
local function queue_remove(queue, jid, parts)
    for _, part in ipairs(parts) do
        redis.call('zrem', queue_key(queue, part), jid)
    end
end

-- The sets a job leaves when it completes or fails (qless-core's choice: not `depends`), and
-- all four a job can be in.
local ACTIVE = { 'work', 'locks', 'scheduled' }
local ALL_JOB_SETS = { 'work', 'locks', 'depends', 'scheduled' }

local function is_paused(queue)
    return redis.call('sismember', PAUSED, queue) == 1
end

-- ZREM of many members, a bounded number at a time (unpack has a stack limit).
local function zrem_all(key, members)
    for first = 1, #members, 1000 do
        redis.call('zrem', key, unpack(members, first, math.min(first + 999, #members)))
    end
end

-- Scheduled jobs that came due by `now` join the work set (at most `count` of them).
local function promote_scheduled(queue, now, count)
    local key = queue_key(queue, 'scheduled')
    for _, jid in ipairs(redis.call('zrangebyscore', key, 0, now, 'LIMIT', 0, count)) do
        redis.call('zrem', key, jid)
        -- A jid whose job is gone is only dropped: qless-core would create a hash holding
        -- nothing but `state`, which then breaks every pop of the queue.
        local priority = redis.call('hget', job_key(jid), 'priority')
        if priority or job_exists(jid) then
            work_add(queue, now, number(priority) or 0, jid)
            redis.call('hset', job_key(jid), 'state', 'waiting')
        end
    end
end

-- Locks of `queue` that expired by `now` (at most `count`). The first time, the worker gets a
-- courtesy: a `lock_lost` event and `grace-period` more seconds (the job's `grace` field
-- remembers it). After that, or at once when the grace period is 0 or less, the lock is taken:
-- the job counts a retry and is returned to be handed out again, or fails when it has no
-- retries left.
local function invalidate_locks(queue, now, count, grace)
    local jids = {}
    local locks = queue_key(queue, 'locks')
    for _, jid in ipairs(expired_locks(queue, now, 0, count)) do
        local f = redis.call('hmget', job_key(jid), 'worker', 'grace', 'queue')
        local worker = f[1]
        if not worker then
            -- No job behind the lock: qless-core fails here on every pop of the queue.
            redis.call('zrem', locks, jid)
        else
            redis.call('zrem', worker_key(worker), jid)
            local courtesy = tonumber(f[2] or 0) ~= 1
            local take = not courtesy
            if grace <= 0 then
                courtesy, take = true, true
            end
            if courtesy then
                if is_tracked(jid) then
                    publish('stalled', jid)
                end
                add_history(jid, now, 'timed-out')
                redis.call('hset', job_key(jid), 'grace', 1)
                local event = cjson.encode({ jid = jid, event = 'lock_lost', worker = worker })
                publish('w:' .. worker, event)
                publish('log', event)
                redis.call('zadd', locks, now + grace, jid)
                count_stat(queue, day_of(now), 'retries', 1)
            end
            if take then
                redis.call('hdel', job_key(jid), 'grace', 0)
                local remaining = redis.call('hincrby', job_key(jid), 'remaining', -1)
                if remaining < 0 then
                    queue_remove(queue, jid, ACTIVE)
                    local group = 'failed-retries-' .. tostring(f[3])
                    add_history(jid, now, 'failed', { group = group })
                    redis.call('hset', job_key(jid), 'state', 'failed', 'worker', '',
                        'expires', '')
                    redis.call('hset', job_key(jid), 'failure', cjson.encode({
                        group = group,
                        message = exhausted_message(queue),
                        when = now,
                        worker = '',
                    }))
                    redis.call('sadd', FAILURES, group)
                    redis.call('lpush', group_key(group), jid)
                    if is_tracked(jid) then
                        publish('failed', jid)
                    end
                    publish('log', cjson.encode({
                        jid = jid,
                        event = 'failed',
                        group = group,
                        worker = worker,
                        message = exhausted_message(queue),
                    }))
                else
                    jids[#jids + 1] = jid
                end
            end
        end
    end
    return jids
end

local function queue_counts(queue, now)
    local locks = queue_key(queue, 'locks')
    local stalled = redis.call('zcount', locks, 0, now)
    promote_scheduled(queue, now, redis.call('zcard', queue_key(queue, 'scheduled')))
    return {
        name = queue,
        waiting = redis.call('zcard', queue_key(queue, 'work')),
        stalled = stalled,
        running = redis.call('zcard', locks) - stalled,
        scheduled = redis.call('zcard', queue_key(queue, 'scheduled')),
        depends = redis.call('zcard', queue_key(queue, 'depends')),
        recurring = redis.call('zcard', queue_key(queue, 'recur')),
        paused = is_paused(queue),
    }
end

-- from src/09_dependencies.lua
---------------------------------------------------------------------------------------------
-- Dependencies
---------------------------------------------------------------------------------------------

-- Make `jid` wait on each of `deps` that exists and is not complete (the others are done).
local function add_dependencies(jid, deps)
    for _, dep in ipairs(deps) do
        local state = redis.call('hget', job_key(dep), 'state')
        if state and state ~= 'complete' then
            redis.call('sadd', dependents_key(dep), jid)
            redis.call('sadd', dependencies_key(jid), dep)
        end
    end
end

-- A job whose last dependency went away moves from `depends` to its queue's work set. Only a
-- job in the `depends` state moves: one that was re-put with a delay while it still had
-- dependencies waits in `scheduled`, and qless-core would put it in the work set as well.
local function release(jid, now)
    local f = redis.call('hmget', job_key(jid), 'queue', 'priority', 'state')
    if f[1] and f[3] == 'depends' then
        redis.call('zrem', queue_key(f[1], 'depends'), jid)
        work_add(f[1], now, number(f[2]) or 0, jid)
        redis.call('hset', job_key(jid), 'state', 'waiting')
    end
end

-- from src/10_recurring.lua
---------------------------------------------------------------------------------------------
-- Recurring templates (`ql:r:<jid>`): reading one, spawning the runs that came due
---------------------------------------------------------------------------------------------

local RECUR_FIELDS = { 'jid', 'klass', 'state', 'queue', 'priority', 'interval', 'retries',
                       'count', 'data', 'tags', 'backlog' }

local function recurring_data(jid)
    local f = redis.call('hmget', recur_key(jid), unpack(RECUR_FIELDS))
    if not f[1] then
        return nil
    end
    local tags = decode(f[10])
    if type(tags) ~= 'table' then
        tags = {}
    end
    return {
        jid = f[1],
        klass = f[2],
        state = f[3],
        queue = f[4],
        priority = number(f[5]),
        interval = number(f[6]),
        retries = number(f[7]),
        count = number(f[8]),
        data = f[9],
        tags = tags,
        backlog = number(f[11]) or 0,
    }
end

-- Spawn the jobs of `queue`'s recurring templates that came due by `now`, at most `count` in
-- all. Each run is a job `<template jid>-<n>`, put at its own due time; with a backlog, runs
-- more than `backlog` intervals late are skipped.
local function spawn_recurring(queue, now, count)
    local key = queue_key(queue, 'recur')
    local spawned = 0
    for _, rjid in ipairs(redis.call('zrangebyscore', key, 0, now, 'LIMIT', 0, count)) do
        local t = redis.call('hmget', recur_key(rjid), 'klass', 'data', 'priority', 'tags',
            'retries', 'interval', 'backlog')
        local interval = number(t[6])
        if not t[1] or interval == nil then
            -- A template that is gone (or unreadable): qless-core fails here on every pop.
            redis.call('zrem', key, rjid)
        else
            local tags = stored_tags(t[4])
            local due = math.floor(tonumber(redis.call('zscore', key, rjid)))
            local backlog = number(t[7]) or 0
            if backlog ~= 0 then
                local late = (now - due) / interval
                if late > backlog then
                    due = due + math.ceil(late - backlog) * interval
                end
            end
            while due <= now and spawned < count do
                local n = redis.call('hincrby', recur_key(rjid), 'count', 1)
                local jid = rjid .. '-' .. n
                -- A template made again after `unrecur` counts from 0 again: skip the run
                -- numbers whose jobs still exist, where qless-core writes over them.
                while job_exists(jid) do
                    n = redis.call('hincrby', recur_key(rjid), 'count', 1)
                    jid = rjid .. '-' .. n
                end
                spawned = spawned + 1
                for _, tag in ipairs(tags) do
                    index_tag(jid, tag, now, 1)
                end
                redis.call('hset', job_key(jid),
                    'jid', jid,
                    'klass', t[1],
                    'data', t[2],
                    'priority', t[3] or 0,
                    'tags', t[4] or '{}',
                    'state', 'waiting',
                    'worker', '',
                    'expires', 0,
                    'queue', queue,
                    'retries', t[5] or 0,
                    'remaining', t[5] or 0,
                    'time', string.format('%.20f', due),
                    'spawned_from_jid', rjid)
                add_history(jid, due, 'put', { q = queue })
                work_add(queue, due, number(t[3]) or 0, jid)
                due = due + interval
                redis.call('zadd', key, due, rjid)
            end
        end
    end
end

-- from src/11_commands_jobs.lua
---------------------------------------------------------------------------------------------
-- Commands. Each entry of COMMANDS takes `now` and the command's arguments and returns the
-- reply; 11-17 fill it by concern (in each, in the order of qless-core's api.lua), 18
-- dispatches. Here: a job's life outside a worker (get, put, priority, log, cancel).
---------------------------------------------------------------------------------------------

local COMMANDS = {}

-- get <jid>  ->  the job as JSON, or nil
COMMANDS['get'] = function(now, jid)
    need_jid(jid)
    local data = job_data(jid)
    if not data then
        return nil
    end
    return cjson.encode(data)
end

-- multiget <jid>...  ->  JSON list of the jobs that exist
COMMANDS['multiget'] = function(now, ...)
    return cjson.encode(jobs_data({ ... }))
end

-- priority <jid> <priority>  ->  the priority (an integer reply: Redis truncates)
COMMANDS['priority'] = function(now, jid, priority)
    need_jid(jid)
    local p = number(priority)
    if p == nil then
        error('Priority(): Arg "priority" missing or not a number: ' .. tostring(priority))
    end
    local queue = redis.call('hget', job_key(jid), 'queue')
    if not queue then
        error('Priority(): Job ' .. jid .. ' does not exist')
    end
    if queue ~= '' and redis.call('zscore', queue_key(queue, 'work'), jid) then
        -- As qless-core: the new score has no time part, so the job goes first among the jobs
        -- of its new priority.
        work_add(queue, 0, p, jid)
    end
    redis.call('hset', job_key(jid), 'priority', p)
    return p
end

-- log <jid> <message> [data]  ->  nil; appends {what = message, when, data...} to the history
COMMANDS['log'] = function(now, jid, message, data)
    if not jid then
        error("Log(): Argument 'jid' missing")
    end
    if not message then
        error("Log(): Argument 'message' missing")
    end
    local details
    if data then
        details = cjson.decode(data)
        if not details then
            error("Log(): Argument 'data' not cjson: " .. data)
        end
        -- Other JSON values would be stored, and then qless-core could not read the job.
        if type(details) ~= 'table' then
            error("Log(): Argument 'data' not a JSON object: " .. data)
        end
    end
    if not job_exists(jid) then
        error('Log(): Job ' .. jid .. ' does not exist')
    end
    add_history(jid, now, message, details)
end

-- cancel <jid>...  ->  the jids given (a list reply). Jobs that are complete are left alone;
-- a job others depend on can only be cancelled together with them.
COMMANDS['cancel'] = function(now, ...)
    local jids = { ... }
    local dependents = {}
    for _, jid in ipairs(jids) do
        dependents[jid] = redis.call('smembers', dependents_key(jid))
    end
    for _, jid in ipairs(jids) do
        for _, dependent in ipairs(dependents[jid]) do
            if dependents[dependent] == nil then
                error('Cancel(): ' .. jid .. ' is a dependency of ' .. dependent ..
                    ' but is not mentioned to be canceled')
            end
        end
    end
    for _, jid in ipairs(jids) do
        local f = redis.call('hmget', job_key(jid), 'state', 'queue', 'failure', 'worker', 'tags')
        local state, queue, failure, worker = f[1], f[2], f[3], f[4]
        if state ~= 'complete' then
            local event = cjson.encode({ jid = jid, worker = worker, event = 'canceled',
                                         queue = queue })
            publish('log', event)
            if worker and worker ~= '' then
                redis.call('zrem', worker_key(worker), jid)
                publish('w:' .. worker, event)
            end
            if queue then
                queue_remove(queue, jid, ALL_JOB_SETS)
            end
            for _, dep in ipairs(redis.call('smembers', dependencies_key(jid))) do
                redis.call('srem', dependents_key(dep), jid)
            end
            redis.call('del', dependencies_key(jid))
            if state == 'failed' then
                local info = decode(failure)
                if type(info) == 'table' and info.group ~= nil then
                    redis.call('lrem', group_key(info.group), 0, jid)
                    if redis.call('llen', group_key(info.group)) == 0 then
                        redis.call('srem', FAILURES, info.group)
                    end
                    if number(info.when) and queue then
                        uncount_failed(queue, number(info.when))
                    end
                end
            end
            unindex_tags(jid, f[5])
            if is_tracked(jid) then
                publish('canceled', jid)
            end
            redis.call('del', job_key(jid))
            redis.call('del', history_key(jid))
        end
    end
    return jids
end

-- put <queue> <jid> <klass> <data> <delay> [priority <p>] [tags <json>] [retries <n>]
--     [depends <json>]  ->  jid
-- A job that exists is moved (its lock, if any, is lost); unset options keep its values.
COMMANDS['put'] = function(now, queue, jid, klass, data, delay, ...)
    need_queue(queue)
    -- Every check comes before the first write: qless-core takes the old tags off first.
    if not jid then
        error('Put(): Arg "jid" missing')
    end
    if not klass then
        error('Put(): Arg "klass" missing')
    end
    json_arg(data, 'Put(): Arg "data" missing or not JSON: ' .. tostring(data))
    local wait = number(delay)
    if wait == nil then
        error('Put(): Arg "delay" not a number: ' .. tostring(delay))
    end
    local options = read_options({ ... }, 1, true)
    local f = redis.call('hmget', job_key(jid), 'priority', 'tags', 'queue', 'state', 'failure',
        'retries', 'worker')
    local old_tags, old_queue, old_state, old_failure, old_worker = f[2], f[3], f[4], f[5], f[7]
    local retries = number(options['retries'] or f[6] or 5)
    if retries == nil then
        error('Put(): Arg "retries" not a number: ' .. tostring(options['retries']))
    end
    local tags
    if options['tags'] then
        tags = json_arg(options['tags'], 'Put(): Arg "tags" not JSON' .. options['tags'])
    else
        tags = stored_tags(old_tags)
    end
    local priority = number(options['priority'] or f[1] or 0)
    if priority == nil then
        error('Put(): Arg "priority" not a number' .. tostring(options['priority']))
    end
    local depends = json_arg(options['depends'] or '[]',
        'Put(): Arg "depends" not JSON: ' .. tostring(options['depends']))
    if not is_name_list(depends) then
        error('Put(): Arg "depends" not a JSON array of jids: ' .. options['depends'])
    end
    if wait > 0 and #depends > 0 then
        error('Put(): "delay" and "depends" are not allowed to be used together')
    end
    if not is_name_list(tags) then
        error('Put(): Arg "tags" not a JSON array of strings: ' .. options['tags'])
    end

    unindex_tags(jid, old_tags)
    if #depends > 0 then
        -- The new list replaces the dependencies the job had.
        local wanted = {}
        for _, dep in ipairs(depends) do
            wanted[dep] = true
        end
        for _, dep in ipairs(redis.call('smembers', dependencies_key(jid))) do
            if not wanted[dep] then
                redis.call('srem', dependents_key(dep), jid)
                redis.call('srem', dependencies_key(jid), dep)
            end
        end
    end
    publish('log', cjson.encode({ jid = jid, event = 'put', queue = queue }))
    add_history(jid, now, 'put', { q = queue })
    if old_queue then
        queue_remove(old_queue, jid, ALL_JOB_SETS)
    end
    if old_worker and old_worker ~= '' then
        redis.call('zrem', worker_key(old_worker), jid)
        local event = cjson.encode({ jid = jid, event = 'lock_lost', worker = old_worker })
        publish('w:' .. old_worker, event)
        publish('log', event)
    end
    if old_state == 'complete' then
        redis.call('zrem', COMPLETED, jid)
    end
    for _, tag in ipairs(tags) do
        index_tag(jid, tag, now, 1)
    end
    if old_state == 'failed' then
        local info = decode(old_failure)
        if type(info) == 'table' and info.group ~= nil then
            redis.call('lrem', group_key(info.group), 0, jid)
            if redis.call('llen', group_key(info.group)) == 0 then
                redis.call('srem', FAILURES, info.group)
            end
            -- The failure was counted on the queue the job failed in; qless-core takes it
            -- off the count of the queue the job is put in.
            if number(info.when) then
                uncount_failed(old_queue or queue, number(info.when))
            end
        end
    end
    local state = 'waiting'
    if wait > 0 then
        state = 'scheduled'
    end
    redis.call('hset', job_key(jid),
        'jid', jid,
        'klass', klass,
        'data', data,
        'priority', priority,
        'tags', cjson.encode(tags),
        'state', state,
        'worker', '',
        'expires', 0,
        'queue', queue,
        'retries', retries,
        'remaining', retries,
        'time', string.format('%.20f', now))
    add_dependencies(jid, depends)
    if wait > 0 then
        redis.call('zadd', queue_key(queue, 'scheduled'), now + wait, jid)
    elseif redis.call('scard', dependencies_key(jid)) > 0 then
        redis.call('zadd', queue_key(queue, 'depends'), now, jid)
        redis.call('hset', job_key(jid), 'state', 'depends')
    else
        work_add(queue, now, priority, jid)
    end
    add_queue_name(queue, now)
    if is_tracked(jid) then
        publish('put', jid)
    end
    return jid
end

-- requeue <queue> <jid> <klass> <data> <delay> [options]  ->  jid
-- `put` for a job that must exist. Not in qless-core 0.11.4 (later qless-core has it, with a
-- worker argument as its `put` has): an addition of ours.
COMMANDS['requeue'] = function(now, queue, jid, ...)
    need_jid(jid)
    if not job_exists(jid) then
        error('Requeue(): Job ' .. jid .. ' does not exist')
    end
    return COMMANDS['put'](now, queue, jid, ...)
end

-- from src/12_commands_running.lua
---------------------------------------------------------------------------------------------
-- Commands: a popped job in a worker's hands (complete, fail, retry, heartbeat, timeout),
-- and the dependencies a job waits on
---------------------------------------------------------------------------------------------

-- complete <jid> <worker> <queue> <data> [next <queue>] [delay <s>] [depends <json>]
--     ->  the job's new state: complete, waiting, scheduled or depends
COMMANDS['complete'] = function(now, jid, worker, queue, data, ...)
    need_jid(jid)
    if not worker then
        error('Complete(): Arg "worker" missing')
    end
    if not queue then
        error('Complete(): Arg "queue" missing')
    end
    json_arg(data, 'Complete(): Arg "data" missing or not JSON: ' .. tostring(data))
    local options = read_options({ ... }, 1)
    local next_queue = options['next']
    local delay = 0
    if options['delay'] ~= nil then
        delay = number(options['delay'])
        if delay == nil then
            error('Complete(): Arg "delay" not a number: ' .. options['delay'])
        end
    end
    local depends = json_arg(options['depends'] or '[]',
        'Complete(): Arg "depends" not JSON: ' .. tostring(options['depends']))
    if not is_name_list(depends) then
        error('Complete(): Arg "depends" not a JSON array of jids: ' .. options['depends'])
    end
    if delay > 0 and #depends > 0 then
        error('Complete(): "delay" and "depends" are not allowed together')
    end
    if options['delay'] and next_queue == nil then
        error('Complete(): "delay" cannot be used without a "next".')
    end
    if options['depends'] and next_queue == nil then
        error('Complete(): "depends" cannot be used without a "next".')
    end

    local f = redis.call('hmget', job_key(jid), 'worker', 'state', 'priority', 'retries', 'queue')
    local holder, state = f[1], f[2]
    if holder == false then
        error('Complete(): Job does not exist')
    elseif state ~= 'running' then
        error('Complete(): Job is not currently running: ' .. tostring(state))
    elseif holder ~= worker then
        error('Complete(): Job has been handed out to another worker: ' .. tostring(holder))
    elseif f[5] ~= queue then
        -- qless-core would take the job out of the named queue's sets only, leaving its lock
        -- in its own queue, to be handed out again after it completed.
        error('Complete(): Job is in queue "' .. tostring(f[5]) .. '", not "' .. queue .. '"')
    end
    local history_count, history_age
    if not next_queue then
        history_count = config_number('Complete()', 'jobs-history-count', 50000, true)
        history_age = config_number('Complete()', 'jobs-history', 604800)
    end
    local retries = number(f[4]) or 5

    add_history(jid, now, 'done')
    -- The data is stored as given (qless-core re-encodes it with cjson, which turns [] into
    -- {} and keeps 14 significant digits of numbers).
    redis.call('hset', job_key(jid), 'data', data)
    queue_remove(queue, jid, ACTIVE)
    local started = tonumber(redis.call('hget', job_key(jid), 'time')) or now
    record_stat(queue, now, 'run', now - started)
    redis.call('hset', job_key(jid), 'time', string.format('%.20f', now))
    redis.call('zrem', worker_key(worker), jid)
    if is_tracked(jid) then
        publish('completed', jid)
    end

    if next_queue then
        publish('log', cjson.encode({ jid = jid, event = 'advanced', queue = queue,
                                      to = next_queue }))
        add_history(jid, now, 'put', { q = next_queue })
        add_queue_name(next_queue, now)
        redis.call('hset', job_key(jid),
            'state', 'waiting',
            'worker', '',
            'failure', '{}',
            'queue', next_queue,
            'expires', 0,
            'remaining', retries)
        if delay > 0 then
            redis.call('zadd', queue_key(next_queue, 'scheduled'), now + delay, jid)
            -- qless-core leaves the state `waiting` here while the job waits in `scheduled`.
            redis.call('hset', job_key(jid), 'state', 'scheduled')
            return 'scheduled'
        end
        add_dependencies(jid, depends)
        if redis.call('scard', dependencies_key(jid)) > 0 then
            redis.call('zadd', queue_key(next_queue, 'depends'), now, jid)
            redis.call('hset', job_key(jid), 'state', 'depends')
            return 'depends'
        end
        work_add(next_queue, now, number(f[3]) or 0, jid)
        return 'waiting'
    end

    publish('log', cjson.encode({ jid = jid, event = 'completed', queue = queue }))
    redis.call('hset', job_key(jid),
        'state', 'complete',
        'worker', '',
        'failure', '{}',
        'queue', '',
        'expires', 0,
        'remaining', retries)

    -- Keep completed jobs `jobs-history` seconds, and at most `jobs-history-count` of them.
    redis.call('zadd', COMPLETED, now, jid)
    local function forget(old)
        unindex_tags(old, redis.call('hget', job_key(old), 'tags'))
        redis.call('del', job_key(old))
        redis.call('del', history_key(old))
    end
    for _, old in ipairs(redis.call('zrangebyscore', COMPLETED, 0, now - history_age)) do
        forget(old)
    end
    redis.call('zremrangebyscore', COMPLETED, 0, now - history_age)
    for _, old in ipairs(redis.call('zrange', COMPLETED, 0, -1 - history_count)) do
        forget(old)
    end
    redis.call('zremrangebyrank', COMPLETED, 0, -1 - history_count)

    -- Jobs that waited on this one and wait on nothing else now become waiting.
    for _, dependent in ipairs(redis.call('smembers', dependents_key(jid))) do
        redis.call('srem', dependencies_key(dependent), jid)
        if redis.call('scard', dependencies_key(dependent)) == 0 then
            release(dependent, now)
        end
    end
    redis.call('del', dependents_key(jid))
    return 'complete'
end

-- fail <jid> <worker> <group> <message> [data]  ->  jid
COMMANDS['fail'] = function(now, jid, worker, group, message, data)
    need_jid(jid)
    if not worker then
        error('Fail(): Arg "worker" missing')
    end
    if not group then
        error('Fail(): Arg "group" missing')
    end
    if not message then
        error('Fail(): Arg "message" missing')
    end
    local new_data = false
    if data then
        new_data = cjson.decode(data) ~= false
    end
    local f = redis.call('hmget', job_key(jid), 'queue', 'state', 'worker')
    local queue, state = f[1], f[2]
    if not state then
        error('Fail(): Job does not exist')
    elseif state ~= 'running' then
        error('Fail(): Job not currently running: ' .. state)
    elseif f[3] ~= worker then
        -- qless-core takes the job from any worker, and leaves it in its holder's job set.
        error('Fail(): Job has been handed out to another worker: ' .. tostring(f[3]))
    end

    publish('log', cjson.encode({ jid = jid, event = 'failed', worker = worker, group = group,
                                  message = message }))
    if is_tracked(jid) then
        publish('failed', jid)
    end
    redis.call('zrem', worker_key(worker), jid)
    add_history(jid, now, 'failed', { worker = worker, group = group })
    local day = day_of(now)
    count_stat(queue, day, 'failures', 1)
    count_stat(queue, day, 'failed', 1)
    queue_remove(queue, jid, ACTIVE)
    if new_data then
        redis.call('hset', job_key(jid), 'data', data)
    end
    redis.call('hset', job_key(jid),
        'state', 'failed',
        'worker', '',
        'expires', '',
        'failure', cjson.encode({
            group = group,
            message = message,
            when = math.floor(now),
            worker = worker,
        }))
    redis.call('sadd', FAILURES, group)
    redis.call('lpush', group_key(group), jid)
    return jid
end

-- retry <jid> <queue> <worker> [delay [group message]]  ->  the retries left; below 0 the job
-- failed instead (group `failed-retries-<queue>` unless one is given)
COMMANDS['retry'] = function(now, jid, queue, worker, delay, group, message)
    need_jid(jid)
    if not queue then
        error('Retry(): Arg "queue" missing')
    end
    if not worker then
        error('Retry(): Arg "worker" missing')
    end
    local wait = number(delay or 0)
    if wait == nil then
        error('Retry(): Arg "delay" not a number: ' .. tostring(delay))
    end
    local f = redis.call('hmget', job_key(jid), 'queue', 'state', 'worker', 'priority')
    local old_queue, state, holder = f[1], f[2], f[3]
    if holder == false then
        error('Retry(): Job does not exist')
    elseif state ~= 'running' then
        error('Retry(): Job is not currently running: ' .. tostring(state))
    elseif holder ~= worker then
        error('Retry(): Job has been given to another worker: ' .. holder)
    elseif old_queue ~= queue then
        -- qless-core would put the job in the named queue while its hash names the old one.
        error('Retry(): Job is in queue "' .. tostring(old_queue) .. '", not "' .. queue .. '"')
    end

    local remaining = redis.call('hincrby', job_key(jid), 'remaining', -1)
    redis.call('hdel', job_key(jid), 'grace')
    redis.call('zrem', queue_key(queue, 'locks'), jid)
    redis.call('zrem', worker_key(worker), jid)
    if remaining < 0 then
        local failed_group = group or ('failed-retries-' .. queue)
        add_history(jid, now, 'failed', { group = failed_group })
        redis.call('hset', job_key(jid), 'state', 'failed', 'worker', '', 'expires', '')
        local failure
        if message ~= nil then
            failure = { group = failed_group, message = message, when = math.floor(now),
                        worker = worker }
        else
            failure = { group = failed_group, message = exhausted_message(queue), when = now,
                        worker = '' }
        end
        redis.call('hset', job_key(jid), 'failure', cjson.encode(failure))
        redis.call('sadd', FAILURES, failed_group)
        redis.call('lpush', group_key(failed_group), jid)
    else
        if wait > 0 then
            redis.call('zadd', queue_key(queue, 'scheduled'), now + wait, jid)
            redis.call('hset', job_key(jid), 'state', 'scheduled')
        else
            work_add(queue, now, number(f[4]) or 0, jid)
            redis.call('hset', job_key(jid), 'state', 'waiting')
        end
        if group ~= nil and message ~= nil then
            redis.call('hset', job_key(jid), 'failure', cjson.encode({
                group = group,
                message = message,
                when = math.floor(now),
                worker = worker,
            }))
        end
    end
    return remaining
end

-- depends <jid> on <jid>...  |  depends <jid> off <jid>...  |  depends <jid> off all  ->  1
-- (only for a job in the depends state)
COMMANDS['depends'] = function(now, jid, command, ...)
    need_jid(jid)
    if not command then
        error('Depends(): Arg "command" missing')
    end
    local state = redis.call('hget', job_key(jid), 'state')
    if state ~= 'depends' then
        error('Depends(): Job ' .. jid .. ' not in the depends state: ' .. tostring(state))
    end
    local jids = { ... }
    if command == 'on' then
        add_dependencies(jid, jids)
        return true
    elseif command == 'off' then
        if jids[1] == 'all' then
            for _, dep in ipairs(redis.call('smembers', dependencies_key(jid))) do
                redis.call('srem', dependents_key(dep), jid)
            end
            redis.call('del', dependencies_key(jid))
            release(jid, now)
        else
            for _, dep in ipairs(jids) do
                redis.call('srem', dependents_key(dep), jid)
                redis.call('srem', dependencies_key(jid), dep)
                if redis.call('scard', dependencies_key(jid)) == 0 then
                    release(jid, now)
                end
            end
        end
        return true
    end
    error('Depends(): Argument "command" must be "on" or "off"')
end

-- heartbeat <jid> <worker> [data]  ->  the new lock expiry (an integer reply: Redis truncates)
COMMANDS['heartbeat'] = function(now, jid, worker, data)
    need_jid(jid)
    if not worker then
        error('Heatbeat(): Arg "worker" missing') -- sic: qless-core's spelling
    end
    local queue = redis.call('hget', job_key(jid), 'queue') or ''
    local expires = now + heartbeat_of('Heartbeat()', queue)
    local new_data = false
    if data then
        new_data = cjson.decode(data) ~= false
    end
    local f = redis.call('hmget', job_key(jid), 'worker', 'state')
    local holder, state = f[1], f[2]
    if holder == false then
        error('Heartbeat(): Job does not exist')
    elseif state ~= 'running' then
        error('Heartbeat(): Job not currently running: ' .. tostring(state))
    elseif holder ~= worker or #holder == 0 then
        error('Heartbeat(): Job given out to another worker: ' .. holder)
    end
    redis.call('hset', job_key(jid), 'expires', expires, 'worker', worker)
    if new_data then
        redis.call('hset', job_key(jid), 'data', data)
    end
    redis.call('zadd', worker_key(worker), expires, jid)
    redis.call('zadd', queue_key(queue, 'locks'), expires, jid)
    return expires
end

-- timeout <jid>...  ->  nil; takes running jobs' locks back at once (they go first in their
-- queue, `stalled`)
COMMANDS['timeout'] = function(now, ...)
    for _, jid in ipairs({ ... }) do
        local f = redis.call('hmget', job_key(jid), 'queue', 'state', 'worker')
        local queue, state, worker = f[1], f[2], f[3]
        if state ~= 'running' then
            error('Timeout(): Job ' .. jid .. ' not running')
        end
        add_history(jid, now, 'timed-out')
        redis.call('zrem', queue_key(queue, 'locks'), jid)
        work_add(queue, now, math.huge, jid)
        redis.call('hset', job_key(jid), 'state', 'stalled', 'expires', 0)
        local event = cjson.encode({ jid = jid, event = 'lock_lost', worker = worker })
        publish('w:' .. worker, event)
        publish('log', event)
    end
end

-- from src/13_commands_tracking.lua
---------------------------------------------------------------------------------------------
-- Commands: tracked jobs (`ql:tracked`) and job tags
---------------------------------------------------------------------------------------------

-- track  ->  JSON {jobs: [job...], expired: [jid...]}
-- track track|untrack <jid>  ->  "1" or "0" (a JSON number, as qless-core replies)
COMMANDS['track'] = function(now, command, jid)
    if command == nil then
        local jobs, expired = {}, {}
        for _, tracked in ipairs(redis.call('zrange', TRACKED, 0, -1)) do
            local data = job_data(tracked)
            if data then
                jobs[#jobs + 1] = data
            else
                expired[#expired + 1] = tracked
            end
        end
        return cjson.encode({ jobs = jobs, expired = expired })
    end
    if not jid then
        error('Track(): Arg "jid" missing')
    end
    if not job_exists(jid) then
        error('Track(): Job does not exist')
    end
    local action = string.lower(command)
    if action == 'track' then
        publish('track', jid)
        return cjson.encode(redis.call('zadd', TRACKED, now, jid))
    elseif action == 'untrack' then
        publish('untrack', jid)
        return cjson.encode(redis.call('zrem', TRACKED, jid))
    end
    error('Track(): Unknown action "' .. command .. '"')
end

-- tag add <jid> <tag>...  ->  the job's tags as JSON, encoded as a JSON string once more
--     (qless-core's reply)
-- tag remove <jid> <tag>...  ->  the job's tags as JSON
-- tag get <tag> [offset [end]]  ->  JSON {total, jobs: [jid...]}
-- tag top [offset [count]]  ->  JSON list of the tags on at least 2 jobs, most used first
--
-- `ql:tags` counts, for each tag, the jobs that carry it. qless-core counts a tag again when it
-- is added to a job that has it, and off when it is removed from a job that lacks it; we count
-- only real changes.
COMMANDS['tag'] = function(now, command, ...)
    if not command then
        error('Tag(): Arg "command" must be "add", "remove", "get" or "top"')
    end
    local args = { ... }
    if command == 'add' or command == 'remove' then
        local jid = args[1]
        if not jid then
            error('Tag(): Arg "jid" missing')
        end
        local text = redis.call('hget', job_key(jid), 'tags')
        if not text then
            error('Tag(): Job ' .. jid .. ' does not exist')
        end
        local tags = stored_tags(text)
        if command == 'add' then
            local has = {}
            for _, tag in ipairs(tags) do
                has[tag] = true
            end
            for i = 2, #args do
                local tag = args[i]
                if has[tag] then
                    redis.call('zadd', tag_key(tag), now, jid)
                else
                    has[tag] = true
                    tags[#tags + 1] = tag
                    index_tag(jid, tag, now, 1)
                end
            end
            local encoded = cjson.encode(tags)
            redis.call('hset', job_key(jid), 'tags', encoded)
            return cjson.encode(encoded)
        end
        local drop = {}
        for i = 2, #args do
            drop[args[i]] = true
        end
        local kept, carried = {}, {}
        for _, tag in ipairs(tags) do
            if drop[tag] then
                carried[tag] = (carried[tag] or 0) + 1
            else
                kept[#kept + 1] = tag
            end
        end
        for i = 2, #args do
            local tag = args[i]
            redis.call('zrem', tag_key(tag), jid)
            if carried[tag] then
                redis.call('zincrby', TAGS, -carried[tag], tag)
                carried[tag] = nil
            end
        end
        redis.call('hset', job_key(jid), 'tags', cjson.encode(kept))
        return cjson.encode(kept)
    elseif command == 'get' then
        local tag = args[1]
        if not tag then
            error('Tag(): Arg "tag" missing')
        end
        local offset = number(args[2] or 0)
        if offset == nil then
            error('Tag(): Arg "offset" not a number: ' .. tostring(args[2]))
        end
        local last = number(args[3] or 25)
        if last == nil then
            error('Tag(): Arg "count" not a number: ' .. tostring(args[3]))
        end
        -- As qless-core: the third argument is the end of the range, not its length.
        return cjson.encode({
            total = redis.call('zcard', tag_key(tag)),
            jobs = redis.call('zrange', tag_key(tag), offset, last),
        })
    elseif command == 'top' then
        local offset = number(args[1] or 0)
        if offset == nil then
            error('Tag(): Arg "offset" not a number: ' .. tostring(args[1]))
        end
        local count = number(args[2] or 25)
        if count == nil then
            error('Tag(): Arg "count" not a number: ' .. tostring(args[2]))
        end
        return cjson.encode(redis.call('zrevrangebyscore', TAGS, '+inf', 2,
            'LIMIT', offset, count))
    end
    error('Tag(): First argument must be "add", "remove" or "get"')
end

-- from src/14_commands_queues.lua
---------------------------------------------------------------------------------------------
-- Commands: queues (counts, listings, pop and peek, pause, failure groups, statistics)
---------------------------------------------------------------------------------------------

-- queues [queue]  ->  JSON counts of one queue, or a list for every known queue
COMMANDS['queues'] = function(now, queue)
    if queue then
        return cjson.encode(queue_counts(queue, now))
    end
    local out = {}
    for _, name in ipairs(redis.call('zrange', QUEUES, 0, -1)) do
        out[#out + 1] = queue_counts(name, now)
    end
    return cjson.encode(out)
end

-- failed  ->  JSON {group: number of jobs}
-- failed <group> [start [limit]]  ->  JSON {total, jobs: [jid...]}
COMMANDS['failed'] = function(now, group, start, limit)
    local first = number(start or 0)
    if first == nil then
        error('Failed(): Arg "start" is not a number: ' .. start)
    end
    local size = number(limit or 25)
    if size == nil then
        error('Failed(): Arg "limit" is not a number: ' .. limit)
    end
    if group then
        -- As qless-core: `limit` is the end of the range, not its length.
        return cjson.encode({
            total = redis.call('llen', group_key(group)),
            jobs = redis.call('lrange', group_key(group), first, size - 1),
        })
    end
    local counts = {}
    for _, name in ipairs(redis.call('smembers', FAILURES)) do
        counts[name] = redis.call('llen', group_key(name))
    end
    return cjson.encode(counts)
end

-- jobs complete [offset [count]]  |  jobs <running|stalled|scheduled|depends|recurring>
--     <queue> [offset [count]]  ->  a list of jids
COMMANDS['jobs'] = function(now, state, ...)
    if not state then
        error('Jobs(): Arg "state" missing')
    end
    local args = { ... }
    local function page(i)
        local offset = number(args[i] or 0)
        if offset == nil then
            error('Jobs(): Arg "offset" not a number: ' .. tostring(args[i]))
        end
        local count = number(args[i + 1] or 25)
        if count == nil then
            error('Jobs(): Arg "count" not a number: ' .. tostring(args[i + 1]))
        end
        return offset, count
    end
    if state == 'complete' then
        local offset, count = page(1)
        return redis.call('zrevrange', COMPLETED, offset, offset + count - 1)
    end
    local queue = args[1]
    if not queue then
        error('Jobs(): Arg "queue" missing')
    end
    local offset, count = page(2)
    if state == 'running' then
        return redis.call('zrangebyscore', queue_key(queue, 'locks'), now, '+inf',
            'LIMIT', offset, count)
    elseif state == 'stalled' then
        return expired_locks(queue, now, offset, count)
    elseif state == 'scheduled' then
        promote_scheduled(queue, now, redis.call('zcard', queue_key(queue, 'scheduled')))
        return redis.call('zrange', queue_key(queue, 'scheduled'), offset, offset + count - 1)
    elseif state == 'depends' then
        return redis.call('zrange', queue_key(queue, 'depends'), offset, offset + count - 1)
    elseif state == 'recurring' then
        return redis.call('zrangebyscore', queue_key(queue, 'recur'), 0, '+inf',
            'LIMIT', offset, count)
    end
    error('Jobs(): Unknown type "' .. state .. '"')
end

-- stats <queue> <date>  ->  JSON {retries, failed, failures, wait, run} of the day `date` is in
COMMANDS['stats'] = function(now, queue, date)
    need_queue(queue)
    local t = number(date)
    if t == nil then
        error('Stats(): Arg "date" missing or not a number: ' .. (date or 'nil'))
    end
    local day = day_of(t)
    local counts = redis.call('hmget', stats_key('stats', day, queue), 'retries', 'failed',
        'failures')
    return cjson.encode({
        retries = tonumber(counts[1] or 0),
        failed = tonumber(counts[2] or 0),
        failures = tonumber(counts[3] or 0),
        wait = stat_summary('wait', day, queue),
        run = stat_summary('run', day, queue),
    })
end

-- peek <queue> <count>  ->  JSON list of the jobs pop would hand out next (stalled first),
-- without locking them
COMMANDS['peek'] = function(now, queue, count)
    need_queue(queue)
    local n = number(count)
    if n == nil then
        error('Peek(): Arg "count" missing or not a number: ' .. tostring(count))
    end
    local jids = expired_locks(queue, now, 0, n)
    spawn_recurring(queue, now, n - #jids)
    promote_scheduled(queue, now, n - #jids)
    for _, jid in ipairs(work_peek(queue, n - #jids)) do
        jids[#jids + 1] = jid
    end
    return cjson.encode(jobs_data(jids))
end

-- pop <queue> <worker> <count>  ->  JSON list of the jobs now locked for `worker`: jobs whose
-- lock was taken back first, then due recurring and scheduled jobs, then waiting jobs by
-- priority. A paused queue hands out nothing; `<queue>-max-concurrency` caps running jobs.
COMMANDS['pop'] = function(now, queue, worker, count)
    need_queue(queue)
    if not worker then
        error('Pop(): Arg "worker" missing')
    end
    local n = number(count)
    if n == nil then
        error('Pop(): Arg "count" missing or not a number: ' .. tostring(count))
    end
    local expires = now + heartbeat_of('Pop()', queue)
    if is_paused(queue) then
        return cjson.encode({})
    end
    local limit = config_number('Pop()', queue .. '-max-concurrency', 0)
    if limit > 0 then
        local running = redis.call('zcount', queue_key(queue, 'locks'), now, '+inf')
        n = math.min(math.max(0, limit - running), n)
    end
    -- The grace period matters only when a lock expired; it is checked before the first write.
    local grace = 0
    if #expired_locks(queue, now, 0, n) > 0 then
        grace = config_number('Pop()', 'grace-period', 10)
    end

    redis.call('zadd', WORKERS, now, worker)
    if limit > 0 and n == 0 then
        return cjson.encode({})
    end
    local jids = invalidate_locks(queue, now, n, grace)
    spawn_recurring(queue, now, n - #jids)
    promote_scheduled(queue, now, n - #jids)
    for _, jid in ipairs(work_peek(queue, n - #jids)) do
        jids[#jids + 1] = jid
    end

    local popped = {}
    for _, jid in ipairs(jids) do
        -- A jid whose job is gone is dropped from the queue (qless-core fails on it).
        if redis.call('hget', job_key(jid), 'jid') then
            add_history(jid, now, 'popped', { worker = worker })
            local put_at = tonumber(redis.call('hget', job_key(jid), 'time')) or now
            record_stat(queue, now, 'wait', now - put_at)
            redis.call('hset', job_key(jid), 'time', string.format('%.20f', now))
            redis.call('zadd', worker_key(worker), expires, jid)
            redis.call('hset', job_key(jid), 'worker', worker, 'expires', expires,
                'state', 'running')
            redis.call('zadd', queue_key(queue, 'locks'), expires, jid)
            if is_tracked(jid) then
                publish('popped', jid)
            end
            popped[#popped + 1] = jid
        else
            redis.call('zrem', queue_key(queue, 'locks'), jid)
        end
    end
    zrem_all(queue_key(queue, 'work'), jids)
    return cjson.encode(jobs_data(popped))
end

-- pause <queue>...  /  unpause <queue>...  ->  nil
COMMANDS['pause'] = function(now, ...)
    redis.call('sadd', PAUSED, ...)
end

COMMANDS['unpause'] = function(now, ...)
    redis.call('srem', PAUSED, ...)
end

-- unfail <queue> <group> [count]  ->  how many jobs moved: the `count` oldest failures of
-- `group` wait in `queue` again
COMMANDS['unfail'] = function(now, queue, group, count)
    need_queue(queue)
    if not group then
        error('Unfail(): Arg "group" missing')
    end
    local n = number(count or 25)
    if n == nil then
        error('Unfail(): Arg "count" not a number: ' .. tostring(count))
    end
    local key = group_key(group)
    local jids = redis.call('lrange', key, -n, -1)
    for _, jid in ipairs(jids) do
        local f = redis.call('hmget', job_key(jid), 'jid', 'retries', 'priority')
        if f[1] then
            add_history(jid, now, 'put', { q = queue })
            redis.call('hset', job_key(jid),
                'state', 'waiting',
                'worker', '',
                'expires', 0,
                'queue', queue,
                'remaining', number(f[2]) or 5)
            work_add(queue, now, number(f[3]) or 0, jid)
        end
    end
    redis.call('ltrim', key, 0, -n - 1)
    if redis.call('llen', key) == 0 then
        redis.call('srem', FAILURES, group)
    end
    return #jids
end

-- length <queue>  ->  running + waiting + scheduled jobs
COMMANDS['length'] = function(now, queue)
    need_queue(queue)
    return redis.call('zcard', queue_key(queue, 'locks')) +
        redis.call('zcard', queue_key(queue, 'work')) +
        redis.call('zcard', queue_key(queue, 'scheduled'))
end

-- queue.forget <queue>...  ->  nil (the queues leave `ql:queues`)
COMMANDS['queue.forget'] = function(now, ...)
    redis.call('zrem', QUEUES, ...)
end

-- from src/15_commands_recurring.lua
---------------------------------------------------------------------------------------------
-- Commands: recurring templates
---------------------------------------------------------------------------------------------

-- recur <queue> <jid> <klass> <data> interval <seconds> <offset> [priority <p>] [tags <json>]
--     [retries <n>] [backlog <n>]  ->  jid
-- The first run is due at now + offset. Recurring again keeps the template's run count, so
-- its next job is not a jid used before.
COMMANDS['recur'] = function(now, queue, jid, klass, data, spec, ...)
    need_queue(queue)
    if not jid then
        error('RecurringJob On(): Arg "jid" missing')
    end
    if not klass then
        error('RecurringJob On(): Arg "klass" missing')
    end
    if not spec then
        error('RecurringJob On(): Arg "spec" missing')
    end
    json_arg(data, 'RecurringJob On(): Arg "data" not JSON: ' .. tostring(data))
    if spec ~= 'interval' then
        error('Recur(): schedule type "' .. tostring(spec) .. '" unknown')
    end
    local args = { ... }
    local interval = number(args[1])
    if interval == nil then
        error('Recur(): Arg "interval" not a number: ' .. tostring(args[1]))
    end
    local offset = number(args[2])
    if offset == nil then
        error('Recur(): Arg "offset" not a number: ' .. tostring(args[2]))
    end
    if interval <= 0 then
        error('Recur(): Arg "interval" must be greater than or equal to 0') -- sic
    end
    local options = read_options(args, 3, true)
    local tags = json_arg(options['tags'] or '{}',
        'Recur(): Arg "tags" must be JSON string array: ' .. tostring(options['tags']))
    local function numeric(name)
        local x = number(options[name] or 0)
        if x == nil then
            error('Recur(): Arg "' .. name .. '" not a number: ' .. tostring(options[name]))
        end
        return x
    end
    local priority = numeric('priority')
    local retries = numeric('retries')
    local backlog = numeric('backlog')
    if not is_name_list(tags) then
        -- qless-core stores it, and then every pop of the queue fails.
        error('Recur(): Arg "tags" must be JSON string array: ' .. options['tags'])
    end

    local f = redis.call('hmget', recur_key(jid), 'count', 'queue')
    if f[2] then
        redis.call('zrem', queue_key(f[2], 'recur'), jid)
    end
    redis.call('hset', recur_key(jid),
        'jid', jid,
        'klass', klass,
        'data', data,
        'priority', priority,
        'tags', cjson.encode(tags),
        'state', 'recur',
        'queue', queue,
        'type', 'interval',
        'count', f[1] or 0,
        'interval', interval,
        'retries', retries,
        'backlog', backlog)
    redis.call('zadd', queue_key(queue, 'recur'), now + offset, jid)
    add_queue_name(queue, now)
    return jid
end

-- unrecur <jid>  ->  1
COMMANDS['unrecur'] = function(now, jid)
    need_recurring_jid(jid)
    local queue = redis.call('hget', recur_key(jid), 'queue')
    if queue then
        redis.call('zrem', queue_key(queue, 'recur'), jid)
        redis.call('del', recur_key(jid))
    end
    return true
end

-- recur.get <jid>  ->  the template as JSON, or nil
COMMANDS['recur.get'] = function(now, jid)
    need_recurring_jid(jid)
    local data = recurring_data(jid)
    if not data then
        return nil
    end
    return cjson.encode(data)
end

-- recur.update <jid> <option> <value> [<option> <value>...]  ->  1
-- Options: priority, interval, retries, data, klass, queue, backlog. All are checked before
-- any is applied (qless-core applies them one by one and stops at the first bad one).
COMMANDS['recur.update'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local key = recur_key(jid)
    if redis.call('exists', key) == 0 then
        error('Recur(): No recurring job ' .. jid)
    end
    local _, given = read_options({ ... }, 1)
    local changes = {}
    for _, pair in ipairs(given) do
        local option, text = pair[1], pair[2]
        if text == nil then
            error('No value provided for ' .. tostring(option))
        end
        local value = text
        if option == 'priority' or option == 'interval' or option == 'retries' then
            value = number(text)
            if value == nil then
                error('Recur(): Arg "' .. option .. '" must be a number: ' .. text)
            end
            -- qless-core takes an interval of 0 or less here (`recur` refuses it): each pop
            -- would then spawn as many runs as it asks for.
            if option == 'interval' and value <= 0 then
                error('Recur(): Arg "interval" must be greater than or equal to 0') -- sic
            end
        elseif option == 'data' then
            json_arg(value, 'Recur(): Arg "data" is not JSON-encoded: ' .. value)
        elseif option == 'backlog' then
            value = number(text)
            if value == nil then
                error('Recur(): Arg "backlog" not a number: ' .. text)
            end
        elseif option ~= 'klass' and option ~= 'queue' then
            error('Recur(): Unrecognized option "' .. option .. '"')
        end
        changes[#changes + 1] = { option, value }
    end
    for _, change in ipairs(changes) do
        local option, value = change[1], change[2]
        if option == 'interval' then
            -- The next run moves by the change of interval.
            local f = redis.call('hmget', key, 'queue', 'interval')
            redis.call('zincrby', queue_key(f[1], 'recur'), value - (number(f[2]) or 0), jid)
        elseif option == 'queue' then
            local old = redis.call('hget', key, 'queue')
            local due = redis.call('zscore', queue_key(old, 'recur'), jid)
            redis.call('zrem', queue_key(old, 'recur'), jid)
            if due then
                redis.call('zadd', queue_key(value, 'recur'), due, jid)
            end
            add_queue_name(value, now)
        end
        redis.call('hset', key, option, value)
    end
    return true
end

-- recur.tag <jid> <tag>...  /  recur.untag <jid> <tag>...  ->  the template's tags as JSON
COMMANDS['recur.tag'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local text = redis.call('hget', recur_key(jid), 'tags')
    if not text then
        error('Tag(): Job ' .. jid .. ' does not exist')
    end
    local tags = stored_tags(text)
    local has = {}
    for _, tag in ipairs(tags) do
        has[tag] = true
    end
    for _, tag in ipairs({ ... }) do
        if not has[tag] then
            has[tag] = true
            tags[#tags + 1] = tag
        end
    end
    local encoded = cjson.encode(tags)
    redis.call('hset', recur_key(jid), 'tags', encoded)
    return encoded
end

COMMANDS['recur.untag'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local text = redis.call('hget', recur_key(jid), 'tags')
    if not text then
        error('Untag(): Job ' .. jid .. ' does not exist')
    end
    local drop = {}
    for _, tag in ipairs({ ... }) do
        drop[tag] = true
    end
    local kept = {}
    for _, tag in ipairs(stored_tags(text)) do
        if not drop[tag] then
            kept[#kept + 1] = tag
        end
    end
    local encoded = cjson.encode(kept)
    redis.call('hset', recur_key(jid), 'tags', encoded)
    return encoded
end

-- from src/16_commands_config.lua
---------------------------------------------------------------------------------------------
-- Commands: configuration (the `ql:config` hash)
---------------------------------------------------------------------------------------------

-- config.get [option]  ->  the value (a default is an integer reply), or all options as JSON
COMMANDS['config.get'] = function(now, option)
    if option then
        return config_get(option)
    end
    local all = {}
    for name, value in pairs(CONFIG_DEFAULTS) do
        all[name] = value
    end
    local stored = redis.call('hgetall', CONFIG)
    for i = 1, #stored, 2 do
        all[stored[i]] = stored[i + 1]
    end
    return cjson.encode(all)
end

-- config.set <option> <value>  (any text is stored, as qless-core does)
COMMANDS['config.set'] = function(now, option, value)
    if not option then
        error('config.set(): Arg "option" missing')
    end
    if not value then
        error('config.set(): Arg "value" missing')
    end
    publish('log', cjson.encode({ event = 'config_set', option = option, value = value }))
    redis.call('hset', CONFIG, option, value)
end

-- config.unset <option>
COMMANDS['config.unset'] = function(now, option)
    if not option then
        error('config.unset(): Arg "option" missing')
    end
    publish('log', cjson.encode({ event = 'config_unset', option = option }))
    redis.call('hdel', CONFIG, option)
end

-- from src/17_commands_workers.lua
---------------------------------------------------------------------------------------------
-- Commands: workers (`ql:workers`)
---------------------------------------------------------------------------------------------

-- workers  ->  JSON list of {name, jobs, stalled} (counts), most recently seen first
-- workers <worker>  ->  JSON {jobs: [jid...], stalled: [jid...]}
-- Workers not seen (popping) for `max-worker-age` seconds are forgotten first.
COMMANDS['workers'] = function(now, worker)
    local age = config_number('Workers()', 'max-worker-age', 86400)
    for _, old in ipairs(redis.call('zrangebyscore', WORKERS, 0, now - age)) do
        redis.call('del', worker_key(old))
    end
    redis.call('zremrangebyscore', WORKERS, 0, now - age)
    if worker then
        return cjson.encode({
            jobs = redis.call('zrevrangebyscore', worker_key(worker), now + 8640000, now),
            stalled = redis.call('zrevrangebyscore', worker_key(worker), now, 0),
        })
    end
    local out = {}
    for _, name in ipairs(redis.call('zrevrange', WORKERS, 0, -1)) do
        out[#out + 1] = {
            name = name,
            jobs = redis.call('zcount', worker_key(name), now, now + 8640000),
            stalled = redis.call('zcount', worker_key(name), 0, now),
        }
    end
    return cjson.encode(out)
end

-- worker.deregister <worker>...  ->  nil (the workers leave `ql:workers`)
COMMANDS['worker.deregister'] = function(now, ...)
    redis.call('zrem', WORKERS, ...)
end

-- from src/18_dispatch.lua
---------------------------------------------------------------------------------------------
-- Dispatch: EVALSHA <sha> 0 <command> <now> <args...>
---------------------------------------------------------------------------------------------

if #KEYS > 0 then
    error('No Keys should be provided')
end
local name = ARGV[1]
if not name then
    error('Must provide a command')
end
local command = COMMANDS[name]
if not command then
    error('Unknown command ' .. name)
end
local now = number(ARGV[2])
if not now then
    error('Arg "now" missing or not a number: ' .. tostring(ARGV[2]))
end
return command(now, unpack(ARGV, 3))
