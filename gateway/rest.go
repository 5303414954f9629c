package gateway

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// The REST adapter: POST /api/tools/v1/{tool}. It does the checks only HTTP
// has (tool exists → method → content type → body size), parses the
// Idempotency-Key and Agent-* headers into a Call, hands it to Server.Call
// and renders the Result as HTTP.

// handleTool serves /api/tools/v1/{tool}: GET describes the tool, POST calls
// it. The tool must exist before the method is looked at (404 before 405).
func (s *Server) handleTool(w http.ResponseWriter, r *http.Request) {
	callpath.SetRoute(r.Context(), toolRoute) // what chi would rebuild on every call
	entry, ok := s.Tools().Lookup(chi.URLParam(r, "tool"))
	if !ok && r.Method == http.MethodPost {
		// A tool its MCP server no longer offers still replays (retired.go).
		entry, ok = s.Tools().Retired(chi.URLParam(r, "tool"))
	}
	if !ok {
		p := callpath.NewProblem(wire.CodeToolNotFound, "no tool of that name; GET /api/tools/v1 lists them")
		callpath.MarkProblem(r.Context(), "", p)
		callpath.WriteProblem(w, p)
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.handleCall(w, r, entry)
	case http.MethodGet, http.MethodHead:
		callpath.MarkTool(r.Context(), entry.Spec.Name)
		s.handleDescribe(w, r, entry)
	default:
		p := callpath.NewProblem(wire.CodeMethodNotAllowed, "call a tool with POST, describe it with GET")
		callpath.MarkProblem(r.Context(), entry.Spec.Name, p)
		p.WithAllow("GET, HEAD, POST")
		callpath.WriteProblem(w, p)
	}
}

// toolRoute is handleTool's route pattern, for the access log.
const toolRoute = "/api/tools/v1/{tool}"

// handleCall runs the HTTP-only checks, then the call path.
func (s *Server) handleCall(w http.ResponseWriter, r *http.Request, entry *tools.Entry) {
	ctx := r.Context()
	fail := func(p *callpath.Problem) {
		callpath.MarkProblem(ctx, entry.Spec.Name, p)
		callpath.WriteProblem(w, p)
	}
	if !callpath.IsJSONRequest(r.Header) {
		fail(callpath.NewProblem(wire.CodeUnsupportedMediaType, "send the arguments as application/json"))
		return
	}
	body, p := s.readBody(w, r)
	if p != nil {
		w.Header().Set("Connection", "close")
		fail(p)
		if p.Code == wire.CodePayloadTooLarge {
			callpath.CloseNow(w) // without waiting for the rest of the body
		}
		return
	}
	c := &callpath.Call{
		API:       callpath.APIREST,
		Tenant:    callpath.TenantFrom(ctx),
		Entry:     entry,
		Arguments: body,
		Received:  callpath.RequestStart(ctx),
	}
	callpath.ReadIdentity(c, callpath.IdentitySource{API: callpath.APIREST, Header: r.Header}, s.opts.KeyMode)
	wait := callpath.PreferWait(r.Header, callpath.MaxPreferWait)
	c.Wait = time.Duration(wait) * time.Second
	c.WaitForApproval = callpath.PreferApproval(r.Header)
	res := s.Call(ctx, c)
	if res.Waited {
		applied := "wait=" + strconv.Itoa(wait)
		if c.WaitForApproval {
			applied += ", " + wire.PreferApproval
		}
		w.Header().Set(wire.HeaderPreferenceApplied, applied)
	}
	writeResult(w, res)
}

// writeResult renders a call's Result as HTTP: the tool's answer unchanged
// or a problem, with Idempotent-Replayed and Tool-Execution-Id whenever the
// call reached a claim.
func writeResult(w http.ResponseWriter, res callpath.Result) {
	if res.Problem != nil {
		if res.ExecutionID != "" {
			setExecutionHeaders(w.Header(), res.Replayed, res.ExecutionID)
		}
		callpath.WriteProblem(w, res.Problem)
		return
	}
	h := w.Header()
	// The hot path: header values written straight into the map (names
	// already canonical, see TestHotHeaderNamesAreCanonical), constant
	// values shared, and the two per-response values in one allocation.
	// Shared slices have cap == len, so a later Add copies, never writes
	// into them.
	if res.ExecutionID != "" {
		values := make([]string, 2)
		values[0], values[1] = strconv.Itoa(len(res.Body)), res.ExecutionID
		h[wire.HeaderReplayed] = replayedValues(res.Replayed)
		h[wire.HeaderExecutionID] = values[1:2:2]
		if res.EffectReplayed {
			h[wire.HeaderEffectKeyReplayed] = valuesTrue[:1:1]
		}
		setContentType(h, res.ContentType)
		h[headerContentLength] = values[0:1:1]
		w.WriteHeader(res.Status)
		_, _ = w.Write(res.Body)
		return
	}
	writeToolAnswer(w, res.Status, res.ContentType, res.Body)
}

// Canonical names and shared constant values of the hot path's headers.
const (
	headerContentType   = "Content-Type"
	headerContentLength = "Content-Length"
)

var (
	valuesJSON  = []string{"application/json"}
	valuesTrue  = []string{"true"}
	valuesFalse = []string{"false"}
)

func replayedValues(replayed bool) []string {
	if replayed {
		return valuesTrue[:1:1]
	}
	return valuesFalse[:1:1]
}

// setContentType sets a tool answer's content type ("" leaves it unset).
func setContentType(h http.Header, contentType string) {
	switch contentType {
	case "":
	case "application/json":
		h[headerContentType] = valuesJSON[:1:1]
	default:
		h[headerContentType] = []string{contentType}
	}
}

// writeToolAnswer sends a tool's status, content type and body unchanged.
func writeToolAnswer(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	setContentType(h, contentType)
	h[headerContentLength] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// setExecutionHeaders marks a response of an executed or replayed call.
func setExecutionHeaders(h http.Header, replayed bool, executionID string) {
	h[wire.HeaderReplayed] = replayedValues(replayed)
	h[wire.HeaderExecutionID] = []string{executionID}
}

// readBody reads at most MaxBodyBytes; a larger body is refused as soon as
// the limit is crossed, without reading the rest.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *callpath.Problem) {
	limit := s.opts.MaxBodyBytes
	tooLarge := func() *callpath.Problem {
		return callpath.NewProblem(wire.CodePayloadTooLarge, "the arguments may be at most "+strconv.FormatInt(limit, 10)+" bytes")
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	size := int64(512)
	if r.ContentLength > 0 {
		size = r.ContentLength
	}
	buf := make([]byte, 0, size+1)
	// The innermost writer is net/http's own: only it can learn from the
	// MaxBytesReader that the limit was hit, and then close the connection
	// instead of reading up to 256 KiB more of a stalled body before the 413.
	body := http.MaxBytesReader(callpath.InnermostWriter(w), r.Body, limit)
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				return nil, tooLarge()
			}
			return nil, callpath.NewProblem(wire.CodeInvalidJSON, "the request body could not be read")
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
