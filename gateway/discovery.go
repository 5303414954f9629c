package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// handleList serves GET /api/tools/v1 in the native, openai or anthropic shape.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	entries := s.Tools().Entries()
	var doc any
	switch format := r.URL.Query().Get("format"); format {
	case "", "native":
		doc = tools.NativeList(entries)
	case "openai":
		doc = tools.OpenAIList(entries)
	case "anthropic":
		doc = tools.AnthropicList(entries)
	default:
		p := callpath.NewProblem(wire.CodeInvalidArguments, "format must be native, openai or anthropic")
		p.Errors = []wire.Violation{{Location: "", Message: "unknown format"}}
		callpath.WriteProblem(w, p)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// handleDescribe serves GET /api/tools/v1/{tool}: one bare tool object.
func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request, entry *tools.Entry) {
	writeJSON(w, http.StatusOK, tools.NativeOne(entry))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeToolFailed, "could not encode the response"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
