package gateway_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/internal/testutil"
	"github.com/toolgateway/toolgateway/keyderive"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/wire"
)

func withLogger(l *slog.Logger) harnessOption {
	return func(o *callpath.Options) { o.Logger = l }
}

// marker returns a unique string that cannot appear anywhere by chance.
func marker(kind string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return kind + "-" + hex.EncodeToString(b)
}

// TestSecretsStayOutOfLogsAndMetrics drives many requests, good and hostile,
// through a gateway logging JSON at debug level, then checks that no full
// idempotency key (nor any 12-character piece of one), no bearer token and
// no body content appears in the log or on /metrics; that every log line is
// one JSON object (nothing a client sent split a line); and that every tool
// label is a configured tool or "unknown".
func TestSecretsStayOutOfLogsAndMetrics(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	tokenAcme, tokenGlobex, tokenAdmin := marker("TOKACME"), marker("TOKGLOBEX"), marker("TOKADMIN")
	bodyMarker := marker("BODY")

	provision := newTestTool("provision")
	failing := newTestTool("failing")
	failing.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		return nil, errors.New("upstream said no")
	}
	erroring := newTestTool("erroring")
	erroring.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		return &tools.Response{Status: 503, Body: []byte(`{"echo":` + string(req.Arguments) + `}`)}, nil
	}
	panicking := newTestTool("panicking")
	panicking.behave = func(ctx context.Context, req *tools.Request) (*tools.Response, error) {
		panic("tool bug")
	}
	lookup := newTestTool("lookup")
	lookup.readOnly = true
	store := &hookStore{Store: newStore(t, storeEmbedded)}
	h := newHarness(t, storeEmbedded, []tools.Tool{provision, failing, erroring, panicking, lookup},
		withStore(store), withLogger(logger), withAdmin(tokenAdmin),
		withTenants(map[string]string{"acme": tokenAcme, "globex": tokenGlobex}))
	configured := []string{"provision", "failing", "erroring", "panicking", "lookup"}

	var secrets []string // every full key, token and body marker sent
	secrets = append(secrets, tokenAcme, tokenGlobex, tokenAdmin, bodyMarker)
	requests := 0
	call := func(c callSpec) response {
		requests++
		if c.key == "" && c.session != "" {
			// Bodies that are not JSON have no derived key; the harness then
			// sends none.
			c.key, _ = keyderive.Key(c.session, c.step, c.tool, []byte(c.args))
		}
		if c.key != "" {
			secrets = append(secrets, c.key)
		}
		return h.do(c)
	}
	args := func(i int) string { return fmt.Sprintf(`{"note":"%s","i":%d}`, bodyMarker, i) }

	for i := 0; i < 6; i++ {
		tok := tokenAcme
		if i%2 == 1 {
			tok = tokenGlobex
		}
		session := marker("SESSION")
		c := callSpec{tool: "provision", session: session, step: uint64(i), args: args(i), token: tok}
		call(c) // executed
		call(c) // replayed
		// Same key, other arguments: key reused or mismatch.
		reused := c
		reused.args = args(i + 100)
		call(reused)
		// Same step, other arguments: step conflict.
		call(callSpec{tool: "provision", session: session, step: uint64(i), args: args(i + 200), token: tok})
		// Failures of every kind.
		call(callSpec{tool: "failing", session: session, step: 1000 + uint64(i), args: args(i), token: tok})
		call(callSpec{tool: "erroring", session: session, step: 2000 + uint64(i), args: args(i), token: tok})
		call(callSpec{tool: "panicking", session: session, step: 3000 + uint64(i), args: args(i), token: tok})
		call(callSpec{tool: "lookup", args: args(i), token: tok})
	}
	// The store goes down for a moment.
	store.down.Store(true)
	call(callSpec{tool: "provision", session: marker("SESSION"), step: 1, args: args(1), token: tokenAcme})
	store.down.Store(false)

	// Hostile requests: keys and tokens in odd places.
	fullKey := derivedKey(t, "x", 1, "provision", args(1))
	secrets = append(secrets, fullKey)
	for _, c := range []callSpec{
		{tool: fullKey, session: "x", step: 1, args: args(1), token: tokenAcme},                                                          // a key as the tool name
		{tool: "provision", key: "\"" + fullKey + "\\x\"", args: args(1), token: tokenAcme},                                              // malformed quoted key
		{tool: "provision", key: fullKey[:63] + "Z", args: args(1), token: tokenAcme},                                                    // malformed key
		{tool: "provision", key: fullKey, args: args(1), token: tokenAcme, omit: []string{"Agent-Session-Id"}},                           // session missing
		{tool: "provision", session: "x", step: 1, args: args(1), key: fullKey + "0", token: tokenAcme},                                  // key too long
		{tool: "provision", session: "x", step: 2, args: args(1), key: fullKey, token: tokenAcme},                                        // key mismatch
		{tool: "provision", session: "x", step: 1, args: `{"note":"` + bodyMarker + `"`, token: tokenAcme},                               // truncated JSON
		{tool: "provision", session: "x", step: 1, args: `{"note":"` + bodyMarker + strings.Repeat("x", 2<<20) + `"}`, token: tokenAcme}, // too large
		{tool: "provision", session: "x", step: 1, args: args(1), token: marker("WRONGTOKEN")},
		{tool: "provision", session: "x", step: 1, args: args(1), token: tokenAdmin},
		{tool: "provision", session: "x", step: 1, args: args(1), headers: map[string]string{"Authorization": "Basic " + tokenAcme}},
	} {
		if c.token != "" && strings.HasPrefix(c.token, "WRONGTOKEN") {
			secrets = append(secrets, c.token)
		}
		call(c)
	}
	for _, path := range []string{
		"/admin/v1/records/acme/provision/" + fullKey,
		"/admin/v1/records/acme/provision/%22" + fullKey + "%22",
		"/api/tools/v1/" + fullKey,
	} {
		h.get(path, tokenAdmin)
		h.send(http.MethodDelete, path, tokenAdmin)
		h.get(path, tokenAcme)
	}
	provisionKey := derivedKey(t, "x", 9, "provision", args(9))
	call(callSpec{tool: "provision", session: "x", step: 9, args: args(9), token: tokenAcme})
	h.send(http.MethodDelete, "/admin/v1/records/acme/provision/"+provisionKey, tokenAdmin)

	metricsText := string(h.get("/metrics", "").body)
	logText := logs.String()
	if !strings.Contains(metricsText, "gateway_requests_total") {
		t.Fatalf("no request metrics:\n%s", metricsText)
	}
	for _, s := range secrets {
		for _, piece := range pieces(s) {
			if strings.Contains(logText, piece) {
				t.Errorf("log contains %q (from secret %.20s…)", piece, s)
			}
			if strings.Contains(metricsText, piece) {
				t.Errorf("metrics contain %q (from secret %.20s…)", piece, s)
			}
		}
	}
	if strings.Contains(metricsText, "SESSION-") {
		t.Error("a session id became a metric label")
	}

	// Every line is one JSON object; the access log has a line per request.
	accessLines := 0
	sc := bufio.NewScanner(strings.NewReader(logText))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not one JSON object: %q", sc.Text())
		}
		if line["msg"] == "request" {
			accessLines++
			if tool, _ := line["tool"].(string); tool != "unknown" && !contains(configured, tool) {
				t.Errorf("log line with tool %q", tool)
			}
			if kp, _ := line["key_prefix"].(string); len(kp) > 8 {
				t.Errorf("key_prefix %q longer than 8", kp)
			}
		}
	}
	if accessLines < requests {
		t.Fatalf("%d access log lines for %d tool API requests", accessLines, requests)
	}
	assertBoundedToolLabels(t, h, configured...)
}

