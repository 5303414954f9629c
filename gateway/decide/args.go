package decide

import (
	"encoding/json"
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// argsValue turns canonical JSON arguments into the CEL value rules see as
// `args`, or a CEL error value (which fails the rule, so the call is denied)
// when they are not a JSON object.
func argsValue(canonical []byte) ref.Val {
	var obj map[string]any
	if err := json.Unmarshal(canonical, &obj); err != nil {
		return types.NewErr("args: %v", err)
	}
	if obj == nil {
		return types.NewErr("args: %s", "not a JSON object")
	}
	for k, v := range obj {
		obj[k] = celNumbers(v)
	}
	return types.DefaultTypeAdapter.NativeToValue(obj)
}

// celNumbers rewrites the JSON numbers in v, in place, so that integral ones
// are CEL ints and others doubles: canonical JSON (and I-JSON) numbers are
// IEEE doubles, so an integral double within int64 range is exactly that
// integer, and a rule can say `args.count == 3` or `args.tags[0]`.
func celNumbers(v any) any {
	switch t := v.(type) {
	case float64:
		if t == math.Trunc(t) && t >= math.MinInt64 && t < math.MaxInt64 {
			return int64(t)
		}
		return t
	case map[string]any:
		for k, e := range t {
			t[k] = celNumbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = celNumbers(e)
		}
	}
	return v
}

// ArgsValue is argsValue for other packages that evaluate CEL on a call's
// arguments (budget costs), so `args` means the same everywhere.
func ArgsValue(canonical []byte) ref.Val { return argsValue(canonical) }
