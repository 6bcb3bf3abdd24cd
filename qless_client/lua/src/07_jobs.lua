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
