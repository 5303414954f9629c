package agentclient_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgateway/toolgateway/keyderive"
)

// fakeGateway is a test double of the gateway SERVER (not of its store): it
// re-derives the key, keeps each tool's response by Idempotency-Key in memory
// and replays it, so examples can show the client's side of exactly-once
// calls before the real gateway is wired in.
type fakeGateway struct {
	mu         sync.Mutex
	records    map[string]fakeRecord // tool + "/" + key
	executions int
}

type fakeRecord struct {
	status      int
	body        []byte
	executionID string
}

func newFakeGateway() *fakeGateway {
	return &fakeGateway{records: map[string]fakeRecord{}}
}

// Executions reports how many times a tool actually ran.
func (g *fakeGateway) Executions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.executions
}

func (g *fakeGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tool, ok := strings.CutPrefix(r.URL.Path, "/api/tools/v1/")
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	session := r.Header.Get("Agent-Session-Id")
	step, err := keyderive.ParseStepIndex(r.Header.Get("Agent-Step-Index"))
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "agent_step_malformed")
		return
	}
	derived, err := keyderive.Key(session, step, tool, body)
	if err != nil || derived != key {
		writeProblem(w, http.StatusUnprocessableEntity, "idempotency_key_mismatch")
		return
	}

	g.mu.Lock()
	record, replay := g.records[tool+"/"+key]
	if !replay {
		// "Run" the tool: provision an instance named after the execution.
		g.executions++
		id := fmt.Sprintf("01J8ZK4Q7X%016d", g.executions)
		record = fakeRecord{
			status:      http.StatusCreated,
			body:        []byte(`{"instance":"i-` + strconv.Itoa(g.executions) + `","state":"running"}`),
			executionID: id,
		}
		g.records[tool+"/"+key] = record
	}
	g.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Idempotent-Replayed", strconv.FormatBool(replay))
	w.Header().Set("Tool-Execution-Id", record.executionID)
	w.WriteHeader(record.status)
	w.Write(record.body)
}

func writeProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"about:blank","title":%q,"status":%d,"code":%q,"retryable":false}`, http.StatusText(status), status, code)
}
