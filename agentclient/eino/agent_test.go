package eino_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient/eino"
)

// agentEnv holds the agentConfig (JSON) when the test binary runs as the
// agent process rather than as the tests.
const agentEnv = "TOOLGATEWAY_EINO_AGENT"

// Lines the agent process prints for the test to act on.
const (
	lineModelWaits = "MODEL-WAITS" // the model was called at agentConfig.HangAtTurn and never answers
	lineFinal      = "FINAL "      // followed by the final answer
	lineApproval   = "APPROVAL "   // followed by the approval id the run waits for; the agent then waits to be killed
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
	// ReadCheckpoint and WriteCheckpoint, when set, fork the thread:
	// resume from one checkpoint (id@version), write to another.
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

// provisionTool is the gateway tool the scripted model calls.
const provisionTool = "provision"

// runAgent is the agent process: the example's agent (example_test.go)
// with the scripted model and a file checkpoint store, run to its end.
func runAgent(configJSON string) error {
	var config agentConfig
	if err := json.Unmarshal([]byte(configJSON), &config); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	ctx := context.Background()
	const question = "provision what the script says"
	var (
		answer *schema.Message
		err    error
	)
	if config.ReadCheckpoint == "" {
		answer, err = ask(ctx, config.Gateway, &scriptedModel{config: config}, config.CheckpointDir, config.Thread, question)
	} else {
		answer, err = runFork(ctx, config, question)
	}
	if pending := eino.PendingApprovals(err); len(pending) > 0 {
		fmt.Println(lineApproval + pending[0].ApprovalID)
		select {} // paused until a human answers: the test kills this process
	}
	if err != nil {
		return err
	}
	fmt.Println(lineFinal + answer.Content)
	return nil
}

// runFork is ask for a fork of the thread: the first Invoke reads the
// checkpoint config.ReadCheckpoint (an earlier one, "thread@1") and writes
// config.WriteCheckpoint, the resumes go on from there; the session stays
// the thread's.
func runFork(ctx context.Context, config agentConfig, question string) (*schema.Message, error) {
	store, err := eino.NewFileCheckPointStore(config.CheckpointDir)
	if err != nil {
		return nil, err
	}
	agent, err := newAgent(ctx, config.Gateway, &scriptedModel{config: config}, store)
	if err != nil {
		return nil, err
	}
	ctx = eino.WithSession(ctx, config.Thread)
	read, write := config.ReadCheckpoint, config.WriteCheckpoint
	for {
		answer, err := agent.Invoke(ctx, []*schema.Message{schema.UserMessage(question)}, compose.WithCheckPointID(read), compose.WithWriteToCheckPointID(write))
		if _, interrupted := compose.ExtractInterruptInfo(err); !interrupted {
			return answer, err
		}
		read = write // resume from the checkpoint just written
	}
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

// WithTools implements model.ToolCallingChatModel: the script names the
// tools it calls.
func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}
