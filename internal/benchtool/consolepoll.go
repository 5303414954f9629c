package benchtool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/wire"
)

// The "gateway+console" target: the same gateway as "gateway", loaded the
// same way, while an operator's console is left open on the Approvals
// page. A ConsolePoller is that console: signed in through the real
// sign-in form (admin token, session cookie, CSRF), it fetches what the
// page's script polls, every interval, over a backlog of pending
// approvals made by real calls of an approval tool.

// ConsoleName is the name of the target loaded while a console polls.
const ConsoleName = "gateway+console"

// Companion is work that runs beside a target's load during each of its
// measured runs, measured apart from it.
type Companion interface {
	// Prepare readies it, once, before the target's first run.
	Prepare(ctx context.Context) error
	// Run works until ctx ends and returns what its requests measured.
	Run(ctx context.Context) *Result
}

// ConsolePollConfig configures a ConsolePoller.
type ConsolePollConfig struct {
	// AdminURL is the base URL of the admin listener serving /console/.
	AdminURL string
	// AdminToken is the token the console signs in with.
	AdminToken string
	// GatewayURL is where the calls that wait for approval are made.
	GatewayURL string
	// ApprovalTool is the tool whose calls wait for approval (default
	// ApprovalToolName).
	ApprovalTool string
	// Pending is the number of pending approvals made before the first
	// poll (default 200).
	Pending int
	// Interval is the time between polls (default 1 s, the page's).
	Interval time.Duration
}

// ConsolePoller is an operator's console left open on the Approvals page.
type ConsolePoller struct {
	cfg    ConsolePollConfig
	client *http.Client

	mu       sync.Mutex
	prepared bool
	// pollURL is what the page's script polls (its data-poll attribute).
	pollURL string
}

var _ Companion = (*ConsolePoller)(nil)

// NewConsolePoller checks cfg and fills its defaults.
func NewConsolePoller(cfg ConsolePollConfig) (*ConsolePoller, error) {
	if cfg.AdminURL == "" || cfg.AdminToken == "" || cfg.GatewayURL == "" {
		return nil, errors.New("benchtool: console: admin URL, admin token and gateway URL are required")
	}
	cfg.ApprovalTool = orString(cfg.ApprovalTool, ApprovalToolName)
	cfg.Pending = orInt(cfg.Pending, 200)
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	cfg.AdminURL = strings.TrimSuffix(cfg.AdminURL, "/")
	cfg.GatewayURL = strings.TrimSuffix(cfg.GatewayURL, "/")
	jar, _ := cookiejar.New(nil) // cannot fail without options
	// Redirects are not followed: a poll answered with one (the session
	// was lost) must count as a failed poll, as the page reloads then.
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	return &ConsolePoller{cfg: cfg, client: client}, nil
}

// Config returns the effective configuration.
func (p *ConsolePoller) Config() ConsolePollConfig { return p.cfg }

// Prepare makes the pending approvals, signs in and finds the URL the
// Approvals page polls; once (later calls do nothing).
func (p *ConsolePoller) Prepare(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prepared {
		return nil
	}
	if err := p.makePending(ctx); err != nil {
		return err
	}
	if err := p.signIn(ctx); err != nil {
		return err
	}
	page, err := p.get(ctx, "/console/approvals")
	if err != nil {
		return err
	}
	m := dataPoll.FindSubmatch(page)
	if m == nil {
		return errors.New("benchtool: console: the Approvals page has no data-poll URL")
	}
	p.pollURL = p.cfg.AdminURL + html.UnescapeString(string(m[1]))
	// How many of the approvals a poll shows is reported, not required:
	// on Redis a page is one bounded SCAN of the keyspace, which the
	// load's records fill.
	if _, err := p.get(ctx, strings.TrimPrefix(p.pollURL, p.cfg.AdminURL)); err != nil {
		return err
	}
	p.prepared = true
	return nil
}

