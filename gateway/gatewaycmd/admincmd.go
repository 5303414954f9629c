package gatewaycmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/idempotency"
)

const adminUsage = "[-url URL] [-token-file F] [-json] list|show|exec|resolve|delete|approvals|approval|approve|deny|tools|budgets ...\n" +
	"      list [-state S] [-tenant T] [-tool X] [-session S] [-limit N] [-cursor C] [-all]\n" +
	"      show TENANT TOOL KEY [-response]\n" +
	"      exec EXECUTION_ID [-response]\n" +
	"      resolve TENANT TOOL KEY -status N [-content-type T] -body JSON|@FILE\n" +
	"      delete TENANT TOOL KEY\n" +
	"      " + approvalsUsage + "\n" +
	"      " + approvalUsage + "\n" +
	"      " + approveUsage + "\n" +
	"      " + denyUsage + "\n" +
	"      " + toolsListUsage + "\n" +
	"      " + toolsAcceptUsage + "\n" +
	"      " + budgetsUsage

// envAdminToken carries the admin bearer token when -token-file is not given.
const envAdminToken = "GATEWAY_ADMIN_TOKEN"

// adminTimeout bounds each admin request.
const adminTimeout = 30 * time.Second

// adminClient talks to a gateway's admin API. The token is sent, never
// printed: it appears in no error and no output.
type adminClient struct {
	base     string
	token    string
	tokenErr error // why there is no token
	client   *http.Client
	json     bool
	stdout   io.Writer
	// user is $USER: who approves or denies when -by is not given.
	user string
}

// runAdmin is `gateway admin`: search and resolve idempotency records
// through the admin API of a running gateway.
func runAdmin(ctx context.Context, inv invocation) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "the gateway's base URL")
	tokenFile := fs.String("token-file", "", "file holding the admin bearer token (else $"+envAdminToken+")")
	asJSON := fs.Bool("json", false, "print the API's JSON instead of tables")
	if err := parseFlags(fs, inv, "admin", adminUsage); err != nil {
		return helpIsSuccess(err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("admin: name a command (usage: gateway admin %s)", adminUsage)
	}
	// A missing token fails the first request, so `admin CMD -h` works
	// without one.
	token, tokenErr := adminToken(*tokenFile, inv.getenv)
	u, err := url.Parse(*base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("admin: -url %q: want http(s)://host[:port]", *base)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	c := &adminClient{
		base:     strings.TrimRight(*base, "/"),
		token:    token,
		tokenErr: tokenErr,
		client:   &http.Client{Transport: transport, Timeout: adminTimeout},
		json:     *asJSON,
		stdout:   inv.stdout,
		user:     inv.getenv("USER"),
	}
	sub, args := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "list":
		return helpIsSuccess(c.list(ctx, args))
	case "show":
		return helpIsSuccess(c.show(ctx, args))
	case "exec":
		return helpIsSuccess(c.exec(ctx, args))
	case "resolve":
		return helpIsSuccess(c.resolve(ctx, args))
	case "delete":
		return helpIsSuccess(c.remove(ctx, args))
	case "approvals":
		return helpIsSuccess(c.approvals(ctx, args))
	case "approval":
		return helpIsSuccess(c.approval(ctx, args))
	case "approve":
		return helpIsSuccess(c.decide(ctx, args, true))
	case "deny":
		return helpIsSuccess(c.decide(ctx, args, false))
	case "tools":
		return helpIsSuccess(c.tools(ctx, args))
	case "budgets":
		return helpIsSuccess(c.budgets(ctx, args))
	}
	return fmt.Errorf("admin: unknown command %q (usage: gateway admin %s)", sub, adminUsage)
}

