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
