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
