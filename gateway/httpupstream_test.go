package gateway_test

// An HTTP upstream tool through the gateway: what the upstream receives,
// which outcomes are recorded and replayed byte for byte.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
	"github.com/toolgateway/toolgateway/tools/httptool"
)

// upstreamCall is one request an upstream received.
type upstreamCall struct {
	path   string
	header http.Header
	body   []byte
}

// recordingUpstream answers POST /<status> with that status, a text body and
// a content type of its own, and /ok with 201 and a vendor JSON type.
type recordingUpstream struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []upstreamCall
}

func newRecordingUpstream(t *testing.T) *recordingUpstream {
	u := &recordingUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.calls = append(u.calls, upstreamCall{path: r.URL.Path, header: r.Header.Clone(), body: body})
		u.mu.Unlock()
		if r.URL.Path == "/ok" {
			w.Header().Set("Content-Type", "application/vnd.up+json; v=1")
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{ "got" :` + string(body) + `}`))
			return
		}
		status, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Type", "text/plain; charset=us-ascii")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("upstream says " + strconv.Itoa(status)))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *recordingUpstream) hits(path string) []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamCall
	for _, c := range u.calls {
		if c.path == path {
			out = append(out, c)
		}
	}
	return out
}

func (u *recordingUpstream) tool(t *testing.T, name, path string) tools.Tool {
	tool, err := httptool.New(httptool.Config{Name: name, URL: u.srv.URL + path})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestHTTPUpstreamTool checks section 4's upstream tool and section 8's
// byte rules: the exact request bytes and forwarded headers, the upstream's
// status, body and Content-Type on the first response and the replay, 5xx
// and 408/425/429 passed through with the execution headers and not stored.
func TestHTTPUpstreamTool(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind storeKind) {
		up := newRecordingUpstream(t)
		toolset := []tools.Tool{up.tool(t, "up-ok", "/ok"), up.tool(t, "up-404", "/404")}
		for _, s := range []string{"500", "503", "408", "425", "429"} {
			toolset = append(toolset, up.tool(t, "up-"+s, "/"+s))
		}
		h := newHarness(t, kind, toolset)

		t.Run("exact bytes, forwarded headers, replay", func(t *testing.T) {
			body := "{ \"size\" :\t2.0 ,\n \"name\":\"db\" }\n"
			key := derivedKey(t, "up", 7, "up-ok", body)
			c := callSpec{tool: "up-ok", args: body, key: `"` + key + `"`,
				headers: map[string]string{"Agent-Session-Id": "up", "Agent-Step-Index": "7", "Content-Type": "application/json; charset=utf-8"}}
			first := h.do(c)
			if first.status != 201 || first.header.Get("Content-Type") != "application/vnd.up+json; v=1" ||
				string(first.body) != `{ "got" :`+body+`}` || first.header.Get("Idempotent-Replayed") != "false" {
				t.Fatalf("first: %d %v %q", first.status, first.header, first.body)
			}
			calls := up.hits("/ok")
			if len(calls) != 1 {
				t.Fatalf("upstream called %d times", len(calls))
			}
			got := calls[0]
			if string(got.body) != body {
				t.Fatalf("upstream got %q, want the client's exact bytes %q", got.body, body)
			}
			want := map[string]string{
				"Content-Type":      "application/json",
				"Idempotency-Key":   scopedKey(callpath.AnonymousTenant, "up-ok", key), // of the unwrapped key
				"Tool-Tenant":       callpath.AnonymousTenant,
				"Agent-Session-Id":  "up",
				"Agent-Step-Index":  "7",
				"Tool-Execution-Id": first.header.Get("Tool-Execution-Id"),
			}
			for name, value := range want {
				if got.header.Get(name) != value {
					t.Fatalf("upstream header %s = %q, want %q", name, got.header.Get(name), value)
				}
			}
			if fence, err := strconv.ParseInt(got.header.Get("Fencing-Token"), 10, 64); err != nil || fence <= 0 {
				t.Fatalf("Fencing-Token %q", got.header.Get("Fencing-Token"))
			}
			c.key = key
			replay := h.do(c)
			if replay.status != 201 || replay.header.Get("Content-Type") != first.header.Get("Content-Type") ||
				string(replay.body) != string(first.body) || replay.header.Get("Idempotent-Replayed") != "true" ||
				replay.header.Get("Tool-Execution-Id") != first.header.Get("Tool-Execution-Id") {
				t.Fatalf("replay differs: %d %v %q", replay.status, replay.header, replay.body)
			}
			if len(up.hits("/ok")) != 1 {
				t.Fatal("the replay reached the upstream")
			}
		})

		t.Run("404 is stored", func(t *testing.T) {
			c := callSpec{tool: "up-404", session: "up404", step: 1, args: `{}`}
			a, b := h.do(c), h.do(c)
			if a.status != 404 || b.status != 404 || b.header.Get("Idempotent-Replayed") != "true" || string(a.body) != string(b.body) ||
				b.header.Get("Content-Type") != "text/plain; charset=us-ascii" || len(up.hits("/404")) != 1 {
				t.Fatalf("404: %d/%d replayed=%q hits=%d", a.status, b.status, b.header.Get("Idempotent-Replayed"), len(up.hits("/404")))
			}
		})

		for _, s := range []string{"500", "503", "408", "425", "429"} {
			t.Run(s+" passes through and is not stored", func(t *testing.T) {
				status, _ := strconv.Atoi(s)
				c := callSpec{tool: "up-" + s, session: "up" + s, step: 1, args: `{}`}
				var ids []string
				for i := 0; i < 2; i++ {
					r := h.do(c)
					if r.status != status || string(r.body) != "upstream says "+s || r.header.Get("Content-Type") != "text/plain; charset=us-ascii" {
						t.Fatalf("attempt %d: %d %q %q", i, r.status, r.header.Get("Content-Type"), r.body)
					}
					if r.header.Get("Idempotent-Replayed") != "false" || r.header.Get("Tool-Execution-Id") == "" {
						t.Fatalf("attempt %d lacks execution headers: %v", i, r.header)
					}
					ids = append(ids, r.header.Get("Tool-Execution-Id"))
				}
				if n := len(up.hits("/" + s)); n != 2 || ids[0] == ids[1] {
					t.Fatalf("upstream ran %d times (want 2), ids %v", n, ids)
				}
				// The step is free again: another call in it is no step_conflict.
				if r := h.do(callSpec{tool: "up-404", session: "up" + s, step: 1, args: `{"other":true}`}); r.status != 404 {
					t.Fatalf("step not freed after %s: %d %s", s, r.status, r.body)
				}
			})
		}
	})
}
