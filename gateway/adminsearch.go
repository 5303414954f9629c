package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

// DefaultAdminListLimit is the page size of GET /admin/v1/records without
// a limit parameter.
const DefaultAdminListLimit = 100

// maxExecutionIDLen bounds an execution id in an admin path: the gateway
// mints 26-character ULIDs; anything much longer names nothing.
const maxExecutionIDLen = 128

// AdminResponse is a stored response in the admin API. Body holds the
// body as a JSON value when the content type is JSON and the bytes are
// valid JSON, else as a JSON string when they are UTF-8 text; any other
// body is in BodyBase64 (standard base64) instead.
type AdminResponse struct {
	Status      int             `json:"status"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body,omitempty"`
	BodyBase64  string          `json:"body_base64,omitempty"`
}

// adminList is the answer of GET /admin/v1/records.
type adminList struct {
	Records    []AdminRecord `json:"records"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// isJSONMediaType reports whether a content type is application/json or
// a +json type.
func isJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == wire.MediaTypeJSON || strings.HasSuffix(mt, "+json"))
}

func toAdminResponse(resp *idempotency.StoredResponse) *AdminResponse {
	out := &AdminResponse{Status: resp.Status, ContentType: resp.ContentType}
	switch {
	case isJSONMediaType(resp.ContentType) && json.Valid(resp.Body):
		out.Body = json.RawMessage(resp.Body)
	case utf8.Valid(resp.Body):
		text, _ := json.Marshal(string(resp.Body)) // a string always encodes
		out.Body = text
	default:
		out.BodyBase64 = base64.StdEncoding.EncodeToString(resp.Body)
	}
	return out
}

// adminInclude is what ?include= asks to add to a record.
type adminInclude struct {
	response, arguments bool
}

// toAdminRecord renders a record; include adds its stored response and
// canonical arguments.
func toAdminRecord(rec idempotency.Record, include adminInclude) AdminRecord {
	out := AdminRecord{
		UpstreamKey:    tools.ScopedKey(rec.Scope.Tenant, rec.Scope.Tool, rec.Scope.Key),
		Tenant:         rec.Scope.Tenant,
		Tool:           rec.Scope.Tool,
		Key:            rec.Scope.Key,
		State:          string(rec.State),
		Fingerprint:    rec.Fingerprint,
		ExecutionID:    rec.ExecutionID,
		FencingToken:   rec.FencingToken,
		CreatedAt:      rec.CreatedAt.UTC().Format(time.RFC3339),
		ExpiresAt:      rec.ExpiresAt.UTC().Format(time.RFC3339),
		ResolvedBy:     rec.ResolvedBy,
		Requester:      rec.Requester,
		Reconciliation: toAdminReconciliation(rec.Reconciliation),
		Identity:       idempotency.IdentityOfRecord(rec),
	}
	if rec.State == idempotency.StateInProgress && !rec.LeaseExpiresAt.IsZero() {
		out.LeaseExpiresAt = rec.LeaseExpiresAt.UTC().Format(time.RFC3339)
	}
	if rec.State == idempotency.StateCompleted && rec.Response != nil {
		out.ResponseStatus = rec.Response.Status
		if include.response {
			out.Response = toAdminResponse(rec.Response)
		}
	}
	if rec.Step != nil {
		index := rec.Step.Index
		out.SessionID, out.StepIndex = rec.Step.SessionID, &index
	}
	if include.arguments && rec.CanonicalArguments != nil {
		text := string(rec.CanonicalArguments)
		out.CanonicalArguments = &text
	}
	return out
}

// badAdminRequest answers 400 invalid_admin_request.
func badAdminRequest(w http.ResponseWriter, detail string) {
	callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidAdminRequest, detail))
}

// parseInclude reads ?include=: response, arguments, or both (comma
// separated or repeated).
func parseInclude(w http.ResponseWriter, r *http.Request) (include adminInclude, ok bool) {
	q := r.URL.Query()
	for name := range q {
		if name != "include" {
			badAdminRequest(w, fmt.Sprintf("unknown query parameter %q", name))
			return include, false
		}
	}
	for _, v := range q["include"] {
		for _, part := range strings.Split(v, ",") {
			switch part {
			case "":
			case "response":
				include.response = true
			case "arguments":
				include.arguments = true
			default:
				badAdminRequest(w, fmt.Sprintf("include=%q: the values are response and arguments", part))
				return include, false
			}
		}
	}
	return include, true
}

// searchable returns the store's Admin side, or answers 501 when the store
// has none.
func (s *Server) searchable(w http.ResponseWriter) (idempotency.Admin, bool) {
	if s.AdminStore() == nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeAdminUnsupported, "this idempotency store cannot search or resolve records"))
		return nil, false
	}
	return s.AdminStore(), true
}

// listFilter reads the query of GET /admin/v1/records.
func listFilter(r *http.Request) (idempotency.ListFilter, error) {
	q := r.URL.Query()
	if err := checkListParams(q, "state", "tenant", "tool", "session", "limit", "cursor"); err != nil {
		return idempotency.ListFilter{}, err
	}
	f := idempotency.ListFilter{
		State:     idempotency.State(q.Get("state")),
		Tenant:    q.Get("tenant"),
		Tool:      q.Get("tool"),
		SessionID: q.Get("session"),
		Cursor:    q.Get("cursor"),
		Limit:     DefaultAdminListLimit,
	}
	switch f.State {
	case "", idempotency.StateInProgress, idempotency.StateCompleted, idempotency.StateUnknown:
	default:
		return idempotency.ListFilter{}, fmt.Errorf("state %q: want IN_PROGRESS, COMPLETED or UNKNOWN", string(f.State))
	}
	if err := checkListNames(f.Tenant, f.Tool); err != nil {
		return idempotency.ListFilter{}, err
	}
	if f.SessionID != "" && f.Tenant == "" {
		return idempotency.ListFilter{}, errors.New("session requires tenant (sessions are scoped by tenant)")
	}
	var err error
	if f.Limit, err = listLimit(q, DefaultAdminListLimit, idempotency.MaxListLimit); err != nil {
		return idempotency.ListFilter{}, err
	}
	return f, nil
}

// handleAdminList lists records, one page per request.
func (s *Server) handleAdminList(w http.ResponseWriter, r *http.Request) {
	filter, err := listFilter(r)
	if err != nil {
		badAdminRequest(w, err.Error())
		return
	}
	admin, ok := s.searchable(w)
	if !ok {
		return
	}
	page, err := admin.List(r.Context(), filter)
	if s.adminStoreError(w, r, err) {
		return
	}
	out := adminList{Records: make([]AdminRecord, 0, len(page.Records)), NextCursor: page.Cursor}
	for _, rec := range page.Records {
		out.Records = append(out.Records, toAdminRecord(rec, adminInclude{}))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleAdminExecution finds the record of one execution id, in any tenant.
func (s *Server) handleAdminExecution(w http.ResponseWriter, r *http.Request) {
	include, ok := parseInclude(w, r)
	if !ok {
		return
	}
	id := chi.URLParam(r, "execution_id")
	if id == "" || len(id) > maxExecutionIDLen || !printableASCII(id) {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record of that execution id"))
		return
	}
	admin, ok := s.searchable(w)
	if !ok {
		return
	}
	rec, err := admin.FindExecution(r.Context(), id)
	if errors.Is(err, idempotency.ErrNotFound) {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record of that execution id"))
		return
	}
	if s.adminStoreError(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, toAdminRecord(rec, include))
}

func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// resolveRequest is the body of POST …/resolve. Body is raw so that a JSON
// body's exact bytes are stored.
type resolveRequest struct {
	Status      *int            `json:"status"`
	ContentType string          `json:"content_type"`
	Body        json.RawMessage `json:"body"`
	BodyBase64  *string         `json:"body_base64"`
	// By is the name of the operator resolving with the admin token
	// (optional): kept as the receipt's claimed_by beside token:admin.
	By string `json:"by"`
}

// storedResponse turns the request into the response to store: with a
// JSON content type, "body" is any JSON value stored as the exact bytes
// sent; with another type, "body" is a JSON string whose text is stored;
// "body_base64" (standard base64) stores any bytes, whatever the type.
// Neither: an empty body.
func (in resolveRequest) storedResponse() (idempotency.StoredResponse, error) {
	if in.Status == nil || *in.Status < 200 || *in.Status > 499 {
		return idempotency.StoredResponse{}, errors.New(`"status" is required: a status from 200 to 499`)
	}
	resp := idempotency.StoredResponse{Status: *in.Status, ContentType: in.ContentType}
	if resp.ContentType == "" {
		resp.ContentType = wire.MediaTypeJSON
	}
	if _, _, err := mime.ParseMediaType(resp.ContentType); err != nil || strings.ContainsAny(resp.ContentType, "\r\n") {
		return idempotency.StoredResponse{}, fmt.Errorf("content_type %q is not a media type", resp.ContentType)
	}
	switch {
	case in.Body != nil && in.BodyBase64 != nil:
		return idempotency.StoredResponse{}, errors.New(`send "body" or "body_base64", not both`)
	case in.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.BodyBase64)
		if err != nil {
			return idempotency.StoredResponse{}, fmt.Errorf("body_base64: %w", err)
		}
		resp.Body = b
	case in.Body == nil:
		resp.Body = []byte{}
	case isJSONMediaType(resp.ContentType):
		resp.Body = bytes.Clone(in.Body)
	default:
		var text string
		if err := json.Unmarshal(in.Body, &text); err != nil {
			return idempotency.StoredResponse{}, fmt.Errorf(`content_type %q is not JSON: "body" must be a JSON string (or use "body_base64")`, resp.ContentType)
		}
		resp.Body = []byte(text)
	}
	return resp, nil
}

// handleAdminResolve turns an UNKNOWN (or expired IN_PROGRESS) record into
// COMPLETED with the outcome the operator found, for the tool's replay
// TTL (the server default for a tool no longer configured).
func (s *Server) handleAdminResolve(w http.ResponseWriter, r *http.Request) {
	scope, ok := adminScope(r, "/resolve")
	if !ok {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeRecordNotFound, "no record under that path"))
		return
	}
	if len(r.URL.Query()) > 0 {
		badAdminRequest(w, "resolve takes no query parameters")
		return
	}
	if ct := r.Header.Get("Content-Type"); !isJSONMediaType(ct) {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeUnsupportedMediaType, "send the resolution as application/json"))
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodePayloadTooLarge, "the resolution is larger than max_body_bytes"))
		return
	}
	var in resolveRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		detail := "the body is not a JSON object of status, content_type, body"
		if err != nil {
			detail += ": " + err.Error()
		}
		callpath.WriteProblem(w, callpath.NewProblem(wire.CodeInvalidJSON, detail))
		return
	}
	resp, err := in.storedResponse()
	if err == nil {
		err = checkClaimedBy(in.By)
	}
	if err != nil {
		badAdminRequest(w, err.Error())
		return
	}
	admin, ok := s.searchable(w)
	if !ok {
		return
	}
	rec, err := s.Settle(r.Context(), scope, receipts.EventResolved, callpath.ByAdmin, in.By, func() (idempotency.Record, error) {
		return admin.Resolve(r.Context(), scope, resp, s.PolicyOf(scope.Tool).ReplayTTL)
	})
	if s.adminStoreError(w, r, err) {
		return
	}
	s.Logger().InfoContext(r.Context(), "admin resolved a record", "claimed_by", in.By, "tenant", scope.Tenant, "tool", scope.Tool,
		"key_prefix", idempotency.KeyPrefix(scope.Key), "execution_id", rec.ExecutionID, "status", resp.Status)
	writeJSON(w, http.StatusOK, toAdminRecord(rec, adminInclude{response: true}))
}