// adminToken reads the token from the file, or else the environment.
func adminToken(file string, getenv func(string) string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("admin: -token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("admin: -token-file %s is empty", file)
	}
	if t := strings.TrimSpace(getenv(envAdminToken)); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("admin: no admin token: use -token-file or set %s", envAdminToken)
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments (`show T X K -response`), which flag.Parse
// alone does not.
// -h prints the command's usage on stdout and reports errHelp.
func (c *adminClient) parseInterleaved(fs *flag.FlagSet, args []string, want int, usage string) ([]string, error) {
	var usageText strings.Builder
	fs.SetOutput(&usageText)
	var positional []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(c.stdout, "usage: gateway admin %s\n", usage)
			fs.SetOutput(c.stdout)
			fs.PrintDefaults()
			return nil, errHelp
		} else if err != nil {
			return nil, fmt.Errorf("admin %s: %w (usage: gateway admin %s)", fs.Name(), err, usage)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != want {
		return nil, fmt.Errorf("admin %s: want %d arguments, got %d (usage: gateway admin %s)", fs.Name(), want, len(positional), usage)
	}
	return positional, nil
}

// problemError is an admin API error answer.
type problemError struct {
	status int
	code   string
	detail string
}

func (e *problemError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.code, e.detail)
}

// do sends one request and decodes a 2xx JSON answer into out (nil: the
// body is returned only). Any other answer becomes a problemError.
func (c *adminClient) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if c.tokenErr != nil {
		return nil, c.tokenErr
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, reader)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// The error names the URL, never a header: the token stays out.
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
			Title  string `json:"title"`
		}
		if json.Unmarshal(raw, &p) != nil || p.Code == "" {
			return nil, &problemError{status: resp.StatusCode, code: "error", detail: strings.TrimSpace(string(raw[:min(len(raw), 200)]))}
		}
		if p.Detail == "" {
			p.Detail = p.Title
		}
		return nil, &problemError{status: resp.StatusCode, code: p.Code, detail: p.Detail}
	}
	return raw, nil
}

func (c *adminClient) list(ctx context.Context, args []string) error {
	const usage = "list [-state S] [-tenant T] [-tool X] [-session S] [-limit N] [-cursor C] [-all]"
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	state := fs.String("state", "", "IN_PROGRESS, COMPLETED or UNKNOWN")
	tenant := fs.String("tenant", "", "only this tenant's records")
	tool := fs.String("tool", "", "only this tool's records")
	session := fs.String("session", "", "only this agent session's records (needs -tenant)")
	paging := addPagingFlags(fs)
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	if _, err := c.parseInterleaved(fs, args, 0, usage); err != nil {
		return err
	}
	q := paging.query(map[string]string{"state": strings.ToUpper(*state), "tenant": *tenant, "tool": *tool, "session": *session})
	records, next, err := c.listPages(ctx, "/admin/v1/records", "records", q, *paging.all)
	if err != nil {
		return fmt.Errorf("admin list: %w", err)
	}
	if *asJSON {
		return c.writeListing("records", records, next)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tTENANT\tTOOL\tKEY\tEXECUTION ID\tCREATED\tEXPIRES")
	for _, raw := range records {
		var r gateway.AdminRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("admin list: a record: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.State, r.Tenant, r.Tool,
			idempotency.KeyPrefix(r.Key)+"…", r.ExecutionID, r.CreatedAt, r.ExpiresAt)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(c.stdout, "\n%d records; more: -cursor %s (or -all)\n", len(records), next)
	} else {
		fmt.Fprintf(c.stdout, "\n%d records\n", len(records))
	}
	return nil
}

// recordPath is the admin path of a record; every segment is escaped, so
// a key holding '/' reaches the server intact.
func recordPath(tenant, tool, key string) string {
	return "/admin/v1/records/" + url.PathEscape(tenant) + "/" + url.PathEscape(tool) + "/" + url.PathEscape(key)
}

func (c *adminClient) show(ctx context.Context, args []string) error {
	return c.getRecord(ctx, args, "show TENANT TOOL KEY [-response]", 3, func(pos []string) string {
		return recordPath(pos[0], pos[1], pos[2])
	})
}

func (c *adminClient) exec(ctx context.Context, args []string) error {
	return c.getRecord(ctx, args, "exec EXECUTION_ID [-response]", 1, func(pos []string) string {
		return "/admin/v1/executions/" + url.PathEscape(pos[0])
	})
}

// getRecord is a command that prints one record (show, exec): usage's first
// word names it, nargs positional arguments make its admin path (pathOf),
// and -response adds the stored response.
func (c *adminClient) getRecord(ctx context.Context, args []string, usage string, nargs int, pathOf func(pos []string) string) error {
	name, _, _ := strings.Cut(usage, " ")
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	response := fs.Bool("response", false, "include the stored response")
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, nargs, usage)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodGet, pathOf(pos)+includeQuery(*response), nil)
	if err != nil {
		return fmt.Errorf("admin %s: %w", name, err)
	}
	return c.printRecord(raw, *asJSON)
}

