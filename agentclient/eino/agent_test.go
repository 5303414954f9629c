package eino_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/agentclient/eino"
)

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
