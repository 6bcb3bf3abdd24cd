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
