---------------------------------------------------------------------------------------------
-- Dispatch: EVALSHA <sha> 0 <command> <now> <args...>
---------------------------------------------------------------------------------------------

if #KEYS > 0 then
    error('No Keys should be provided')
end
local name = ARGV[1]
if not name then
    error('Must provide a command')
end
local command = COMMANDS[name]
if not command then
    error('Unknown command ' .. name)
end
local now = number(ARGV[2])
if not now then
    error('Arg "now" missing or not a number: ' .. tostring(ARGV[2]))
end
return command(now, unpack(ARGV, 3))
