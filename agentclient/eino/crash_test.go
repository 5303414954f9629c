package eino_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient/eino"
	"github.com/toolgateway/toolgateway/internal/gatewayproc"
	"github.com/toolgateway/toolgateway/wire"
)

// execution is one run of the upstream tool, as the upstream saw it.
type execution struct {
	Session string
	Step    uint64
	Name    string
}

// countingUpstream is the provision tool behind the gateway: it counts
// what it executes, and can hold the executions of one name until the test
// lets them go.
type countingUpstream struct {
	mu         sync.Mutex
	executions []execution
	holdName   string
	held       chan struct{} // closed when a held execution arrived
	release    chan struct{} // closing it lets held executions answer
}

func (u *countingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var args struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	step, _ := strconv.ParseUint(r.Header.Get(wire.HeaderStepIndex), 10, 64)
	u.mu.Lock()
	u.executions = append(u.executions, execution{Session: r.Header.Get(wire.HeaderSessionID), Step: step, Name: args.Name})
	n := len(u.executions)
	hold := args.Name == u.holdName
	held, release := u.held, u.release
	u.mu.Unlock()
	if hold {
		close(held)
		<-release
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"resource":%q,"execution":%d}`, args.Name, n)
}

// hold makes the next execution of name wait for the returned release.
func (u *countingUpstream) hold(name string) (held <-chan struct{}, release func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holdName, u.held, u.release = name, make(chan struct{}), make(chan struct{})
	return u.held, sync.OnceFunc(func() { close(u.release) })
}

// of returns the executions of session.
func (u *countingUpstream) of(session string) []execution {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []execution
	for _, e := range u.executions {
		if e.Session == session {
			out = append(out, e)
		}
	}
	return out
}

// startGateway builds cmd/gateway, starts it on an embedded store in a temp
// directory with the provision tool served by upstream, and returns its URL.
func startGateway(t *testing.T, upstream http.Handler) string {
	t.Helper()
	return startGatewayWith(t, upstream, "", "")
}

// startGatewayWith is startGateway with more YAML: toolYAML in the
// provision tool (indented by 4), topYAML at the top level.
func startGatewayWith(t *testing.T, upstream http.Handler, toolYAML, topYAML string) string {
	t.Helper()
	upstreamServer := httptest.NewServer(upstream)
	t.Cleanup(upstreamServer.Close)

	bin := gatewayproc.Build(t, "./cmd/gateway")
	dir := t.TempDir()
	config := fmt.Sprintf(`listen: 127.0.0.1:0
store:
  path: %s
tools:
  - name: provision
    description: allocates a resource
    input_schema: {type: object, required: [name], properties: {name: {type: string}}}
    http:
      url: %s/provision
%s%s`, filepath.Join(dir, "gateway.db"), upstreamServer.URL, toolYAML, topYAML)
	configPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return gatewayproc.Start(t, exec.Command(bin, "-config", configPath))
}

// agentProcess is a running agent: this test binary re-executed as the
// agent (TestMain), its stdout lines on a channel.
type agentProcess struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
}

func startAgent(t *testing.T, config agentConfig) *agentProcess {
	t.Helper()
	configJSON, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+string(configJSON))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &agentProcess{cmd: cmd, lines: make(chan string, 16), stderr: &strings.Builder{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		defer close(p.lines)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			p.lines <- lines.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *agentProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// waitLine waits for a line starting with prefix and returns the rest.
func (p *agentProcess) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				_ = p.cmd.Wait()
				t.Fatalf("the agent ended without printing %q: %s", prefix, p.stderr.String())
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
		case <-timeout:
			p.kill(t) // stderr is complete once the process is reaped
			t.Fatalf("no %q from the agent: %s", prefix, p.stderr.String())
		}
	}
}

// finish waits for the run's final answer and a clean exit, and returns the
// tool results the model was shown.
func (p *agentProcess) finish(t *testing.T) []string {
	t.Helper()
	final := p.waitLine(t, lineFinal)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("agent: %v\n%s", err, p.stderr.String())
	}
	var results []string
	if err := json.Unmarshal([]byte(final), &results); err != nil {
		t.Fatalf("final answer %q: %v", final, err)
	}
	return results
}

// checkExecutions compares the upstream's executions of session, in any
// order, with want.
func checkExecutions(t *testing.T, upstream *countingUpstream, session string, want ...execution) {
	t.Helper()
	got := upstream.of(session)
	order := func(a, b execution) int { return int(a.Step) - int(b.Step) }
	slices.SortFunc(got, order)
	slices.SortFunc(want, order)
	if !slices.Equal(got, want) {
		t.Errorf("upstream executions of %s:\n got %+v\nwant %+v", session, got, want)
	}
}

// TestCrashedAgentsRunEachToolCallOnce is the adapter's proof: a real Eino
// graph with a file checkpoint store, in agent processes that are killed
// with SIGKILL, against the real gateway binary; every case is counted at
// the upstream.
func TestCrashedAgentsRunEachToolCallOnce(t *testing.T) {
	upstream := &countingUpstream{}
	gatewayURL := startGateway(t, upstream)
	checkpoints := t.TempDir()

	t.Run("discovery gives the model the gateway's tool", func(t *testing.T) {
		infos, err := eino.Discover(t.Context(), nil, gatewayURL, "")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(infos, func(info *schema.ToolInfo) bool { return info.Name == provisionTool })
		if i < 0 {
			t.Fatalf("%s not discovered: %+v", provisionTool, infos)
		}
		params, err := infos[i].ParamsOneOf.ToJSONSchema()
		if err != nil {
			t.Fatal(err)
		}
		if infos[i].Desc != "allocates a resource" || !slices.Equal(params.Required, []string{"name"}) || params.Properties.Len() != 1 {
			t.Errorf("discovered %+v with parameters %+v", infos[i], params)
		}
	})
	agent := func(thread string, script ...[]string) agentConfig {
		return agentConfig{Gateway: gatewayURL, CheckpointDir: checkpoints, Thread: thread, Script: script}
	}

	t.Run("killed while the tool runs, resumed in a new process", func(t *testing.T) {
		const thread = "thread-in-flight"
		held, release := upstream.hold("db-in-flight")
		defer release()
		first := startAgent(t, agent(thread, []string{"db-in-flight"}))
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			first.kill(t)
			t.Fatalf("the tool was never called: %s", first.stderr.String())
		}
		first.kill(t)
		release() // the upstream answers the gateway after the agent died

		results := startAgent(t, agent(thread, []string{"db-in-flight"})).finish(t)
		checkExecutions(t, upstream, thread, execution{thread, 0, "db-in-flight"})
		if len(results) != 1 || !strings.Contains(results[0], `"resource":"db-in-flight"`) {
			t.Errorf("the model was shown %q, want the tool's result", results)
		}
	})

	t.Run("killed after the tool ran, before the next checkpoint", func(t *testing.T) {
		const thread = "thread-after-tool"
		config := agent(thread, []string{"db-after"})
		config.HangAtTurn = 2 // the model turn after the tool results
		first := startAgent(t, config)
		first.waitLine(t, lineModelWaits)
		checkExecutions(t, upstream, thread, execution{thread, 0, "db-after"})
		first.kill(t)

		results := startAgent(t, agent(thread, []string{"db-after"})).finish(t)
		checkExecutions(t, upstream, thread, execution{thread, 0, "db-after"})
		if len(results) != 1 || !strings.Contains(results[0], `"execution":`) {
			t.Errorf("the model was shown %q, want the replayed result", results)
		}
	})

	t.Run("regenerated turn: same calls replayed, other arguments get step_conflict", func(t *testing.T) {
		const thread = "thread-regenerated"
		startAgent(t, agent(thread, []string{"web"}, []string{"cache"})).finish(t)
		want := []execution{{thread, 0, "web"}, {thread, 1, "cache"}}
		checkExecutions(t, upstream, thread, want...)

		// Fork from the first checkpoint (the model's first turn, before its
		// tools ran): the second turn is generated again.
		same := agent(thread, []string{"web"}, []string{"cache"})
		same.ReadCheckpoint, same.WriteCheckpoint = thread+"@1", thread+"-fork-same"
		results := startAgent(t, same).finish(t)
		checkExecutions(t, upstream, thread, want...)
		if len(results) != 2 || !strings.Contains(results[1], `"resource":"cache"`) {
			t.Errorf("the regenerated run was shown %q, want both replayed results", results)
		}

		other := agent(thread, []string{"web"}, []string{"queue"})
		other.ReadCheckpoint, other.WriteCheckpoint = thread+"@1", thread+"-fork-other"
		results = startAgent(t, other).finish(t)
		checkExecutions(t, upstream, thread, want...)
		if len(results) != 2 || !strings.HasPrefix(results[1], wire.CodeStepConflict+": this call of provision was NOT run. Step 1 of this conversation already ran a call of provision (execution ") {
			t.Errorf("the model was shown %q, want a step_conflict for the changed call", results)
		}
	})

	t.Run("arguments the schema refuses reach the model, the run goes on", func(t *testing.T) {
		const thread = "thread-invalid"
		results := startAgent(t, agent(thread, []string{`{"name":5}`}, []string{"fixed"})).finish(t)
		checkExecutions(t, upstream, thread, execution{thread, 1, "fixed"})
		if len(results) != 2 || !strings.Contains(results[0], wire.CodeInvalidArguments) || !strings.Contains(results[1], `"resource":"fixed"`) {
			t.Errorf("the model was shown %q, want invalid_arguments then the fixed call's result", results)
		}
	})

	t.Run("parallel calls of one turn get distinct steps", func(t *testing.T) {
		const thread = "thread-parallel"
		config := agent(thread, []string{"a", "b", "c"}, []string{"d"})
		config.HangAtTurn = 2
		first := startAgent(t, config)
		first.waitLine(t, lineModelWaits)
		first.kill(t)
		startAgent(t, agent(thread, []string{"a", "b", "c"}, []string{"d"})).finish(t)
		checkExecutions(t, upstream, thread,
			execution{thread, 0, "a"}, execution{thread, 1, "b"}, execution{thread, 2, "c"}, execution{thread, 3, "d"})
	})
}
