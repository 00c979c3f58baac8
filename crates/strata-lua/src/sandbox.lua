-- The sandbox every interpreter is set up with, run once when it is created, before
-- any user code exists, with the whole base library at hand. It hides everything a
-- script must not reach, makes every shared table read-only and returns the entry
-- points the Rust side uses.
--
-- Arguments: the kind of interpreter ("eval" or "function") and `native`, the
-- functions implemented in Rust (the `redis` API, the libraries, `math.random`).
--
-- Read-only tables. Stock Lua 5.1 has no read-only flag, so each shared table (the
-- globals, `redis`, `string`, `math`, the libraries...) is replaced, for scripts, by an
-- empty proxy whose metatable reads from a private copy (its "view") and refuses
-- writes. `rawset`, `rawget`, `next`, `pairs`, `ipairs`, `unpack`, `setmetatable` and
-- `getmetatable` see a proxy as its view and refuse to change it. The table library
-- could still store raw keys into a proxy; `scrub` empties every proxy after each
-- run, so nothing a script does outlives it.
local kind, native = ...

local type, error, tostring, select, next, pairs, ipairs, unpack =
    type, error, tostring, select, next, pairs, ipairs, unpack
local rawget, rawset, rawequal, setmetatable, getmetatable = rawget, rawset, rawequal, setmetatable, getmetatable
local setfenv, loadstring, load, pcall, xpcall = setfenv, loadstring, load, pcall, xpcall
local string, table, math, coroutine = string, table, math, coroutine
local sbyte, ssub, sfind, tconcat = string.byte, string.sub, string.find, table.concat
local unwrap_error = native.unwrap_error

local READONLY = "Attempt to modify a readonly table"
-- Proxy -> its view (the table actually read).
local view_of = setmetatable({}, { __mode = "k" })
-- Shared table -> its proxy.
local proxy_of = {}
-- Every proxy, for `scrub`.
local proxies = {}

local function refuse()
  error(READONLY, 2)
end

