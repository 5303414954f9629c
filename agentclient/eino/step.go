package eino

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
)

// HistoryFunc returns the run's message history as the graph state holds it
// while the tools node runs, the assistant message with the tool calls last
// (or among the last messages).
type HistoryFunc func(ctx context.Context) ([]*schema.Message, error)

// StateHistory reads the history from the graph's local state of type S
// (compose.WithGenLocalState), under the state's lock, with messages
// returning the state's message list.
func StateHistory[S any](messages func(S) []*schema.Message) HistoryFunc {
	return func(ctx context.Context) ([]*schema.Message, error) {
		var history []*schema.Message
		err := compose.ProcessState(ctx, func(_ context.Context, state S) error {
			// A copy of the slice header is enough: messages are appended,
			// not changed in place, while the tools node runs.
			history = messages(state)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("toolgateway eino: read the run's messages from the graph state: %w", err)
		}
		return history, nil
	}
}

// ErrCallNotInHistory is returned (wrapped) when the tool call being run is
// in no assistant message of the history: the graph does not append the
// model's message to its state before the tools node runs.
var ErrCallNotInHistory = errors.New("toolgateway eino: tool call not in the run's message history")

// StepOf returns the step index of the tool call callID: the number of tool
// calls in the assistant messages before the last assistant message holding
// callID, plus callID's position in that message.
func StepOf(history []*schema.Message, callID string) (uint64, error) {
	if callID == "" {
		return 0, fmt.Errorf("%w: the tool runs without a tool call id (outside a ToolsNode)", ErrCallNotInHistory)
	}
	// The last message holding the id wins: a scripted or careless model may
	// reuse ids across turns, the current turn is the latest one.
	for i := len(history) - 1; i >= 0; i-- {
		message := history[i]
		if message == nil || message.Role != schema.Assistant {
			continue
		}
		for position, call := range message.ToolCalls {
			if call.ID != callID {
				continue
			}
			var before uint64
			for _, earlier := range history[:i] {
				if earlier != nil && earlier.Role == schema.Assistant {
					before += uint64(len(earlier.ToolCalls))
				}
			}
			return before + uint64(position), nil
		}
	}
	return 0, ErrCallNotInHistory
}
