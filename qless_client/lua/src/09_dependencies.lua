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
