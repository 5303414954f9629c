package eino_test

// docs/runtimes-go.md shows this file from its imports to its end
// (TestDocsShowTheExample); the crash test's agent runs it.

import (
	"context"
	"errors"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/agentclient/eino"
)

// State is the graph's state: the run's messages. Eino checkpoints it, so
// its type is registered under a name of its own; keep the name, or the
// checkpoints already stored no longer load.
type State struct {
	Messages []*schema.Message
}

func init() {
	schema.RegisterName[*State]("myapp_agent_state")
}

// Agent is a compiled model → tools loop.
type Agent = compose.Runnable[[]*schema.Message, *schema.Message]

// newAgent compiles the model → tools loop with the gateway's tools,
// checkpointed in store before each run of the tools node.
func newAgent(ctx context.Context, gatewayURL string, chatModel model.ToolCallingChatModel, store compose.CheckPointStore) (Agent, error) {
	gw := eino.New(agentclient.New(gatewayURL), eino.StateHistory(func(s *State) []*schema.Message { return s.Messages }))
	infos, err := eino.Discover(ctx, nil, gatewayURL, "") // or your own []*schema.ToolInfo
	if err != nil {
		return nil, err
	}
	toolsNode, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: gw.Tools(infos...)})
	if err != nil {
		return nil, err
	}
	if chatModel, err = chatModel.WithTools(infos); err != nil {
		return nil, err
	}

	graph := compose.NewGraph[[]*schema.Message, *schema.Message](compose.WithGenLocalState(func(context.Context) *State { return &State{} }))
	err = errors.Join(
		graph.AddChatModelNode("model", chatModel, compose.WithStatePreHandler(
			func(_ context.Context, in []*schema.Message, s *State) ([]*schema.Message, error) {
				s.Messages = append(s.Messages, in...) // the question, then each turn's tool results
				return s.Messages, nil
			})),
		graph.AddToolsNode("tools", toolsNode, compose.WithStatePreHandler(
			func(_ context.Context, in *schema.Message, s *State) (*schema.Message, error) {
				if in == nil { // the node resumed after a tool's interrupt (an approval): the turn is in the history already
					return in, nil
				}
				s.Messages = append(s.Messages, in) // the model's turn joins the history before any tool runs
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
		return nil, err
	}
	return graph.Compile(ctx,
		compose.WithNodeTriggerMode(compose.AnyPredecessor),
		compose.WithMaxRunSteps(50),
		compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes([]string{"tools"}), // the model's turn is checkpointed before its tools run
	)
}

// runThread runs the conversation threadID to its end: its first run, or
// its resumption from its last checkpoint after a crash. Before each run
// of the tools node the agent stops with an interrupt, its state stored;
// Invoke again with the same checkpoint id goes on from there. A call the
// gateway holds for a human's approval stops the run too: that interrupt
// is returned (eino.PendingApprovals(err) lists the approvals), and the
// app runs the thread again once the human answered.
func runThread(ctx context.Context, agent Agent, threadID string, input []*schema.Message) (*schema.Message, error) {
	ctx = eino.WithSession(ctx, threadID) // the run's id, kept by resumes and forks
	for {
		answer, err := agent.Invoke(ctx, input, compose.WithCheckPointID(threadID))
		if _, interrupted := compose.ExtractInterruptInfo(err); !interrupted || len(eino.PendingApprovals(err)) > 0 {
			return answer, err
		}
	}
}

// ask puts question to the conversation threadID: a new one, or one to
// resume after a crash or a human's answer to an approval (then question
// is not read again: the checkpoint holds the conversation).
func ask(ctx context.Context, gatewayURL string, chatModel model.ToolCallingChatModel, checkpointDir, threadID, question string) (*schema.Message, error) {
	store, err := eino.NewFileCheckPointStore(checkpointDir) // keep it: a resume reads it
	if err != nil {
		return nil, err
	}
	agent, err := newAgent(ctx, gatewayURL, chatModel, store)
	if err != nil {
		return nil, err
	}
	return runThread(ctx, agent, threadID, []*schema.Message{schema.UserMessage(question)})
}