// includeQuery asks for the record's canonical arguments (what an operator
// checks the effect against) and, with response, its stored response.
func includeQuery(response bool) string {
	if response {
		return "?include=response,arguments"
	}
	return "?include=arguments"
}

func (c *adminClient) resolve(ctx context.Context, args []string) error {
	const usage = "resolve TENANT TOOL KEY -status N [-content-type T] -body JSON|@FILE [-by NAME]"
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	by := fs.String("by", c.user, "who resolves, kept as claimed_by beside token:admin (default $USER)")
	status := fs.Int("status", 0, "the HTTP status the call really had (200–499)")
	contentType := fs.String("content-type", "application/json", "the response's media type")
	body := fs.String("body", "", "the response body: JSON text (for a JSON type; any other type: the text itself), or @FILE")
	asJSON := fs.Bool("json", c.json, "print the API's JSON")
	pos, err := c.parseInterleaved(fs, args, 3, usage)
	if err != nil {
		return err
	}
	if *status == 0 {
		return fmt.Errorf("admin resolve: -status is required (usage: gateway admin %s)", usage)
	}
	content := []byte(*body)
	if name, ok := strings.CutPrefix(*body, "@"); ok {
		if content, err = os.ReadFile(name); err != nil {
			return fmt.Errorf("admin resolve: -body: %w", err)
		}
	}
	request := map[string]any{"status": *status, "content_type": *contentType}
	if *by != "" {
		request["by"] = *by
	}
	switch {
	case len(bytes.TrimSpace(content)) == 0:
		// No body.
	case isJSONType(*contentType):
		if !json.Valid(content) {
			return errors.New("admin resolve: -body is not valid JSON (the content type is JSON)")
		}
		request["body"] = json.RawMessage(content)
	default:
		request["body"] = string(content)
	}
	payload, err := json.Marshal(request)
	if err != nil {
		return fmt.Errorf("admin resolve: %w", err)
	}
	raw, err := c.do(ctx, http.MethodPost, recordPath(pos[0], pos[1], pos[2])+"/resolve", payload)
	if err != nil {
		return fmt.Errorf("admin resolve: %w", err)
	}
	return c.printRecord(raw, *asJSON)
}

// isJSONType reports whether a media type is JSON (as the server decides).
func isJSONType(contentType string) bool {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(contentType)), ";")
	mt = strings.TrimSpace(mt)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

func (c *adminClient) remove(ctx context.Context, args []string) error {
	const usage = "delete TENANT TOOL KEY"
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	pos, err := c.parseInterleaved(fs, args, 3, usage)
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodDelete, recordPath(pos[0], pos[1], pos[2]), nil); err != nil {
		return fmt.Errorf("admin delete: %w", err)
	}
	_, err = fmt.Fprintf(c.stdout, "deleted %s/%s/%s…: the next call with this key runs the tool\n", pos[0], pos[1], idempotency.KeyPrefix(pos[2]))
	return err
}

