package decide

import (
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// TestActivationParsesArgsOnce checks a call's arguments are parsed on the
// first read of args and reused after: bytes changed afterwards (here made
// unparseable) are not read again.
func TestActivationParsesArgsOnce(t *testing.T) {
	in := &Input{Arguments: []byte(`{"amount":7}`)}
	act := &activation{in: in}
	first, _ := act.ResolveName(varArgs)
	in.Arguments = []byte(`{broken`)
	resolved, ok := act.ResolveName(varArgs)
	second, isMap := resolved.(traits.Mapper)
	if !ok || !isMap || second.Equal(first.(ref.Val)) != types.True {
		t.Fatalf("second read of args = %v, want the first parse %v", resolved, first)
	}
	if amount := second.Get(types.String("amount")); amount != types.Int(7) {
		t.Errorf("args.amount = %v, want int 7", amount)
	}
	if _, ok := act.ResolveName("undeclared"); ok {
		t.Error("an undeclared name resolved")
	}
}
