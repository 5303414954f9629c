package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// handleTools shows every tool's policy and counters.
func (c *Console) handleTools(w http.ResponseWriter, r *http.Request) {
	stats, err := c.backend.Tools(r.Context())
	if err != nil {
		c.storeFailed(w, r, err)
		return
	}
	slices.SortFunc(stats, func(a, b ToolStats) int { return strings.Compare(a.Name, b.Name) })
	c.pages.render(w, http.StatusOK, "tools", pageFor(r, "Tools", "tools", stats))
}

// toolChangeView is an MCP upstream tool's page: its pin, the pinned and
// the current definition member by member, and the accept form while it
// is held.
type toolChangeView struct {
	pins.Change
	Members []pins.MemberChange
	// Done: the operator just accepted it; Error: why an accept did not.
	Done  bool
	Error string
}

// handleToolChange shows an MCP upstream tool's pin and, for a held one,
// what changed since it was pinned.
func (c *Console) handleToolChange(w http.ResponseWriter, r *http.Request) {
	c.showToolChange(w, r, http.StatusOK, r.URL.Query().Get("done") == "accepted", "")
}

// showToolChange renders the tool's page with status, the confirmation
// of an acceptance or the error of one.
func (c *Console) showToolChange(w http.ResponseWriter, r *http.Request, status int, done bool, msg string) {
	change, err := c.backend.ToolChange(r.Context(), chi.URLParam(r, "tool"))
	switch {
	case errors.Is(err, pins.ErrUnknownTool):
		http.Error(w, "404: no MCP upstream tool of that name is listed (only MCP upstream tools are pinned)", http.StatusNotFound)
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	v := toolChangeView{Change: change, Members: change.Members(), Done: done, Error: msg}
	c.pages.render(w, status, "tool", pageFor(r, "Tool "+change.Tool, "tools", v))
}

// handleAcceptTool accepts a held tool's current definition: only the one
// the page showed (its hash is in the form), so a server that changed the
// tool again meanwhile gets nothing accepted.
func (c *Console) handleAcceptTool(w http.ResponseWriter, r *http.Request) {
	tool, sum := chi.URLParam(r, "tool"), strings.ToLower(strings.TrimSpace(r.PostForm.Get("sha256")))
	if pins.ValidHash(sum) != nil {
		c.showToolChange(w, r, http.StatusBadRequest, false, "The form names no definition (a SHA-256) to accept; nothing accepted.")
		return
	}
	s := sessionFrom(r.Context())
	// A person accepts as their principal; the admin token as the name
	// typed at sign-in, as the admin API's accept takes it.
	by := s.By
	if p := s.principal(); p.IsPerson() {
		by = p.ID
	}
	_, err := c.backend.AcceptTool(r.Context(), tool, sum, by)
	switch {
	case errors.Is(err, pins.ErrUnknownTool):
		http.Error(w, "404: no MCP upstream tool of that name is listed", http.StatusNotFound)
		return
	case errors.Is(err, pins.ErrNotCurrent):
		c.showToolChange(w, r, http.StatusConflict, false, "The server lists another definition than the one you reviewed (it changed again); nothing accepted. Review the definition below.")
		return
	case errors.Is(err, pins.ErrFixedByConfig):
		c.showToolChange(w, r, http.StatusBadRequest, false, "The config fixes this tool's pin (mcp_servers[].pins): change it there; nothing accepted.")
		return
	case err != nil:
		c.storeFailed(w, r, err)
		return
	}
	c.opts.Log.InfoContext(r.Context(), "console: tool accepted", "tool", tool, "sha256", sum, "by", by)
	http.Redirect(w, r, Base+"/tools/"+url.PathEscape(tool)+"?done=accepted", http.StatusSeeOther)
}
