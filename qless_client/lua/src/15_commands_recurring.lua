---------------------------------------------------------------------------------------------
-- Commands: recurring templates
---------------------------------------------------------------------------------------------

-- recur <queue> <jid> <klass> <data> interval <seconds> <offset> [priority <p>] [tags <json>]
--     [retries <n>] [backlog <n>]  ->  jid
-- The first run is due at now + offset. Recurring again keeps the template's run count, so
-- its next job is not a jid used before.
COMMANDS['recur'] = function(now, queue, jid, klass, data, spec, ...)
    need_queue(queue)
    if not jid then
        error('RecurringJob On(): Arg "jid" missing')
    end
    if not klass then
        error('RecurringJob On(): Arg "klass" missing')
    end
    if not spec then
        error('RecurringJob On(): Arg "spec" missing')
    end
    json_arg(data, 'RecurringJob On(): Arg "data" not JSON: ' .. tostring(data))
    if spec ~= 'interval' then
        error('Recur(): schedule type "' .. tostring(spec) .. '" unknown')
    end
    local args = { ... }
    local interval = number(args[1])
    if interval == nil then
        error('Recur(): Arg "interval" not a number: ' .. tostring(args[1]))
    end
    local offset = number(args[2])
    if offset == nil then
        error('Recur(): Arg "offset" not a number: ' .. tostring(args[2]))
    end
    if interval <= 0 then
        error('Recur(): Arg "interval" must be greater than or equal to 0') -- sic
    end
    local options = read_options(args, 3, true)
    local tags = json_arg(options['tags'] or '{}',
        'Recur(): Arg "tags" must be JSON string array: ' .. tostring(options['tags']))
    local function numeric(name)
        local x = number(options[name] or 0)
        if x == nil then
            error('Recur(): Arg "' .. name .. '" not a number: ' .. tostring(options[name]))
        end
        return x
    end
    local priority = numeric('priority')
    local retries = numeric('retries')
    local backlog = numeric('backlog')
    if not is_name_list(tags) then
        -- qless-core stores it, and then every pop of the queue fails.
        error('Recur(): Arg "tags" must be JSON string array: ' .. options['tags'])
    end

    local f = redis.call('hmget', recur_key(jid), 'count', 'queue')
    if f[2] then
        redis.call('zrem', queue_key(f[2], 'recur'), jid)
    end
    redis.call('hset', recur_key(jid),
        'jid', jid,
        'klass', klass,
        'data', data,
        'priority', priority,
        'tags', cjson.encode(tags),
        'state', 'recur',
        'queue', queue,
        'type', 'interval',
        'count', f[1] or 0,
        'interval', interval,
        'retries', retries,
        'backlog', backlog)
    redis.call('zadd', queue_key(queue, 'recur'), now + offset, jid)
    add_queue_name(queue, now)
    return jid
end

-- unrecur <jid>  ->  1
COMMANDS['unrecur'] = function(now, jid)
    need_recurring_jid(jid)
    local queue = redis.call('hget', recur_key(jid), 'queue')
    if queue then
        redis.call('zrem', queue_key(queue, 'recur'), jid)
        redis.call('del', recur_key(jid))
    end
    return true
end

-- recur.get <jid>  ->  the template as JSON, or nil
COMMANDS['recur.get'] = function(now, jid)
    need_recurring_jid(jid)
    local data = recurring_data(jid)
    if not data then
        return nil
    end
    return cjson.encode(data)
end

-- recur.update <jid> <option> <value> [<option> <value>...]  ->  1
-- Options: priority, interval, retries, data, klass, queue, backlog. All are checked before
-- any is applied (qless-core applies them one by one and stops at the first bad one).
COMMANDS['recur.update'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local key = recur_key(jid)
    if redis.call('exists', key) == 0 then
        error('Recur(): No recurring job ' .. jid)
    end
    local _, given = read_options({ ... }, 1)
    local changes = {}
    for _, pair in ipairs(given) do
        local option, text = pair[1], pair[2]
        if text == nil then
            error('No value provided for ' .. tostring(option))
        end
        local value = text
        if option == 'priority' or option == 'interval' or option == 'retries' then
            value = number(text)
            if value == nil then
                error('Recur(): Arg "' .. option .. '" must be a number: ' .. text)
            end
            -- qless-core takes an interval of 0 or less here (`recur` refuses it): each pop
            -- would then spawn as many runs as it asks for.
            if option == 'interval' and value <= 0 then
                error('Recur(): Arg "interval" must be greater than or equal to 0') -- sic
            end
        elseif option == 'data' then
            json_arg(value, 'Recur(): Arg "data" is not JSON-encoded: ' .. value)
        elseif option == 'backlog' then
            value = number(text)
            if value == nil then
                error('Recur(): Arg "backlog" not a number: ' .. text)
            end
        elseif option ~= 'klass' and option ~= 'queue' then
            error('Recur(): Unrecognized option "' .. option .. '"')
        end
        changes[#changes + 1] = { option, value }
    end
    for _, change in ipairs(changes) do
        local option, value = change[1], change[2]
        if option == 'interval' then
            -- The next run moves by the change of interval.
            local f = redis.call('hmget', key, 'queue', 'interval')
            redis.call('zincrby', queue_key(f[1], 'recur'), value - (number(f[2]) or 0), jid)
        elseif option == 'queue' then
            local old = redis.call('hget', key, 'queue')
            local due = redis.call('zscore', queue_key(old, 'recur'), jid)
            redis.call('zrem', queue_key(old, 'recur'), jid)
            if due then
                redis.call('zadd', queue_key(value, 'recur'), due, jid)
            end
            add_queue_name(value, now)
        end
        redis.call('hset', key, option, value)
    end
    return true
end

-- recur.tag <jid> <tag>...  /  recur.untag <jid> <tag>...  ->  the template's tags as JSON
COMMANDS['recur.tag'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local text = redis.call('hget', recur_key(jid), 'tags')
    if not text then
        error('Tag(): Job ' .. jid .. ' does not exist')
    end
    local tags = stored_tags(text)
    local has = {}
    for _, tag in ipairs(tags) do
        has[tag] = true
    end
    for _, tag in ipairs({ ... }) do
        if not has[tag] then
            has[tag] = true
            tags[#tags + 1] = tag
        end
    end
    local encoded = cjson.encode(tags)
    redis.call('hset', recur_key(jid), 'tags', encoded)
    return encoded
end

COMMANDS['recur.untag'] = function(now, jid, ...)
    need_recurring_jid(jid)
    local text = redis.call('hget', recur_key(jid), 'tags')
    if not text then
        error('Untag(): Job ' .. jid .. ' does not exist')
    end
    local drop = {}
    for _, tag in ipairs({ ... }) do
        drop[tag] = true
    end
    local kept = {}
    for _, tag in ipairs(stored_tags(text)) do
        if not drop[tag] then
            kept[#kept + 1] = tag
        end
    end
    local encoded = cjson.encode(kept)
    redis.call('hset', recur_key(jid), 'tags', encoded)
    return encoded
end
