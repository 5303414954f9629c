package eino_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
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
`, filepath.Join(dir, "gateway.db"), upstreamServer.URL)
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
		if len(results) != 2 || !strings.Contains(results[1], wire.CodeStepConflict) {
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

// agentEnv holds the agentConfig (JSON) when the test binary runs as the
// agent process rather than as the tests.
const agentEnv = "TOOLGATEWAY_EINO_AGENT"

// Lines the agent process prints for the test to act on.
const (
	lineModelWaits = "MODEL-WAITS" // the model was called at agentConfig.HangAtTurn and never answers
	lineFinal      = "FINAL "      // followed by the final answer
)

func TestMain(m *testing.M) {
	if config := os.Getenv(agentEnv); config != "" {
		if err := runAgent(config); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// agentConfig is one agent process's run.
type agentConfig struct {
	Gateway       string `json:"gateway"`
	CheckpointDir string `json:"checkpoint_dir"`
	// Thread is the run's thread id: its session, and the checkpoint it
	// resumes from and writes to unless the fields below say otherwise.
	Thread string `json:"thread"`
	// ReadCheckpoint and WriteCheckpoint fork a run: resume from one
	// checkpoint (id@version), write to another.
	ReadCheckpoint  string `json:"read_checkpoint,omitempty"`
	WriteCheckpoint string `json:"write_checkpoint,omitempty"`
	// Script is the scripted model's tool calls per turn (the tool is
	// provision; each string is a name argument, or the whole arguments
	// when it starts with "{"); the turn after the last
	// one answers in text.
	Script [][]string `json:"script"`
	// HangAtTurn makes the model block at that turn (1-based; 0: never).
	HangAtTurn int `json:"hang_at_turn,omitempty"`
}

// State is the graph's state: the run's messages, as an application
// keeps them (Eino checkpoints it).
type State struct {
	Messages []*schema.Message
}

func init() {
	schema.RegisterName[*State]("toolgateway_eino_test_run_state")
}

// provisionTool is the gateway tool the scripted model calls.
const provisionTool = "provision"

// runAgent is the agent process: a model → tools loop as a compose graph,
// checkpointed before each tools node run, resumed until it ends.
func runAgent(configJSON string) error {
	var config agentConfig
	if err := json.Unmarshal([]byte(configJSON), &config); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ctx := context.Background()
	gatewayURL, threadID := config.Gateway, config.Thread

	// The adapter's lines, as docs/runtimes-go.md shows them.
	gw := eino.New(agentclient.New(gatewayURL), eino.StateHistory(func(s *State) []*schema.Message { return s.Messages }))
	infos, err := eino.Discover(ctx, nil, gatewayURL, "") // or your own []*schema.ToolInfo
	if err != nil {
		return err
	}
	ctx = eino.WithSession(ctx, threadID) // the run's id, kept by resumes and forks

	toolsNode, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: gw.Tools(infos...)})
	if err != nil {
		return err
	}
	graph := compose.NewGraph[[]*schema.Message, *schema.Message](compose.WithGenLocalState(func(context.Context) *State { return &State{} }))
	err = errors.Join(
		graph.AddChatModelNode("model", &scriptedModel{config: config}, compose.WithStatePreHandler(
			func(_ context.Context, in []*schema.Message, s *State) ([]*schema.Message, error) {
				s.Messages = append(s.Messages, in...)
				return s.Messages, nil
			})),
		graph.AddToolsNode("tools", toolsNode, compose.WithStatePreHandler(
			func(_ context.Context, in *schema.Message, s *State) (*schema.Message, error) {
				// The model's turn joins the history before any tool runs.
				s.Messages = append(s.Messages, in)
				return in, nil
			})),
		graph.AddEdge(compose.START, "model"),
		graph.AddBranch("model", compose.NewGraphBranch(func(_ context.Context, m *schema.Message) (string, error) {
			if len(m.ToolCalls) > 0 {
				return "tools", nil
			}
			return compose.END, nil
		}, map[string]bool{"tools": true, compose.END: true})),
		graph.AddEdge("tools", "model"),
	)
	if err != nil {
		return err
	}
	run, err := graph.Compile(ctx,
		compose.WithNodeTriggerMode(compose.AnyPredecessor),
		compose.WithMaxRunSteps(50),
		compose.WithCheckPointStore(fileCheckPointStore{dir: config.CheckpointDir}),
		// The model's turn is checkpointed before its tools run.
		compose.WithInterruptBeforeNodes([]string{"tools"}),
	)
	if err != nil {
		return err
	}

	read, write := threadID, threadID
	if config.ReadCheckpoint != "" {
		read = config.ReadCheckpoint
	}
	if config.WriteCheckpoint != "" {
		write = config.WriteCheckpoint
	}
	input := []*schema.Message{schema.UserMessage("provision what the script says")}
	for range 20 {
		out, err := run.Invoke(ctx, input, compose.WithCheckPointID(read), compose.WithWriteToCheckPointID(write))
		if _, interrupted := compose.ExtractInterruptInfo(err); interrupted {
			read = write // resume from the checkpoint just written
			continue
		}
		if err != nil {
			return err
		}
		fmt.Println(lineFinal + out.Content)
		return nil
	}
	return errors.New("the run did not end")
}

// scriptedModel is a chat model without network: at turn n (the number of
// assistant messages in its input) it asks for the script's calls of turn
// n, each with a fresh random call id as real models mint them; after the
// script it answers with the tool results it was shown.
type scriptedModel struct{ config agentConfig }

func (m *scriptedModel) Generate(ctx context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	turn := 0
	var results []string
	for _, message := range input {
		switch message.Role {
		case schema.Assistant:
			turn++
		case schema.Tool:
			results = append(results, message.Content)
		}
	}
	if m.config.HangAtTurn == turn+1 {
		fmt.Println(lineModelWaits)
		<-ctx.Done() // until the test kills the process
		return nil, ctx.Err()
	}
	if turn >= len(m.config.Script) {
		answer, err := json.Marshal(results)
		if err != nil {
			return nil, err
		}
		return schema.AssistantMessage(string(answer), nil), nil
	}
	var calls []schema.ToolCall
	for _, name := range m.config.Script[turn] {
		args := []byte(name)
		if !strings.HasPrefix(name, "{") {
			var err error
			if args, err = json.Marshal(map[string]string{"name": name}); err != nil {
				return nil, err
			}
		}
		calls = append(calls, schema.ToolCall{
			ID:       "call_" + randomHex(),
			Type:     "function",
			Function: schema.FunctionCall{Name: provisionTool, Arguments: string(args)},
		})
	}
	return schema.AssistantMessage("", calls), nil
}

func (m *scriptedModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	message, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{message}), nil
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fileCheckPointStore is an Eino compose.CheckPointStore on files, so a
// checkpoint outlives the process that wrote it. Every Set keeps a new
// version (<dir>/<id>/<n>); Get(id) returns the newest, Get("id@n") version
// n, which is how a test forks a run from an earlier checkpoint (time
// travel).
type fileCheckPointStore struct{ dir string }

func (s fileCheckPointStore) Get(_ context.Context, checkPointID string) ([]byte, bool, error) {
	id, version, pinned := strings.Cut(checkPointID, "@")
	if !pinned {
		versions, err := s.versions(id)
		if err != nil || len(versions) == 0 {
			return nil, false, err
		}
		version = strconv.Itoa(versions[len(versions)-1])
	}
	data, err := os.ReadFile(filepath.Join(s.dir, id, version))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read checkpoint %s: %w", checkPointID, err)
	}
	return data, true, nil
}

func (s fileCheckPointStore) Set(_ context.Context, checkPointID string, checkPoint []byte) error {
	versions, err := s.versions(checkPointID)
	if err != nil {
		return err
	}
	next := 1
	if len(versions) > 0 {
		next = versions[len(versions)-1] + 1
	}
	dir := filepath.Join(s.dir, checkPointID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint directory: %w", err)
	}
	// Written whole, synced, then renamed: a kill -9 leaves the previous
	// version or this one, never half of one.
	tmp, err := os.CreateTemp(dir, "tmp-")
	if err != nil {
		return fmt.Errorf("checkpoint file: %w", err)
	}
	if _, err := tmp.Write(checkPoint); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close checkpoint: %w", err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, strconv.Itoa(next)))
}

// versions lists the stored versions of id, oldest first.
func (s fileCheckPointStore) versions(id string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of %s: %w", id, err)
	}
	var out []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
