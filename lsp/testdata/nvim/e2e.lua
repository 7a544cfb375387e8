-- End-to-end check of `pipec lsp` with Neovim's own LSP client (0.7+):
-- open a spec, attach the server, wait for its diagnostics, jump to the
-- definition of the name under a given position, and write what was seen to
-- a file the Go test (lsp/nvim_test.go) checks. Inputs come from the
-- environment: PIPEC_BIN, PIPEC_E2E_SPEC, PIPEC_E2E_LINE, PIPEC_E2E_COL
-- (1-based) and PIPEC_E2E_OUT.
local seen = {}
local function log(s) table.insert(seen, s) end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("PIPEC_E2E_SPEC")))
  local buf = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = "pipec",
    cmd = { os.getenv("PIPEC_BIN"), "lsp" },
    root_dir = vim.fn.fnamemodify(os.getenv("PIPEC_E2E_SPEC"), ":h"),
  })
  if not client_id then error("start_client failed") end
  vim.lsp.buf_attach_client(buf, client_id)
  if not vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 20) then
    error("no diagnostics arrived")
  end
  local ds = vim.diagnostic.get(buf)
  table.sort(ds, function(a, b) return a.lnum < b.lnum or (a.lnum == b.lnum and a.col < b.col) end)
  for _, d in ipairs(ds) do
    log(string.format("diagnostic %d:%d %s %s", d.lnum + 1, d.col + 1, tostring(d.code), d.source or ""))
  end
  vim.api.nvim_win_set_cursor(0, { tonumber(os.getenv("PIPEC_E2E_LINE")), tonumber(os.getenv("PIPEC_E2E_COL")) - 1 })
  local client = vim.lsp.get_client_by_id(client_id)
  local params = vim.lsp.util.make_position_params()
  local res = vim.lsp.buf_request_sync(buf, "textDocument/definition", params, 30000)
  local jumped = false
  for _, r in pairs(res or {}) do
    if r.result and r.result[1] then
      vim.lsp.util.jump_to_location(r.result[1], client.offset_encoding)
      jumped = true
    end
  end
  if not jumped then error("no definition") end
  local cur = vim.api.nvim_win_get_cursor(0)
  log(string.format("definition %d:%d %s", cur[1], cur[2] + 1, vim.api.nvim_get_current_line()))
  vim.lsp.stop_client(client_id)
end)
if not ok then log("error " .. tostring(err)) end
vim.fn.writefile(seen, os.getenv("PIPEC_E2E_OUT"))
vim.cmd("qa!")
