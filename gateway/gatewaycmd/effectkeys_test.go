package gatewaycmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// effectConfig is an embedded-store config with one HTTP tool carrying
// the given effect_key and schema lines.
func effectConfig(t *testing.T, effectKey, extra string) string {
	t.Helper()
	return "listen: 127.0.0.1:0\nstore:\n  path: " + filepath.Join(t.TempDir(), "gw.db") + "\ntools:\n" +
		"  - name: refund\n    http:\n      url: http://127.0.0.1:1/refund\n    effect_key: " + effectKey + "\n" + extra
}

// TestCheckRefusesMalformedEffectKeys: check (and start-up) refuse a
// malformed template, naming the field and what is wrong.
func TestCheckRefusesMalformedEffectKeys(t *testing.T) {
	cases := map[string]string{
		`"refund:{/txn_id"`:                  "not closed",
		`"refund:{txn_id}"`:                  "must start with '/'",
		`"refund:{/t~2}"`:                    "'~' must be followed by 0 or 1",
		`"refund:/txn_id}"`:                  "closes no",
		`"refund"`:                           "names no argument",
		`"r:{/a}"` + "\n    read_only: true": "read_only",
	}
	for template, want := range cases {
		path := writeConfig(t, effectConfig(t, template, ""))
		var out strings.Builder
		err := RunIO(context.Background(), []string{"gateway", "check", "-config", path}, envOf(nil), strings.NewReader(""), &out)
		if err == nil || !strings.Contains(err.Error(), "tools[0] (refund).effect_key") || !strings.Contains(err.Error(), want) {
			t.Errorf("check of effect_key %s: %v, want an error naming tools[0] (refund).effect_key and %q", template, err, want)
		}
	}
}

// TestCheckWarnsOnUnrequiredEffectMember: a pointer the schema does not
// require is a warning (the config is valid); a required one is not.
func TestCheckWarnsOnUnrequiredEffectMember(t *testing.T) {
	schema := "    input_schema:\n      type: object\n      required: [txn_id]\n      properties:\n        txn_id: {type: string}\n        order: {type: object}\n"
	report, err := Check(writeConfig(t, effectConfig(t, `"refund:{/txn_id}:{/order/id}"`, schema)), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Warnings) != 1 || !strings.Contains(report.Warnings[0], "/order/id") || strings.Contains(report.Warnings[0], "/txn_id ") {
		t.Fatalf("warnings %q, want one naming /order/id", report.Warnings)
	}
	keys := map[string]string{}
	for _, tool := range report.Tools {
		keys[tool.Name] = tool.EffectKey
	}
	if keys["refund"] != "refund:{/txn_id}:{/order/id}" {
		t.Fatalf("tools %+v, want refund with its effect_key", report.Tools)
	}
	var out strings.Builder
	if err := report.writeText(&out); err != nil || !strings.Contains(out.String(), "warning") {
		t.Fatalf("text report %q (%v), want the warning line", out.String(), err)
	}
	report, err = Check(writeConfig(t, effectConfig(t, `"refund:{/txn_id}"`, schema)), envOf(nil))
	if err != nil || len(report.Warnings) != 0 {
		t.Fatalf("required pointer: warnings %q, err %v; want none", report.Warnings, err)
	}
}
