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
