package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/pins"
	"github.com/toolgateway/toolgateway/wire"
)

// AdminTools is the answer of GET /admin/v1/tools: each MCP upstream
// tool's pinned and current definition hash and whether it is held.
type AdminTools struct {
	Tools []pins.Status `json:"tools"`
}

// acceptRequest is the optional body of POST /admin/v1/tools/{tool}/accept.
type acceptRequest struct {
	// SHA256 accepts only the definition of this hash (the one the
	// operator reviewed); empty: whatever the server lists now.
	SHA256 string `json:"sha256"`
	// By names who accepts (default "admin"), for the receipt.
	By string `json:"by"`
}

// maxAcceptBody bounds the accept body (a hash and a name).
const maxAcceptBody = 4 << 10

// pinKeeper returns the pins for a request that takes no query
// parameters (what names it in the refusal of one), or answers 400 for
// one that has some, 501 when the gateway fronts no MCP server (nothing
// is pinned).
func (s *Server) pinKeeper(w http.ResponseWriter, r *http.Request, what string) (pins.Keeper, bool) {
	if len(r.URL.Query()) > 0 {
		badAdminRequest(w, what+" takes no query parameters")
		return nil, false
	}
	if s.opts.Pins == nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this gateway fronts no MCP server: no tool is pinned"))
		return nil, false
	}
	return s.opts.Pins, true
}

// handleAdminTools answers GET /admin/v1/tools.
func (s *Server) handleAdminTools(w http.ResponseWriter, r *http.Request) {
	keeper, ok := s.pinKeeper(w, r, "the tools list")
	if !ok {
		return
	}
	statuses, err := keeper.Statuses(r.Context())
	if err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "could not read the pins"))
		return
	}
	if statuses == nil {
		statuses = []pins.Status{}
	}
	writeJSON(w, http.StatusOK, AdminTools{Tools: statuses})
}

// handleAdminTool answers GET /admin/v1/tools/{tool}: the tool's pin with
// its pinned and current definitions, to review a held tool before
// accepting it.
func (s *Server) handleAdminTool(w http.ResponseWriter, r *http.Request) {
	keeper, ok := s.pinKeeper(w, r, "a tool's pin")
	if !ok {
		return
	}
	tool := chi.URLParam(r, "tool")
	change, err := keeper.Change(r.Context(), tool)
	switch {
	case errors.Is(err, pins.ErrUnknownTool):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeToolNotFound, fmt.Sprintf("no MCP upstream tool %q is listed", tool)))
	case err != nil:
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "could not read the pin"))
	default:
		writeJSON(w, http.StatusOK, change)
	}
}

// handleAdminAcceptTool answers POST /admin/v1/tools/{tool}/accept: the
// tool's current definition becomes its pin, so a held tool runs again.
func (s *Server) handleAdminAcceptTool(w http.ResponseWriter, r *http.Request) {
	keeper, ok := s.pinKeeper(w, r, "accept")
	if !ok {
		return
	}
	in, ok := readAcceptRequest(w, r)
	if !ok {
		return
	}
	tool := chi.URLParam(r, "tool")
	status, err := keeper.Accept(r.Context(), tool, in.SHA256, in.By)
	switch {
	case errors.Is(err, pins.ErrUnknownTool):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeToolNotFound, fmt.Sprintf("no MCP upstream tool %q is listed", tool)))
	case errors.Is(err, pins.ErrFixedByConfig):
		badAdminRequest(w, "the config fixes this tool's pin (mcp_servers[].pins): change it there")
	case errors.Is(err, pins.ErrNotCurrent):
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeToolChanged, "the server lists another definition than the one you named (it changed again): review GET /admin/v1/tools and accept that hash"))
	case err != nil:
		s.Logger().WarnContext(r.Context(), "accepting a tool failed", "tool", tool, "error", err)
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeStoreUnavailable, "could not store the pin"))
	default:
		s.Logger().InfoContext(r.Context(), "tool accepted", "tool", tool, "sha256", status.Pinned, "by", in.By)
		writeJSON(w, http.StatusOK, status)
	}
}

// readAcceptRequest reads the optional body; by defaults to "admin".
func readAcceptRequest(w http.ResponseWriter, r *http.Request) (acceptRequest, bool) {
	in := acceptRequest{}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAcceptBody))
	if err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodePayloadTooLarge, fmt.Sprintf("an accept body is at most %d bytes", maxAcceptBody)))
		return in, false
	}
	if len(strings.TrimSpace(string(raw))) > 0 {
		if ct := r.Header.Get("Content-Type"); !isJSONMediaType(ct) {
			callpath.WriteProblem(w, callpath.NewProblem(wire.CodeUnsupportedMediaType, "send the body as application/json"))
			return in, false
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			badAdminRequest(w, `the body must be {"sha256": "<64 hex digits>", "by": "<who>"} (both optional)`)
			return in, false
		}
	}
	if in.SHA256 != "" {
		if err := pins.ValidHash(in.SHA256); err != nil {
			badAdminRequest(w, "sha256: "+err.Error())
			return in, false
		}
		in.SHA256 = strings.ToLower(in.SHA256)
	}
	if strings.TrimSpace(in.By) == "" {
		in.By = callpath.ByAdmin
	}
	if err := checkClaimedBy(in.By); err != nil {
		badAdminRequest(w, err.Error())
		return in, false
	}
	return in, true
}