local function protect(t)
  local p = proxy_of[t]
  if p then
    return p
  end
  local view = {}
  p = {}
  proxy_of[t] = p
  for k, v in next, t do
    if type(v) == "table" then
      v = protect(v)
    end
    view[k] = v
  end
  view_of[p] = view
  proxies[#proxies + 1] = p
  setmetatable(p, { __index = view, __newindex = refuse, __metatable = false })
  return p
end

local function unwrap(t)
  return view_of[t] or t
end

local function safe_rawset(t, k, v)
  if view_of[t] then
    error(READONLY, 0)
  end
  return rawset(t, k, v)
end

local function safe_rawget(t, k)
  return rawget(unwrap(t), k)
end

local function safe_next(t, k)
  return next(unwrap(t), k)
end

local function safe_pairs(t)
  if view_of[t] then
    return safe_next, t, nil
  end
  return pairs(t)
end

local function safe_ipairs(t)
  return ipairs(unwrap(t))
end

local function safe_unpack(t, i, j)
  return unpack(unwrap(t), i, j)
end

local function safe_setmetatable(t, mt)
  if view_of[t] then
    error(READONLY, 0)
  end
  return setmetatable(t, mt)
end

-- The string metatable is shared by every string: scripts see a read-only copy.
local string_meta = getmetatable("")
local visible_meta = setmetatable({}, { __mode = "k" })

local function safe_getmetatable(o)
  if view_of[o] then
    return visible_meta[o]
  end
  local mt = getmetatable(o)
  if mt == string_meta then
    return visible_meta[string_meta]
  end
  return mt
end

-- loadstring and load: binary chunks are parsed as text, as in Redis (whose Lua
-- cannot load bytecode), and what they compile runs in the script's environment.
local env -- the environment of scripts, set below

local function chunk_id(s, name)
  if name ~= nil then
    name = tostring(name)
    local c = sbyte(name, 1)
    if c == 61 or c == 64 then -- '=' or '@'
      return ssub(name, 2, 60)
    end
    s = name
  end
  local line = s
  local cut = sfind(line, "[\n\r%z]")
  if cut then
    line = ssub(line, 1, cut - 1)
  end
  local room = 60 - 15
  if #line > room then
    return '[string "' .. ssub(line, 1, room) .. '..."]'
  end
  return '[string "' .. line .. '"]'
end

local function safe_loadstring(s, name)
  if type(s) == "string" and sbyte(s, 1) == 27 then
    return nil, chunk_id(s, name) .. ":1: unexpected symbol near 'char(27)'"
  end
  local f, e = loadstring(s, name)
  if f then
    setfenv(f, env)
  end
  return f, e
end

local function safe_load(reader, name)
  if type(reader) ~= "function" then
    return load(reader, name)
  end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == "" then
      break
    end
    if type(piece) ~= "string" then
      return nil, "reader function must return a string"
    end
    parts[#parts + 1] = piece
  end
  return safe_loadstring(tconcat(parts), name or "=(load)")
end

-- Redis's pcall: an error raised as a table with an `err` field is caught as that
-- field's text.
local function pcall_result(ok, ...)
  if ok then
    return true, ...
  end
  local e = unwrap_error((...))
  if type(e) == "table" then
    local m = e.err
    if type(m) == "string" or type(m) == "number" then
      e = m
    end
  end
  return false, e
end

local function safe_pcall(...)
  return pcall_result(pcall(...))
end

local function safe_xpcall(f, handler)
  return xpcall(f, function(e)
    return handler(unwrap_error(e))
  end)
end

local function resume_result(ok, ...)
  if ok then
    return true, ...
  end
  return false, unwrap_error((...))
end

local resume = coroutine.resume
local corolib = {}
for k, v in next, coroutine do
  corolib[k] = v
end
corolib.resume = function(co, ...)
  return resume_result(resume(co, ...))
end

local redis = {
  call = native.call,
  pcall = native.pcall,
  setresp = native.setresp,
  set_repl = native.set_repl,
  acl_check_cmd = native.acl_check_cmd,
  log = native.log,
  sha1hex = native.sha1hex,
  error_reply = native.error_reply,
  status_reply = native.status_reply,
  LOG_DEBUG = 0,
  LOG_VERBOSE = 1,
  LOG_NOTICE = 2,
  LOG_WARNING = 3,
  REDIS_VERSION = native.REDIS_VERSION,
  REDIS_VERSION_NUM = native.REDIS_VERSION_NUM,
  REPL_NONE = 0,
  REPL_AOF = 1,
  REPL_SLAVE = 2,
  REPL_REPLICA = 2,
  REPL_ALL = 3,
}
if kind == "eval" then
  redis.breakpoint = native.breakpoint
  redis.debug = native.debug
  redis.replicate_commands = native.replicate_commands
end

local mathlib = {}
for k, v in next, math do
  mathlib[k] = v
end
mathlib.random = native.random
mathlib.randomseed = native.randomseed

-- The globals scripts see, each shared table behind its proxy.
local globals = {
  _VERSION = _VERSION,
  assert = assert,
  bit = protect(native.bit),
  cjson = native.cjson and protect(native.cjson),
  cmsgpack = native.cmsgpack and protect(native.cmsgpack),
  collectgarbage = collectgarbage,
  coroutine = protect(corolib),
  error = error,
  gcinfo = gcinfo,
  getmetatable = safe_getmetatable,
  ipairs = safe_ipairs,
  load = safe_load,
  loadstring = safe_loadstring,
  math = protect(mathlib),
  next = safe_next,
  pairs = safe_pairs,
  pcall = safe_pcall,
  rawequal = rawequal,
  rawget = safe_rawget,
  rawset = safe_rawset,
  redis = protect(redis),
  select = select,
  setmetatable = safe_setmetatable,
  string = protect(string),
  struct = native.struct and protect(native.struct),
  table = protect(table),
  tonumber = tonumber,
  tostring = tostring,
  type = type,
  unpack = safe_unpack,
  xpcall = safe_xpcall,
}
if kind == "eval" then
  -- Present in Redis's globals (its EVAL error handler); kept for scripts that look.
  globals.__redis__err__handler = function(err)
    return err
  end
end

-- The environment of every script and function: reads go to `current`, the
-- globals above, except while FUNCTION LOAD runs a library's code (see below).
local current = globals
env = {}
setmetatable(env, {
  __index = function(_, k)
    local v = current[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = refuse,
  __metatable = false,
})
view_of[env] = globals
proxies[#proxies + 1] = env
globals._G = env
local function nothing() end
visible_meta[env] = protect({ __index = nothing, __newindex = nothing })

-- Method calls on strings go through the read-only string library.
string_meta.__index = proxy_of[string]
visible_meta[string_meta] = protect({ __index = proxy_of[string] })

-- FUNCTION LOAD runs a library's code with nothing but `redis.register_function`,
-- `redis.log` and the version and log-level constants; the functions it registers
-- see the whole environment when they are called later.
local function strict(view)
  local p = {}
  view_of[p] = view
  proxies[#proxies + 1] = p
  setmetatable(p, {
    __index = function(_, k)
      local v = view[k]
      if v == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
      end
      return v
    end,
    __newindex = refuse,
    __metatable = false,
  })
  return p
end

local load_globals
if kind == "function" then
  load_globals = {
    redis = strict({
      register_function = native.register_function,
      log = native.log,
      LOG_DEBUG = 0,
      LOG_VERBOSE = 1,
      LOG_NOTICE = 2,
      LOG_WARNING = 3,
      REDIS_VERSION = native.REDIS_VERSION,
      REDIS_VERSION_NUM = native.REDIS_VERSION_NUM,
    }),
  }
end

-- Runs `f` (a compiled script, or a function's callback with its keys and
-- arguments) under the error handler.
local handler = native.handler
local function invoke(f, keys, args)
  if keys == nil then
    return xpcall(f, handler)
  end
  return xpcall(function()
    return f(keys, args)
  end, handler)
end

-- Runs a library's code in the loading environment, catching its errors.
local function run_library(f)
  current = load_globals
  view_of[env] = load_globals
  local ok, e = pcall(f)
  current = globals
  view_of[env] = globals
  if not ok then
    e = unwrap_error(e)
  end
  return ok, e
end

-- Empties every proxy of the raw keys a script may have stored into it.
local function scrub()
  for i = 1, #proxies do
    local p = proxies[i]
    if next(p) ~= nil then
      local keys = {}
      for k in next, p do
        keys[#keys + 1] = k
      end
      for j = 1, #keys do
        rawset(p, keys[j], nil)
      end
    end
  end
end

return {
  env = env,
  globals = globals,
  invoke = invoke,
  run_library = run_library,
  scrub = scrub,
}