// pieces returns the secret itself and, for keys, every 12-character
// window: a log may carry a key's 8-character prefix, never more of it.
func pieces(secret string) []string {
	out := []string{secret}
	if len(secret) >= 64 {
		for i := 0; i+12 <= len(secret); i += 4 {
			out = append(out, secret[i:i+12])
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// A store failure is logged with the key's prefix only: the error a store
// returns names the record it failed on, and that error reaches the log.
// A full key in a log line could be replayed by whoever reads the log.
func TestStoreFailureLogHasNoFullKey(t *testing.T) {
	// Nothing listens on port 1: every store call fails at once.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: "storefailure:"})
	logs := &testutil.LockedBuffer{}
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("provision")},
		withStore(store), withLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))

	args := `{"n":1}`
	key := derivedKey(t, "secret-session", 4, "provision", args)
	wantProblem(t, h.do(callSpec{tool: "provision", session: "secret-session", step: 4, args: args}), 503, wire.CodeStoreUnavailable)

	text := logs.String()
	if !strings.Contains(text, "store claim failed") {
		t.Fatalf("no store failure was logged:\n%s", text)
	}
	if !strings.Contains(text, key[:8]) {
		t.Fatalf("the failure's log line lacks the key prefix %s:\n%s", key[:8], text)
	}
	for _, piece := range pieces(key) {
		if strings.Contains(text, piece) {
			t.Fatalf("a log line holds %q, a piece of the full key:\n%s", piece, text)
		}
	}
}
