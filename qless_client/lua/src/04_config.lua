---------------------------------------------------------------------------------------------
-- Configuration (the `ql:config` hash; unset options read as these defaults)
---------------------------------------------------------------------------------------------

local CONFIG_DEFAULTS = {
    ['application'] = 'qless',
    ['heartbeat'] = 60,
    ['grace-period'] = 10,
    ['stats-history'] = 30,
    ['histogram-history'] = 7,
    ['jobs-history-count'] = 50000,
    ['jobs-history'] = 604800,
}

local function config_get(name, fallback)
    local value = redis.call('hget', CONFIG, name)
    if value then
        return value
    end
    if CONFIG_DEFAULTS[name] ~= nil then
        return CONFIG_DEFAULTS[name]
    end
    return fallback
end

-- A numeric option. qless-core stores any text with config.set and then fails on arithmetic
-- with nil where it uses it (in `complete`, after part of the change is written): we refuse
-- the command before its first write instead.
local function config_number(caller, name, fallback, integer)
    local value = config_get(name, fallback)
    local x = number(value)
    if x == nil or (integer and x % 1 ~= 0) then
        error(caller .. ': config option "' .. name .. '" is not a number: ' .. tostring(value))
    end
    return x
end

-- The lock length for jobs of `queue`: `<queue>-heartbeat`, else `heartbeat`.
local function heartbeat_of(caller, queue)
    local name = queue .. '-heartbeat'
    if not redis.call('hget', CONFIG, name) then
        name = 'heartbeat'
    end
    return config_number(caller, name, 60)
end
