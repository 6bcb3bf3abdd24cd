---------------------------------------------------------------------------------------------
-- Arguments: numbers, options, the names every command needs
---------------------------------------------------------------------------------------------

-- A number, or nil. Lua's tonumber also reads "inf" and "nan"; those are refused here: once
-- stored, cjson cannot encode the job any more and Redis cannot score it.
local function number(value)
    local x = tonumber(value)
    if x == nil or x ~= x or x == math.huge or x == -math.huge then
        return nil
    end
    return x
end

-- The `key value` options of a command, `list[first]` on: put (and requeue), complete, recur
-- and recur.update all read them here. Returns a table from key to value (a later key wins;
-- a trailing key without a value is left out) and the same pairs in order, as {key, value}
-- lists (a trailing key's value is nil). With `even`, a list whose options are not whole pairs
-- is refused first, in qless-core's words, naming all of `list`.
local function read_options(list, first, even)
    if even and (#list - first + 1) % 2 == 1 then
        error('Odd number of additional args: ' .. table.concat(list, ' '))
    end
    local options, in_order = {}, {}
    for i = first, #list, 2 do
        local key, value = list[i], list[i + 1]
        in_order[#in_order + 1] = { key, value }
        if value ~= nil then
            options[key] = value
        end
    end
    return options, in_order
end

local function need_jid(jid)
    if not jid then
        error('Job(): no jid provided')
    end
end

local function need_queue(queue)
    if not queue then
        error('Queue(): no queue name provided')
    end
end

local function need_recurring_jid(jid)
    if not jid then
        error('Recurring(): no jid provided')
    end
end
