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
