---------------------------------------------------------------------------------------------
-- JSON: what we read back from Redis, what callers give
---------------------------------------------------------------------------------------------

-- JSON we read back from Redis (written by us or by another binding): nil when it is not JSON,
-- so that one odd field never makes a job unreadable.
local function decode(text)
    if type(text) ~= 'string' then
        return nil
    end
    local ok, value = pcall(cjson.decode, text)
    if ok then
        return value
    end
    return nil
end

-- A JSON argument. Text that is not JSON gets cjson's own error (as in qless-core); a missing
-- argument or a JSON `false` gets `message`.
local function json_arg(text, message)
    if text == nil then
        error(message)
    end
    local value = cjson.decode(text)
    if value == false then
        error(message)
    end
    return value
end

-- Tags and jids given as JSON: a JSON array (qless-core writes an empty one as `{}`) of
-- strings or numbers. qless-core takes anything and then crashes on other values, after it
-- has written part of the change.
local function is_name_list(value)
    if type(value) ~= 'table' then
        return false
    end
    for _, item in ipairs(value) do
        local kind = type(item)
        if kind ~= 'string' and kind ~= 'number' then
            return false
        end
    end
    return true
end

-- The tags stored in a job or template hash, as a list (an odd value reads as no tags).
local function stored_tags(text)
    local tags = decode(text)
    local out = {}
    if type(tags) == 'table' then
        for _, tag in ipairs(tags) do
            if type(tag) == 'string' or type(tag) == 'number' then
                out[#out + 1] = tag
            end
        end
    end
    return out
end
