package keyderive

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// vector is one entry of testdata/vectors.json (contract section 8).
type vector struct {
	Name      string `json:"name"`
	SessionID string `json:"session_id"`
	StepIndex uint64 `json:"step_index"`
	Tool      string `json:"tool"`
	Args      string `json:"args"`
	Canonical string `json:"canonical"`
	Key       string `json:"key"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var vectors []vector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatalf("parse vectors: %v", err)
	}
	return vectors
}

func TestVectors(t *testing.T) {
	vectors := loadVectors(t)
	if len(vectors) < 40 {
		t.Fatalf("vectors.json has %d vectors, want at least 40", len(vectors))
	}
	names := map[string]bool{}
	for _, v := range vectors {
		if names[v.Name] {
			t.Fatalf("duplicate vector name %q", v.Name)
		}
		names[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			canonical, err := Canonicalize([]byte(v.Args))
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if string(canonical) != v.Canonical {
				t.Errorf("canonical\n got %s\nwant %s", canonical, v.Canonical)
			}
			key, err := Key(v.SessionID, v.StepIndex, v.Tool, []byte(v.Args))
			if err != nil {
				t.Fatalf("Key: %v", err)
			}
			if key != v.Key {
				t.Errorf("key = %s, want %s", key, v.Key)
			}
			value, decoded, err := Decode([]byte(v.Args))
			if err != nil || string(decoded) != v.Canonical {
				t.Fatalf("Decode = %s, %v; want the canonical bytes", decoded, err)
			}
			if _, isObject := value.(map[string]any); !isObject {
				t.Errorf("Decode value is %T, want map[string]any", value)
			}
			// The classifying parser (used to explain rejections) accepts it too.
			if slow, err := parseIJSON([]byte(v.Args), true); err != nil || !reflect.DeepEqual(slow, value) {
				t.Errorf("parseIJSON = %#v, %v; want %#v", slow, err, value)
			}
			fromCanonical, err := KeyFromCanonical(v.SessionID, v.StepIndex, v.Tool, decoded)
			if err != nil || fromCanonical != v.Key {
				t.Errorf("KeyFromCanonical = %s, %v; want %s", fromCanonical, err, v.Key)
			}
			// Canonical text is a fixed point.
			again, err := Canonicalize(canonical)
			if err != nil || string(again) != string(canonical) {
				t.Errorf("Canonicalize(canonical) = %s, %v", again, err)
			}
		})
	}
}