// printRecord prints one record as aligned "field value" lines (or JSON).
func (c *adminClient) printRecord(raw []byte, asJSON bool) error {
	if asJSON {
		return c.writeAnswer(raw)
	}
	var r gateway.AdminRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("admin: the answer is not a record: %w", err)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s\t%s\n", name, value)
		}
	}
	line("tenant", r.Tenant)
	line("tool", r.Tool)
	line("key", r.Key)
	line("state", r.State)
	line("execution_id", r.ExecutionID)
	line("fingerprint", r.Fingerprint)
	line("fencing_token", strconv.FormatInt(r.FencingToken, 10))
	line("created_at", r.CreatedAt)
	line("expires_at", r.ExpiresAt)
	line("lease_expires_at", r.LeaseExpiresAt)
	line("session_id", r.SessionID)
	if r.StepIndex != nil {
		line("step_index", strconv.FormatUint(*r.StepIndex, 10))
	}
	if r.Identity.Kind != "" {
		line("identity", r.Identity.String())
	}
	line("upstream_key", r.UpstreamKey)
	if r.CanonicalArguments != nil {
		line("arguments", *r.CanonicalArguments)
	}
	if r.ResponseStatus != 0 {
		line("response_status", strconv.Itoa(r.ResponseStatus))
	}
	if resp := r.Response; resp != nil {
		line("content_type", resp.ContentType)
		var text string
		switch {
		case resp.BodyBase64 != "":
			line("body_base64", resp.BodyBase64)
		case json.Unmarshal(resp.Body, &text) == nil && !isJSONType(resp.ContentType):
			line("body", text)
		default:
			line("body", string(resp.Body))
		}
	}
	return tw.Flush()
}

func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// textReport is a command's report that writes itself for a person.
type textReport interface{ writeText(io.Writer) error }

// writeReport writes a command's report as indented JSON (-json) or as
// its text.
func writeReport(w io.Writer, asJSON bool, report textReport) error {
	if asJSON {
		return writeIndented(w, report)
	}
	return report.writeText(w)
}

// pagingFlags are the flags of a listing command that page it.
type pagingFlags struct {
	limit  *int
	cursor *string
	all    *bool
}

// addPagingFlags defines -limit, -cursor and -all on fs.
func addPagingFlags(fs *flag.FlagSet) pagingFlags {
	return pagingFlags{
		limit:  fs.Int("limit", 0, "page size (default the server's, 100; at most 1000)"),
		cursor: fs.String("cursor", "", "continue a listing where a page ended"),
		all:    fs.Bool("all", false, "follow the pages to the end"),
	}
}

// query is a listing's query: the filters given (an empty one is left
// out), the cursor and the page size.
func (p pagingFlags) query(filters map[string]string) url.Values {
	q := url.Values{}
	filters["cursor"] = *p.cursor
	for name, v := range filters {
		if v != "" {
			q.Set(name, v)
		}
	}
	if *p.limit != 0 {
		q.Set("limit", strconv.Itoa(*p.limit))
	}
	return q
}

// listPages gets one page of the admin API's listing at path (its items
// under member), or with all every page, following next_cursor; next is
// the cursor of the page after the last one got ("" at the end).
func (c *adminClient) listPages(ctx context.Context, path, member string, q url.Values, all bool) (items []json.RawMessage, next string, err error) {
	for {
		raw, err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
		if err != nil {
			return nil, "", err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, "", fmt.Errorf("the answer is not a listing: %w", err)
		}
		var got []json.RawMessage
		next = ""
		for name, into := range map[string]any{member: &got, "next_cursor": &next} {
			if value, ok := page[name]; ok {
				if err := json.Unmarshal(value, into); err != nil {
					return nil, "", fmt.Errorf("the answer is not a listing: %w", err)
				}
			}
		}
		items = append(items, got...)
		if !all || next == "" {
			return items, next, nil
		}
		q.Set("cursor", next)
	}
}

// writeListing writes a listing as JSON: its items under member, and the
// cursor of the next page when there is one.
func (c *adminClient) writeListing(member string, items []json.RawMessage, next string) error {
	out := map[string]any{member: items}
	if next != "" {
		out["next_cursor"] = next
	}
	return writeIndented(c.stdout, out)
}

// writeAnswer writes one answer of the admin API as indented JSON.
func (c *adminClient) writeAnswer(raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("admin: the answer is not JSON: %w", err)
	}
	return writeIndented(c.stdout, v)
}
