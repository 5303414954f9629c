package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/toolgateway/toolgateway/keyderive"
)

// toolCall is one call to the tool API of the scratch gateway.
type toolCall struct {
	tool, session string
	step          uint64
	args          []byte
	key           string // "" derives it
	tenant        int    // index into env.tenants, when there are any
	// decided sends the call to the gateway with the decide rules;
	// expiring to the one whose approvals expire at once.
	decided, expiring bool
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// summary is the answer as a verdict names it: its status, and its
// problem's code, reason or detail.
func (r answer) summary() string {
	var p struct{ Code, Reason, Detail string }
	_ = json.Unmarshal(r.body, &p)
	why := p.Reason
	if why == "" {
		why = p.Detail
	}
	if p.Code == "" {
		return fmt.Sprintf("%d", r.status)
	}
	return fmt.Sprintf("%d %s: %s", r.status, p.Code, why)
}

func (env *scratchEnv) call(ctx context.Context, c toolCall) (answer, error) {
	base := env.srv.URL
	switch {
	case c.decided:
		base = env.decided.URL
	case c.expiring:
		base = env.expiring.URL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/tools/v1/"+c.tool, bytes.NewReader(c.args))
	if err != nil {
		return answer{}, err
	}
	key, err := deriveKey(c)
	if err != nil {
		return answer{}, fmt.Errorf("derive key: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Agent-Session-Id", c.session)
	req.Header.Set("Agent-Step-Index", strconv.FormatUint(c.step, 10))
	if len(env.tenants) > 0 {
		req.Header.Set("Authorization", "Bearer "+env.tenants[c.tenant].token)
	}
	resp, err := env.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	r := answer{status: resp.StatusCode, header: resp.Header, body: body}
	env.refused.saw(r)
	return r, err
}

// deriveKey is the key call c is sent under.
func deriveKey(c toolCall) (string, error) {
	if c.key != "" {
		return c.key, nil
	}
	return keyderive.Key(c.session, c.step, c.tool, c.args)
}
