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
