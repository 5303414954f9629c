package eino_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/toolgateway/toolgateway/agentclient"
	"github.com/toolgateway/toolgateway/agentclient/eino"
)

func calls(ids ...string) *schema.Message {
	var out []schema.ToolCall
	for _, id := range ids {
		out = append(out, schema.ToolCall{ID: id, Function: schema.FunctionCall{Name: "provision", Arguments: "{}"}})
	}
	return schema.AssistantMessage("", out)
}

func TestStepOfCountsToolCallsOfEarlierTurns(t *testing.T) {
	history := []*schema.Message{
		schema.UserMessage("go"),
		calls("t1-a", "t1-b"),
		schema.ToolMessage("{}", "t1-a"),
		schema.ToolMessage("{}", "t1-b"),
		schema.AssistantMessage("thinking", nil),
		calls("t2-a", "t2-b", "t2-c"),
	}
	for id, want := range map[string]uint64{"t1-a": 0, "t1-b": 1, "t2-a": 2, "t2-b": 3, "t2-c": 4} {
		got, err := eino.StepOf(history, id)
		if err != nil || got != want {
			t.Errorf("StepOf(%s) = %d, %v; want %d", id, got, err, want)
		}
	}
}

func TestStepOfARegeneratedTurnIsTheSame(t *testing.T) {
	// The same turn generated twice: other call ids, the same steps.
	before := []*schema.Message{schema.UserMessage("go"), calls("x"), schema.ToolMessage("{}", "x")}
	first := append(append([]*schema.Message{}, before...), calls("first-1", "first-2"))
	second := append(append([]*schema.Message{}, before...), calls("second-1", "second-2"))
	for i, pair := range [][2]string{{"first-1", "second-1"}, {"first-2", "second-2"}} {
		a, errA := eino.StepOf(first, pair[0])
		b, errB := eino.StepOf(second, pair[1])
		if errA != nil || errB != nil || a != b || a != uint64(1+i) {
			t.Errorf("call %d: steps %d (%v) and %d (%v), want both %d", i, a, errA, b, errB, 1+i)
		}
	}
}

func TestStepOfAReusedCallIDCountsTheLatestTurn(t *testing.T) {
	// A model that numbers its calls per turn reuses ids: the call being
	// run is the one in the latest turn.
	history := []*schema.Message{calls("call_0"), schema.ToolMessage("{}", "call_0"), calls("call_0")}
	if got, err := eino.StepOf(history, "call_0"); err != nil || got != 1 {
		t.Errorf("StepOf = %d, %v; want 1", got, err)
	}
}

func TestStepOfRefusesACallOutsideTheHistory(t *testing.T) {
	history := []*schema.Message{schema.UserMessage("go"), calls("known")}
	for _, id := range []string{"unknown", ""} {
		if _, err := eino.StepOf(history, id); !errors.Is(err, eino.ErrCallNotInHistory) {
			t.Errorf("StepOf(%q) error = %v, want ErrCallNotInHistory", id, err)
		}
	}
}

func TestToolRefusesToRunWithoutASession(t *testing.T) {
	// Without WithSession there is no identity to call with: an error, and
	// no request (the client points nowhere).
	gw := eino.New(agentclient.New("http://127.0.0.1:1"), func(context.Context) ([]*schema.Message, error) {
		return []*schema.Message{calls("c")}, nil
	})
	_, err := gw.Tool(&schema.ToolInfo{Name: "provision"}).InvokableRun(t.Context(), `{}`)
	if err == nil || !strings.Contains(err.Error(), "WithSession") {
		t.Errorf("InvokableRun without a session: %v, want an error naming WithSession", err)
	}
}
