-- qless.lua: jobwire's own implementation of the qless-core script.
--
-- qless keeps its jobs in Redis and makes every change through one Lua script. This script is
-- written for jobwire to behave as the qless-core script that deployments run (the one
-- qless-py 0.11.4 and the Ruby `qless` gem ship): the same commands, keys, encodings, replies,
-- pub/sub events and error texts, so that jobwire, qless-py, the Ruby gem and qless-web can
-- share one Redis. Where it deliberately differs (it refuses input that would make qless-core
-- corrupt its data or crash), docs/qless.md lists each case.
--
-- Calling convention (qless-core's):
--
--     EVALSHA <sha> 0 <command> <now> <args...>
--
--   * no KEYS: the keys a call touches depend on what Redis holds (a job's queue, its worker,
--     its tags, its dependents), so none are declared (Redis allows this outside a cluster);
--   * <command> is one of the names in COMMANDS (put, pop, complete, ...);
--   * <now> is the caller's clock in seconds, as a decimal string: the script reads no clock.
--
-- Errors are script errors; Redis prefixes them with "user_script:<line>: ". Their texts are
-- qless-core's, since bindings match on some ("... not currently running ...").
--
-- Redis 7 rules: everything here is local (no global is created, no standard table is
-- changed), nothing random, no clock.
--
-- The source is qless_client/lua/src/, one file per concern, joined in the order of their
-- numbers into one chunk by scripts/build_lua.py (a file uses the locals of the files before
-- it): 01-03 keys, arguments and JSON; 04-10 the state the commands share (configuration,
-- history, statistics, jobs, queues, dependencies, recurring templates); 11-17 the commands,
-- each an entry of COMMANDS; 18 the dispatch.

local NS = 'ql:'
local DAY = 86400

---------------------------------------------------------------------------------------------
-- Key names and pub/sub channels (everything under `ql:`)
---------------------------------------------------------------------------------------------

local CONFIG = NS .. 'config'
local QUEUES = NS .. 'queues'
local WORKERS = NS .. 'workers'
local FAILURES = NS .. 'failures'
local COMPLETED = NS .. 'completed'
local TRACKED = NS .. 'tracked'
local TAGS = NS .. 'tags'
local PAUSED = NS .. 'paused_queues'

local function job_key(jid) return NS .. 'j:' .. jid end
local function history_key(jid) return NS .. 'j:' .. jid .. '-history' end
local function dependents_key(jid) return NS .. 'j:' .. jid .. '-dependents' end
local function dependencies_key(jid) return NS .. 'j:' .. jid .. '-dependencies' end
local function queue_key(queue, part) return NS .. 'q:' .. queue .. '-' .. part end
local function worker_key(worker) return NS .. 'w:' .. worker .. ':jobs' end
local function tag_key(tag) return NS .. 't:' .. tag end
local function group_key(group) return NS .. 'f:' .. group end
local function recur_key(jid) return NS .. 'r:' .. jid end

-- The start of the day `t` falls in. Written as qless-core writes it (no floor), and
-- concatenated as a Lua number, so that the stats keys come out byte for byte the same.
local function day_of(t)
    return t - (t % DAY)
end

local function stats_key(kind, day, queue)
    return NS .. 's:' .. kind .. ':' .. day .. ':' .. queue
end

local function publish(channel, message)
    redis.call('publish', NS .. channel, message)
end
