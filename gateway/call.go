package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
)

// handleTool serves /api/tools/v1/{tool}: GET describes the tool, POST calls
// it. The tool must exist before the method is looked at (404 before 405).
func (s *Server) handleTool(w http.ResponseWriter, r *http.Request) {
	if info := infoFrom(r.Context()); info != nil {
		info.route = toolRoute // what chi would rebuild on every call
	}
	entry, ok := s.tools.Lookup(chi.URLParam(r, "tool"))
	if !ok {
		setOutcome(r.Context(), "", outcomeNotFound)
		writeProblem(w, newProblem(http.StatusNotFound, CodeToolNotFound, "no tool of that name; GET /api/tools/v1 lists them"))
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.handleCall(w, r, entry)
	case http.MethodGet, http.MethodHead:
		setOutcome(r.Context(), entry.Spec.Name, "")
		s.handleDescribe(w, r, entry)
	default:
		setOutcome(r.Context(), entry.Spec.Name, outcomeInvalid)
		p := newProblem(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "call a tool with POST, describe it with GET")
		p.allow = "GET, HEAD, POST"
		writeProblem(w, p)
	}
}

// toolRoute is handleTool's route pattern, for the access log.
const toolRoute = "/api/tools/v1/{tool}"

// call is one validated tool call on its way to the store.
type call struct {
	entry       *tools.Entry
	body        []byte
	headers     callHeaders
	fingerprint string
	tenant      string
	policy      ToolPolicy
}

// handleCall runs the contract's checks in order, then the store decision.
// Nothing before the store decision writes anything.
func (s *Server) handleCall(w http.ResponseWriter, r *http.Request, entry *tools.Entry) {
	ctx := r.Context()
	name := entry.Spec.Name
	fail := func(outcome string, p *Problem) {
		setOutcome(ctx, name, outcome)
		writeProblem(w, p)
	}

	if !isJSONContentType(requestContentType(r.Header)) {
		fail(outcomeInvalid, newProblem(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "send the arguments as application/json"))
		return
	}
	body, p := s.readBody(w, r)
	if p != nil {
		fail(outcomeInvalid, p)
		return
	}
	value, canonical, err := keyderive.Decode(body)
	if err != nil {
		fail(outcomeInvalid, newProblem(http.StatusBadRequest, CodeInvalidJSON, err.Error()))
		return
	}
	if entry.Spec.ReadOnly {
		if p := validateArguments(entry, value); p != nil {
			fail(outcomeInvalid, p)
			return
		}
		s.runReadOnly(w, r, entry, body)
		return
	}

	headers, p := parseCallHeaders(r.Header, s.opts.KeyMode)
	if p != nil {
		fail(outcomeInvalid, p)
		return
	}
	setKey(ctx, headers.key)
	if s.opts.KeyMode == KeyModeDerived {
		want, err := keyderive.KeyFromCanonical(headers.sessionID, headers.stepIndex, name, canonical)
		if err != nil || want != headers.key {
			fail(outcomeKeyMismatch, newProblem(http.StatusUnprocessableEntity, CodeIdempotencyKeyMismatch,
				"Idempotency-Key must be SHA-256(session:step:tool:JCS(arguments)) in lowercase hex; see docs/keys.md"))
			return
		}
	}
	if p := validateArguments(entry, value); p != nil {
		fail(outcomeInvalid, p)
		return
	}

	c := &call{
		entry:       entry,
		body:        body,
		headers:     headers,
		fingerprint: keyderive.Fingerprint(canonical),
		tenant:      tenantFrom(ctx),
		policy:      s.policy(name),
	}
	s.decide(w, r, c)
}

// validateArguments checks that the arguments are one JSON object valid
// against the tool's schema (the contract's schema step: after the key
// checks, so a non-object body is invalid_arguments only once the headers
// are right).
func validateArguments(entry *tools.Entry, value any) *Problem {
	if _, isObject := value.(map[string]any); !isObject {
		p := newProblem(http.StatusBadRequest, CodeInvalidArguments, "the arguments must be one JSON object")
		p.Errors = []Violation{{Location: "", Message: "expected a JSON object"}}
		return p
	}
	violations := entry.Validate(value)
	if len(violations) == 0 {
		return nil
	}
	p := newProblem(http.StatusBadRequest, CodeInvalidArguments, fmt.Sprintf("%d schema violation(s); see errors", len(violations)))
	p.Errors = make([]Violation, len(violations))
	for i, v := range violations {
		p.Errors[i] = Violation{Location: v.Location, Message: v.Message}
	}
	return p
}

// isJSONContentType accepts application/json with any parameters.
func isJSONContentType(v string) bool {
	if v == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

// readBody reads at most MaxBodyBytes; a larger body is refused as soon as
// the limit is crossed, without reading the rest.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	limit := s.opts.MaxBodyBytes
	tooLarge := func() *Problem {
		return newProblem(http.StatusRequestEntityTooLarge, CodePayloadTooLarge,
			"the arguments may be at most "+strconv.FormatInt(limit, 10)+" bytes")
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
	body := http.MaxBytesReader(innermostWriter(w), r.Body, limit)
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
			return nil, newProblem(http.StatusBadRequest, CodeInvalidJSON, "the request body could not be read")
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// innermostWriter unwraps middleware writers (those with Unwrap, as
// http.ResponseController does) down to the server's own.
func innermostWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// claimRequest builds the store request for c with a fresh owner and
// execution id (used only if the claim succeeds).
func (s *Server) claimRequest(ctx context.Context, c *call) idempotency.ClaimRequest {
	req := idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: c.tenant, Tool: c.entry.Spec.Name, Key: c.headers.key},
		Fingerprint: c.fingerprint,
		StepGuard:   !s.opts.StepGuardOff,
		// In derived mode the key is a hash of the session and step.
		StepBoundKey: s.opts.KeyMode == KeyModeDerived,
		ExecutionID:  newULID(),
		// The request id is unique per request, so it can own the claim; a
		// Prefer: wait poll of the same request that takes over reuses it.
		Owner:       RequestIDFrom(ctx),
		LockTTL:     s.opts.LockTTL,
		ReplayTTL:   c.policy.ReplayTTL,
		LeaseExpiry: c.policy.LeaseExpiry,
	}
	if c.headers.hasStep {
		req.Step = &idempotency.Step{SessionID: c.headers.sessionID, Index: c.headers.stepIndex}
	}
	return req
}
