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
