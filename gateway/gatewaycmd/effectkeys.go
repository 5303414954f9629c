package gatewaycmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/tools"
)

// checkEffectKey refuses a malformed effect_key (callpath.CompileEffectKey
// says what is wrong) and one on a read-only tool, which stores nothing
// to hold it.
func checkEffectKey(t ToolEntry) error {
	if t.EffectKey == "" {
		return nil
	}
	if t.ReadOnly != nil && *t.ReadOnly {
		return errors.New("a read_only tool stores nothing, so it cannot hold an effect key; remove one of them")
	}
	_, err := callpath.CompileEffectKey(t.EffectKey)
	return err
}

// effectKeyWarnings names each effect_key pointer whose member the tool's
// input schema does not require: a call without it is refused with
// invalid_arguments at run time, which the schema could have said first.
func effectKeyWarnings(opts callpath.Options) []string {
	gatewayDefaults := tools.Policy{Timeout: opts.ToolTimeout, ReplayTTL: opts.ReplayTTL}
	var out []string
	for _, e := range opts.Tools.Entries() {
		p := opts.Policies[e.Spec.Name].Resolve(e.Spec.Policy, gatewayDefaults)
		if p.EffectKey == "" || e.Spec.ReadOnly {
			continue
		}
		k, err := callpath.CompileEffectKey(p.EffectKey)
		if err != nil {
			continue // refused before check gets here
		}
		for i, pointer := range k.Pointers() {
			if !schemaRequires(e.Spec.InputSchema, k.Tokens(i)) {
				out = append(out, fmt.Sprintf("tool %s: effect_key pointer %s names a member the input schema does not require; calls without it are refused with invalid_arguments", e.Spec.Name, pointer))
			}
		}
	}
	return out
}

// schemaRequires reports whether schema requires the member at tokens:
// each token listed in "required" of the object schema it lives in, down
// the "properties". An array step cannot be vouched for.
func schemaRequires(schema json.RawMessage, tokens []string) bool {
	var node map[string]any
	if err := json.Unmarshal(schema, &node); err != nil {
		return false
	}
	for _, t := range tokens {
		required, _ := node["required"].([]any)
		if !slices.Contains(required, any(t)) {
			return false
		}
		props, _ := node["properties"].(map[string]any)
		next, ok := props[t].(map[string]any)
		if !ok {
			next = map[string]any{} // required but undescribed: deeper levels cannot be vouched for
		}
		node = next
	}
	return true
}
