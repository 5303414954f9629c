package keyderive

import (
	"fmt"
	"strings"
	"testing"
)

// benchmarkArgs builds a realistic pretty-printed arguments object of about
// size bytes: an array of records with strings, numbers, booleans and a
// nested object, members written out of canonical order.
func benchmarkArgs(size int) []byte {
	var b strings.Builder
	b.WriteString("{\n  \"region\": \"eu-west-1\",\n  \"dry_run\": false,\n  \"items\": [")
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n    {\"name\": \"item-%d\", \"price\": %d.25, \"tags\": {\"team\": \"agents\", \"tier\": %d}, \"active\": true}", i, i*7, i%3)
	}
	b.WriteString("\n  ]\n}")
	return []byte(b.String())
}

// benchmarkCanonicalArgs is benchmarkArgs already in canonical form, as
// every SDK sends it (the fast path).
func benchmarkCanonicalArgs(b *testing.B, size int) []byte {
	canonical, err := Canonicalize(benchmarkArgs(size))
	if err != nil {
		b.Fatal(err)
	}
	return append([]byte(nil), canonical...)
}

func benchmarkKey(b *testing.B, size int, canonical bool) {
	args := benchmarkArgs(size)
	if canonical {
		args = benchmarkCanonicalArgs(b, size)
	}
	if _, err := Key("sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 4, "provision-infra", args); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Key("sess-01J8ZK4Q7XKZ3V9W6T2R5M0ABC", 4, "provision-infra", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"200B", 200}, {"4KiB", 4 << 10}, {"256KiB", 256 << 10}} {
		b.Run(size.name, func(b *testing.B) { benchmarkKey(b, size.bytes, false) })
		b.Run(size.name+"-canonical", func(b *testing.B) { benchmarkKey(b, size.bytes, true) })
	}
}

// BenchmarkDecode measures the per-request parse (value tree and
// canonical bytes) for the same argument sizes, pretty-printed and already
// canonical.
func BenchmarkDecode(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"200B", 200}, {"4KiB", 4 << 10}, {"256KiB", 256 << 10}} {
		for _, canonical := range []bool{false, true} {
			name := size.name
			if canonical {
				name += "-canonical"
			}
			b.Run(name, func(b *testing.B) {
				args := benchmarkArgs(size.bytes)
				if canonical {
					args = benchmarkCanonicalArgs(b, size.bytes)
				}
				b.SetBytes(int64(len(args)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := Decode(args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
