package toolscan_test

import (
	"encoding/json"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/toolscan"
)

func TestClassify(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name string
		tool toolscan.Tool
		want string
	}{
		{"config read-only wins over a scary name", toolscan.Tool{Name: "delete-preview", ConfigReadOnly: true}, toolscan.ReadOnly},
		{"money word", toolscan.Tool{Name: "issueRefund"}, toolscan.Consequential},
		{"schema recipient", toolscan.Tool{Name: "notify_team", InputSchema: json.RawMessage(`{"properties":{"to":{"type":"string"}}}`)}, toolscan.Consequential},
		{"nested email format", toolscan.Tool{Name: "x", InputSchema: json.RawMessage(`{"properties":{"user":{"properties":{"contact":{"type":"string","format":"email"}}}}}`)}, toolscan.Consequential},
		{"explicit destructiveHint", toolscan.Tool{Name: "tidy", HasMCP: true, MCP: &toolscan.Annotations{DestructiveHint: &yes}}, toolscan.Consequential},
		{"readOnlyHint without signals", toolscan.Tool{Name: "get_ticket", HasMCP: true, MCP: &toolscan.Annotations{ReadOnlyHint: true}}, toolscan.ReadOnly},
		{"readOnlyHint on a delete is not trusted", toolscan.Tool{Name: "delete_file", HasMCP: true, MCP: &toolscan.Annotations{ReadOnlyHint: true}}, toolscan.Consequential},
		{"nothing said", toolscan.Tool{Name: "frobnicate", HasMCP: true, MCP: &toolscan.Annotations{DestructiveHint: &no}}, toolscan.Unknown},
		{"a POST alone is no evidence", toolscan.Tool{Name: "lookup", HTTPMethod: "POST"}, toolscan.Unknown},
	}
	for _, c := range cases {
		if got := toolscan.Classify(c.tool); got.Class != c.want || len(got.Reasons) == 0 {
			t.Errorf("%s: %s %v, want %s with reasons", c.name, got.Class, got.Reasons, c.want)
		}
	}
}
