---------------------------------------------------------------------------------------------
-- Commands: configuration (the `ql:config` hash)
---------------------------------------------------------------------------------------------

-- config.get [option]  ->  the value (a default is an integer reply), or all options as JSON
COMMANDS['config.get'] = function(now, option)
    if option then
        return config_get(option)
    end
    local all = {}
    for name, value in pairs(CONFIG_DEFAULTS) do
        all[name] = value
    end
    local stored = redis.call('hgetall', CONFIG)
    for i = 1, #stored, 2 do
        all[stored[i]] = stored[i + 1]
    end
    return cjson.encode(all)
end

-- config.set <option> <value>  (any text is stored, as qless-core does)
COMMANDS['config.set'] = function(now, option, value)
    if not option then
        error('config.set(): Arg "option" missing')
    end
    if not value then
        error('config.set(): Arg "value" missing')
    end
    publish('log', cjson.encode({ event = 'config_set', option = option, value = value }))
    redis.call('hset', CONFIG, option, value)
end

-- config.unset <option>
COMMANDS['config.unset'] = function(now, option)
    if not option then
        error('config.unset(): Arg "option" missing')
    end
    publish('log', cjson.encode({ event = 'config_unset', option = option }))
    redis.call('hdel', CONFIG, option)
end
