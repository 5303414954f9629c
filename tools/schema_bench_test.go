package tools_test

import (
	"testing"

	"github.com/toolgateway/toolgateway/schemas"
	"github.com/toolgateway/toolgateway/tools"
)

// BenchmarkValidate measures the per-request schema check on arguments
// already decoded (the gateway decodes once, in keyderive.Decode), with the
// schema compiled once at start-up, as the gateway does.
func BenchmarkValidate(b *testing.B) {
	provision, err := schemas.Load("provision-infra")
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name, schema, args string
	}{
		{"small", `{"type":"object","properties":{"seq":{"type":"integer","minimum":0},"op":{"type":"string"},"payload":{"type":"string"}},"required":["seq","op"]}`,
			`{"op":"bench","payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","seq":42}`},
		{"provision-infra", string(provision),
			`{"name":"web-1","region":"eu-west-1","cpus":4,"memory_gb":16,"disks":[{"size":100,"type":"ssd"},{"size":500,"type":"hdd"}]}`},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			schema, err := tools.CompileSchema("bench", []byte(c.schema))
			if err != nil {
				b.Fatal(err)
			}
			args, err := tools.DecodeArguments([]byte(c.args))
			if err != nil {
				b.Fatal(err)
			}
			if v := schema.Validate(args); v != nil {
				b.Fatalf("arguments invalid: %v", v)
			}
			b.ReportAllocs()
			for b.Loop() {
				if v := schema.Validate(args); v != nil {
					b.Fatal(v)
				}
			}
		})
	}
}
