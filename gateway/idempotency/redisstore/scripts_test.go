package redisstore

import (
	"regexp"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/redisscript"
)

// scriptArgTypes names each script's ARGV struct.
var scriptArgTypes = map[string]redisscript.Args{
	"claim":        &claimArgs{},
	"renew":        renewArgs{},
	"complete":     &completeArgs{},
	"mark_unknown": markUnknownArgs{},
	"release":      releaseArgs{},
	"delete":       deleteArgs{},
	"resolve":      resolveArgs{},
	"point":        pointArgs{},
	"layout":       layoutArgs{},
	"approve":      approveArgs{},

	"reconcile_claim":    reconcileClaimArgs{},
	"reconcile_attempt":  reconcileAttemptArgs{},
	"reconcile_complete": reconcileCompleteArgs{},
	"reconcile_drop":     reconcileDropArgs{},
	"effect":             effectArgs{},
	"effect_keep":        effectKeepArgs{},
	"effect_drop":        effectDropArgs{},
	"restore":            restoreArgs{},
	"withdraw":           withdrawArgs{},
	"budget":             budgetArgs{},
	"budget_intent":      budgetIntentArgs{},
	"budget_reserve":     budgetReserveArgs{},
	"budget_unreserve":   budgetUnreserveArgs{},
}

// scriptTexts are the embedded scripts by name.
func scriptTexts(t *testing.T) map[string]string {
	t.Helper()
	texts, err := redisscript.Texts(luaFiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) != len(scriptArgTypes) {
		t.Errorf("%d scripts in lua/, %d ARGV structs in scriptArgTypes", len(texts), len(scriptArgTypes))
	}
	return texts
}

var (
	layoutDef = regexp.MustCompile(`(?m)^local ([A-Z]+) = '([^']*)'$`)
	packCall  = regexp.MustCompile(`struct\.(?:un)?pack\(([^,)]+)`)
)

// TestScriptHeaders: every script names each ARGV and KEYS entry once, at
// its top, in order, and reads them nowhere else; its Go struct's lua tags
// are those names in that order, and Argv lists the fields in that order.
func TestScriptHeaders(t *testing.T) {
	for name, text := range scriptTexts(t) {
		args, ok := scriptArgTypes[name]
		if !ok {
			t.Errorf("%s.lua has no ARGV struct in scriptArgTypes", name)
			continue
		}
		if err := redisscript.CheckHeader(text, args); err != nil {
			t.Errorf("%s.lua and %T: %v", name, args, err)
		}
	}
}

// TestScriptLayouts: every script that reads or writes a record declares
// its layout strings at the top, each equal to record.go's constant, and
// packs or unpacks with those names only (no layout literal inline).
func TestScriptLayouts(t *testing.T) {
	want := map[string]string{"HEAD": layoutHead, "PROGRESS": layoutProgress, "DONE": layoutDone, "STEP": layoutStep, "APPROVAL": layoutApproval, "APPROVER": layoutApprover, "HISTORY": layoutHistory, "KEPT": layoutKept}
	for name, text := range scriptTexts(t) {
		declared := map[string]bool{}
		for _, m := range layoutDef.FindAllStringSubmatch(text, -1) {
			w, ok := want[m[1]]
			if !ok {
				t.Errorf("%s.lua declares an unknown layout %s", name, m[1])
				continue
			}
			if m[2] != w {
				t.Errorf("%s.lua: %s = %q, record.go says %q", name, m[1], m[2], w)
			}
			declared[m[1]] = true
		}
		for _, m := range packCall.FindAllStringSubmatch(text, -1) {
			format := strings.TrimSpace(m[1])
			if !declared[format] {
				t.Errorf("%s.lua packs with %s, not a layout declared at its top", name, format)
			}
		}
	}
}
