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
