package console

import (
	"net/http"
	"slices"
	"strings"
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
