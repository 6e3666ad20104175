-- What a handler calls to wait in straight-line code. Each is built on
-- lunarun.wait(starter): starter(done) begins the work and returns a function
-- that cancels it (called when the call times out or its run ends first).
local uv = require("luv")

-- Closes a luv handle, keeping it referenced until libuv is done with it:
-- the close callback holds it, and luv holds the callback (a closing handle
-- that is collected too early is freed while libuv still uses it).
local function close(h)
  if h and not h:is_closing() then h:close(function() return h end) end
end

return function(lunarun)
  local wait = lunarun.wait
  lunarun.close_handle = close

  -- Line framing of a stream (MCP's stdio transport, both ways): data is
  -- one read; buffer (a list) keeps what does not end a line yet; on_line
  -- gets each complete line without its "\n" or "\r\n".
  function lunarun._lines(buffer, data, on_line)
    buffer[#buffer + 1] = data
    if not data:find("\n", 1, true) then return end
    local text = table.concat(buffer)
    for i = #buffer, 1, -1 do buffer[i] = nil end
    local start = 1
    while true do
      local nl = text:find("\n", start, true)
      if not nl then break end
      local line = text:sub(start, nl - 1)
      start = nl + 1
      on_line((line:gsub("\r$", "")))
    end
    if start <= #text then buffer[1] = text:sub(start) end
  end

  -- Waits ms milliseconds.
  function lunarun.sleep(ms)
    assert(type(ms) == "number" and ms >= 0, "sleep: ms must be a non-negative number")
    return wait(function(done)
      local t = uv.new_timer()
      t:start(math.floor(ms), 0, function()
        close(t)
        done()
      end)
      return function() close(t) end
    end)
  end

  -- Reads a whole file; returns its content, or nil and a message.
  function lunarun.read_file(path)
    return wait(function(done)
      local cancelled = false
      uv.fs_open(path, "r", 0, function(err, fd)
        if err then return done(nil, err) end
        uv.fs_fstat(fd, function(serr, st)
          if serr then uv.fs_close(fd); return done(nil, serr) end
          uv.fs_read(fd, st.size, 0, function(rerr, data)
            uv.fs_close(fd)
            if cancelled then return end
            done(data, rerr)
          end)
        end)
      end)
      return function() cancelled = true end
    end)
  end

  -- Runs a program (no shell) and returns {code, signal, stdout, stderr}.
  -- opts: args = {...}, stdin = string, cwd, env = {"K=V"}, timeoutMs.
  function lunarun.exec(cmd, opts)
    opts = opts or {}
    return wait(function(done)
      local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
      local out, err = {}, {}
      local pending = 3 -- exit, stdout EOF, stderr EOF
      local result = {}
      local handle, timer
      local function close_all()
        for _, h in ipairs({ stdin, stdout, stderr, handle, timer }) do close(h) end
      end
      local function finish()
        pending = pending - 1
        if pending > 0 then return end
        close_all()
        result.stdout, result.stderr = table.concat(out), table.concat(err)
        done(result)
      end
      local spawn_err
      handle, spawn_err = uv.spawn(cmd, {
        args = opts.args, cwd = opts.cwd, env = opts.env, stdio = { stdin, stdout, stderr },
      }, function(code, signal)
        result.code, result.signal = code, signal
        finish()
      end)
      if not handle then
        close_all()
        done(nil, spawn_err)
        return
      end
      local function reader(buf)
        return function(rerr, data)
          if data then buf[#buf + 1] = data else finish() end
        end
      end
      stdout:read_start(reader(out))
      stderr:read_start(reader(err))
      if opts.stdin then stdin:write(opts.stdin) end
      stdin:shutdown()
      if opts.timeoutMs then
        timer = uv.new_timer()
        timer:start(opts.timeoutMs, 0, function() if handle and not handle:is_closing() then handle:kill("sigkill") end end)
      end
      return function()
        if handle and not handle:is_closing() then handle:kill("sigkill") end
        close_all()
      end
    end)
  end

  -- An HTTP request through libcurl on the host's loop:
  -- {method, url, headers = {Name = value}, body, timeoutMs, maxBytes}
  -- → {status, headers, body}, or nil, message, "ECODE".
  function lunarun.http(request)
    local http = lunarun.http_client
    return wait(function(done)
      return http.request(request, done)
    end)
  end

  return lunarun
end
