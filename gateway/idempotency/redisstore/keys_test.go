package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
)

// TestPackIDPacksOnlyCanonicalSpellings: the spellings the gateway mints
// pack to their bytes, every other string (uppercase hex or UUID, a
// lowercase ULID, a near miss) stays text, and every one comes back as it
// was sent.
func TestPackIDPacksOnlyCanonicalSpellings(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	id := ulid.Make().String()
	cases := []struct {
		in   string
		kind byte
	}{
		{hex64, 'h'},
		{strings.ToUpper(hex64), 't'},
		{hex64[:63] + "g", 't'},
		{hex64[:63], 't'},
		{id, 'u'},
		{strings.ToLower(id), 't'},
		{"8ZZZZZZZZZZZZZZZZZZZZZZZZZ", 't'}, // overflows 128 bits
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 'g'},
		{"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", 't'},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fg", 't'},
		{"0f1e2d3c+4b5a-6978-8796-a5b4c3d2e1f0", 't'},
		{"", 't'},
		{"session-1", 't'},
	}
	for _, c := range cases {
		p := packID(c.in)
		if p[0] != c.kind {
			t.Errorf("packID(%q) is kind %q, want %q", c.in, p[0], c.kind)
		}
		if back, ok := unpackID(p); !ok || back != c.in {
			t.Errorf("unpackID(packID(%q)) = %q, %v", c.in, back, ok)
		}
	}
	if got, want := packID(hex64), "h"+string(mustHex(t, hex64)); got != want {
		t.Errorf("packID(hex) = %x, want %x", got, want)
	}
}

// TestTagIsSHA256OfJoinedParts: the hash tag is the first 16 hex digits
// of SHA-256 over the newline-joined parts, short or long (a long part
// does not fit the stack buffer).
func TestTagIsSHA256OfJoinedParts(t *testing.T) {
	for _, parts := range [][]string{{"t"}, {"tenant", "tool", "key"}, {"a", strings.Repeat("s", 1000)}} {
		sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
		if got, want := tag(parts...), hex.EncodeToString(sum[:])[:16]; got != want {
			t.Errorf("tag(%d parts) = %s, want %s", len(parts), got, want)
		}
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzPackID: whatever the string, unpackID gives it back, and packID
// packs it as the plain text-based reference does (stored key names must
// not change with the implementation).
func FuzzPackID(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add(ulid.Make().String())
	f.Add("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	f.Fuzz(func(t *testing.T, s string) {
		if back, ok := unpackID(packID(s)); !ok || back != s {
			t.Fatalf("unpackID(packID(%q)) = %q, %v", s, back, ok)
		}
		if got, want := packID(s), packIDReference(s); got != want {
			t.Fatalf("packID(%q) = %x, the reference packs %x", s, got, want)
		}
	})
}

// packIDReference is packID written with the library's text round trips.
func packIDReference(s string) string {
	switch len(s) {
	case 36:
		if s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
			h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
			if b, err := hex.DecodeString(h); err == nil && hex.EncodeToString(b) == h {
				return "g" + string(b)
			}
		}
	case ulid.EncodedSize:
		if id, err := ulid.ParseStrict(s); err == nil && id.String() == s {
			return "u" + string(id[:])
		}
	case 2 * sha256.Size:
		if b, err := hex.DecodeString(s); err == nil && hex.EncodeToString(b) == s {
			return "h" + string(b)
		}
	}
	return "t" + s
}