var (
	dataPoll  = regexp.MustCompile(`data-poll="([^"]+)"`)
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// makePending makes cfg.Pending calls of the approval tool, each a new
// step, each answered 409 approval_pending.
func (p *ConsolePoller) makePending(ctx context.Context) error {
	session := "console-" + randomHex(6)
	for i := range p.cfg.Pending {
		args := fmt.Sprintf(`{"op":"console","seq":%d}`, i)
		key, canonical, err := keyderive.Derive(session, uint64(i), p.cfg.ApprovalTool, []byte(args))
		if err != nil {
			return fmt.Errorf("benchtool: console: derive key: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.GatewayURL+"/api/tools/v1/"+p.cfg.ApprovalTool, bytes.NewReader(canonical))
		if err != nil {
			return fmt.Errorf("benchtool: console: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		req.Header.Set(wire.HeaderSessionID, session)
		req.Header.Set(wire.HeaderStepIndex, fmt.Sprint(i))
		status, body, err := p.do(req)
		if err != nil {
			return err
		}
		if status != http.StatusConflict || !bytes.Contains(body, []byte(wire.CodeApprovalPending)) {
			return fmt.Errorf("benchtool: console: call %d of %s: status %d, want 409 %s", i, p.cfg.ApprovalTool, status, wire.CodeApprovalPending)
		}
	}
	return nil
}

// signIn fills in the sign-in form as a browser does: its page sets the
// form's CSRF cookie, the POST sets the session cookie (kept in the jar)
// and redirects to the Approvals page.
func (p *ConsolePoller) signIn(ctx context.Context) error {
	form, err := p.get(ctx, "/console/signin")
	if err != nil {
		return err
	}
	m := csrfInput.FindSubmatch(form)
	if m == nil {
		return errors.New("benchtool: console: the sign-in form has no CSRF field")
	}
	values := url.Values{"csrf": {html.UnescapeString(string(m[1]))}, "next": {"/console/approvals"},
		"name": {"gatewaybench"}, "token": {p.cfg.AdminToken}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.AdminURL+"/console/signin", strings.NewReader(values.Encode()))
	if err != nil {
		return fmt.Errorf("benchtool: console: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("benchtool: console: sign in: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/approvals" {
		return fmt.Errorf("benchtool: console: sign in: status %d to %q, want 303 to the Approvals page", resp.StatusCode, resp.Header.Get("Location"))
	}
	return nil
}

// get fetches an admin path and wants 200.
func (p *ConsolePoller) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.AdminURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("benchtool: console: %w", err)
	}
	status, body, err := p.do(req)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("benchtool: console: GET %s: status %d", path, status)
	}
	return body, nil
}

// do sends req and reads the whole answer.
func (p *ConsolePoller) do(req *http.Request) (int, []byte, error) {
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("benchtool: console: %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("benchtool: console: %s %s: %w", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, body, nil
}

// Run polls at once, then every interval, as the open page does, until
// ctx ends; each poll is recorded with its status and latency (a poll in
// flight when ctx ends is finished and counted).
func (p *ConsolePoller) Run(ctx context.Context) *Result {
	res := newResult()
	start := time.Now()
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		p.poll(context.WithoutCancel(ctx), res)
		select {
		case <-ctx.Done():
			res.Elapsed = time.Since(start)
			return res
		case <-tick.C:
		}
	}
}

// poll fetches the pending list once, as the page's script does.
func (p *ConsolePoller) poll(ctx context.Context, res *Result) {
	begin := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.pollURL, nil)
	if err != nil {
		res.Errors++
		return
	}
	req.Header.Set("Accept", "text/html")
	status, body, err := p.do(req)
	if err != nil {
		res.Errors++
		return
	}
	res.record(status, false, time.Since(begin))
	res.Listed += int64(bytes.Count(body, approvalCard))
}

// approvalCard marks one pending approval in the polled list.
var approvalCard = []byte(`class="card approval"`)
